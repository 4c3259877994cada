package caddytest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// fenceRE finds the fenced blocks of a Markdown page: the info string's
// first word, and the body.
var fenceRE = regexp.MustCompile("(?ms)^```(\\w*)[^\\n]*\\n(.*?)^```")

// snippetContexts are what a Caddyfile snippet of the docs may be: a whole
// Caddyfile, the body of a site (directives), or the body of a tile_cache
// block (a layer, an s3 block). A snippet must adapt, without warnings,
// in one of them. Syntax overviews, with <placeholders>, are fenced as
// text and are not configs; every option they list is in a golden adapt
// file (TestCaddyfileAdaptGolden).
var snippetContexts = []struct{ name, before, after string }{
	{"a whole Caddyfile", "", ""},
	{"a site's directives", ":8080 {\nroute {\n", "\n}\n}\n"},
	{"a tile_cache block's options", ":8080 {\ntile_cache http://127.0.0.1:18081/wms {\n", "\n}\n}\n"},
}

// Every Caddyfile snippet of the README and of docs/ adapts, and every
// JSON one is JSON: a reader who copies one gets a config Caddy takes.
func TestDocsCaddyfileSnippetsAdapt(t *testing.T) {
	pages, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, "../README.md")
	snippets := 0
	for _, page := range pages {
		raw, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		text := string(raw)
		for _, m := range fenceRE.FindAllStringSubmatchIndex(text, -1) {
			lang, body := text[m[2]:m[3]], text[m[4]:m[5]]
			line := strings.Count(text[:m[0]], "\n") + 1
			where := filepath.Base(page) + ":" + strconv.Itoa(line)
			switch lang {
			case "caddyfile":
				snippets++
				t.Run(where, func(t *testing.T) {
					var errs []string
					for _, c := range snippetContexts {
						all, err := adaptWarnings(c.before+body+c.after, where)
						// Comments aligned in a column read better in a page
						// than caddy fmt's layout: that warning alone is fine.
						var warnings []string
						for _, w := range all {
							if !strings.Contains(w, "input is not formatted") {
								warnings = append(warnings, w)
							}
						}
						if err == nil && len(warnings) == 0 {
							return
						}
						if err == nil {
							err = fmt.Errorf("warnings: %v", warnings)
						}
						errs = append(errs, c.name+": "+err.Error())
					}
					t.Errorf("the Caddyfile snippet at %s adapts in no context:\n%s\n%s", where, strings.Join(errs, "\n"), body)
				})
			case "json":
				if !json.Valid([]byte(body)) {
					t.Errorf("the JSON snippet at %s is not JSON:\n%s", where, body)
				}
			}
		}
	}
	// The pages have many snippets: finding few means the search broke.
	if snippets < 6 {
		t.Fatalf("only %d Caddyfile snippets found in %v", snippets, pages)
	}
}

// adaptWarnings adapts a Caddyfile and returns every warning Caddy would
// print at start: the adapter's, and those directives log while they are
// parsed, which the adapter does not return (reverse_proxy's "Unnecessary
// header_up X-Forwarded-Host"). Those go to Caddy's default logger, which
// is swapped for a buffer meanwhile, as `caddy run` itself does.
func adaptWarnings(caddyfile, filename string) ([]string, error) {
	_, orig, buf := caddy.BufferedLog()
	defer caddy.UnbufferDefaultLogger(orig)
	_, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), map[string]any{"filename": filename})
	core, logged := observer.New(zap.WarnLevel)
	buf.FlushTo(zap.New(core))
	var all []string
	for _, w := range warnings {
		all = append(all, w.String())
	}
	for _, e := range logged.All() {
		all = append(all, e.Message)
	}
	return all, err
}

// adaptWarnings sees the warnings directives log: without them, a snippet
// Caddy warns about at start would pass TestDocsCaddyfileSnippetsAdapt.
func TestAdaptWarningsIncludeLoggedOnes(t *testing.T) {
	all, err := adaptWarnings(":8080 {\nreverse_proxy 127.0.0.1:18091 {\nheader_up X-Forwarded-Host {hostport}\n}\n}\n", "logged")
	if err != nil || !slices.ContainsFunc(all, func(w string) bool { return strings.Contains(w, "Unnecessary header_up X-Forwarded-Host") }) {
		t.Fatalf("adapting a line Caddy warns about: %v, warnings %q", err, all)
	}
}

// Every option a syntax overview of the docs lists (the first word of each
// line of a text block that shows tile_cache or tile_cache_admin) is used
// in a golden adapt file, whose JSON is checked: an overview cannot name
// an option the adapter does not know.
func TestDocsSyntaxOptionsAreAdapted(t *testing.T) {
	golden, err := filepath.Glob("caddyfile_adapt/*.caddytest")
	if err != nil || len(golden) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	used := map[string]bool{}
	for _, f := range golden {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		caddyfile, _, _ := strings.Cut(string(b), "\n----------\n")
		for _, l := range strings.Split(caddyfile, "\n") {
			if fs := strings.Fields(l); len(fs) > 0 {
				used[fs[0]] = true
			}
		}
	}
	pages, _ := filepath.Glob("../docs/*.md")
	checked := 0
	for _, page := range pages {
		raw, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range fenceRE.FindAllStringSubmatch(string(raw), -1) {
			if m[1] != "text" || !strings.Contains(m[2], "tile_cache") {
				continue
			}
			for _, l := range strings.Split(m[2], "\n") {
				fs := strings.Fields(l)
				if len(fs) == 0 || !regexp.MustCompile(`^[a-z_0-9]+$`).MatchString(fs[0]) {
					continue // braces, comments, site addresses
				}
				checked++
				if !used[fs[0]] {
					t.Errorf("%s: option %q of the syntax overview is in no golden adapt file", filepath.Base(page), fs[0])
				}
			}
		}
	}
	if checked < 50 {
		t.Fatalf("only %d options found in the docs' syntax overviews", checked)
	}
}
