package caddytest

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddytest"
)

// Golden adapt tests, as caddy-l4 keeps them: each caddyfile_adapt/*.caddytest
// holds a Caddyfile, a line of ten dashes, and the JSON it must adapt to.
// Every directive and option of tile_cache, tile_cache_admin and the
// tile_cache global option appears in one of them. UPDATE_GOLDEN=1 rewrites
// the JSON halves from the adapter's output (review the diff before
// committing it).
func TestCaddyfileAdaptGolden(t *testing.T) {
	files, err := filepath.Glob("caddyfile_adapt/*.caddytest")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			caddyfile, want, found := strings.Cut(string(data), "\n----------\n")
			if os.Getenv("UPDATE_GOLDEN") == "1" {
				got := adapt(t, caddyfile)
				if err := os.WriteFile(f, []byte(caddyfile+"\n----------\n"+got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if !found {
				t.Fatalf("%s has no ---------- line and expected JSON", f)
			}
			if !caddytest.CompareAdapt(t, f, caddyfile, "caddyfile", strings.TrimSuffix(want, "\n")) {
				t.Fatal("adapted JSON differs from the golden file")
			}
		})
	}
}

// adapt adapts a Caddyfile to indented JSON, failing on any warning.
func adapt(t *testing.T, caddyfile string) string {
	t.Helper()
	out, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), map[string]any{"filename": "Caddyfile"})
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) > 0 {
		t.Fatalf("warnings: %v", warnings)
	}
	var b bytes.Buffer
	if err := json.Indent(&b, out, "", "\t"); err != nil {
		t.Fatal(err)
	}
	return b.String() + "\n"
}
