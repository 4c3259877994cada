package command

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/offline/geopackage"
)

// `caddy tile-cache export --wait` seeds, writes and downloads a
// GeoPackage; --task resumes a download cut short; usage errors and a
// refused export end with one line and their exit status.
func TestExportCommand(t *testing.T) {
	noTasksLeft(t)
	dir := t.TempDir()
	to := filepath.Join(dir, "world.gpkg")
	r := start(t, cliEnv(t), "export", "--layer", "test:a", "--levels", "0-1", "--to", to, "--wait", "--interval", "1s").wait(5 * time.Minute)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(to) + ` written: \d+(\.\d)? KiB$`).FindString(r.stdout)
	if r.code != 0 || m == "" {
		t.Fatalf("export --wait:\n%s", r)
	}
	g, _ := gridset.Builtin("EPSG:4326")
	gr, err := geopackage.Open(to, g, "")
	if err != nil {
		t.Fatalf("the exported file: %v", err)
	}
	n := 0
	gr.Each(func(gridset.Index, []byte) error { n++; return nil })
	gr.Close()
	if n != 2+8 {
		t.Fatalf("the GeoPackage of levels 0-1 holds %d tiles, want 10", n)
	}
	if _, err := os.Stat(to + ".partial"); !os.IsNotExist(err) {
		t.Errorf("%s.partial left after the download", to)
	}

	// A download cut short after 1000 bytes, resumed with --task.
	whole, _ := os.ReadFile(to)
	ids := regexp.MustCompile(`(?m) task (\d+) EXPORT test:a DONE `).FindStringSubmatch(r.stdout)
	if ids == nil {
		t.Fatalf("no DONE line with the task id in the output:\n%s", r)
	}
	task := ids[1]
	again := filepath.Join(dir, "again.gpkg")
	os.WriteFile(again+".partial", whole[:1000], 0o644)
	r = cli(t, cliEnv(t), "export", "--task", task, "--to", again)
	got, _ := os.ReadFile(again)
	if r.code != 0 || !bytes.Equal(got, whole) {
		t.Fatalf("export --task %s resuming at 1000 bytes: %d of %d bytes, equal %v\n%s", task, len(got), len(whole), bytes.Equal(got, whole), r)
	}

	oneErrorLine(t, cli(t, cliEnv(t), "export", "--layer", "test:a", "--levels", "0-1", "--to", filepath.Join(dir, "w.mbtiles"), "--wait"),
		5, "400 Bad Request: an MBTiles file holds the web mercator world grid only")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"export", "--layer", "test:a", "--levels", "0-1"}, "--to is required"},
		{[]string{"export", "--layer", "test:a", "--levels", "0-1", "--to", "w.zip"}, "--to w.zip: the name must end in .mbtiles or .gpkg"},
		{[]string{"export", "--task", "3", "--layer", "test:a", "--to", "w.gpkg"}, "--task follows an export already submitted: --layer"},
		{[]string{"export", "--layer", "test:a", "--to", "w.gpkg"}, "--levels is required"},
	} {
		r := cli(t, cliEnv(t, "TILECACHE_PASSWORD="), c.args...)
		oneErrorLine(t, r, 1, c.want)
		if strings.Contains(r.stderr, "Password") {
			t.Errorf("%v asked for a password before checking its flags", c.args)
		}
	}
}
