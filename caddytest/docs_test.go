package caddytest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
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
						_, all, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(c.before+body+c.after),
							map[string]any{"filename": where})
						// Comments aligned in a column read better in a page
						// than caddy fmt's layout: that warning alone is fine.
						var warnings []caddyconfig.Warning
						for _, w := range all {
							if !strings.Contains(w.Message, "input is not formatted") {
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
