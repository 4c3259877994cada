package command

import (
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tilecache/caddy-tilecache/module/area"
	"github.com/tilecache/caddy-tilecache/module/gridset"
)

var endRe = regexp.MustCompile(`task (\d+) \((seed|reseed|truncate) of test:a\) DONE: (\d+) tiles`)

// The seeding commands take areas other than a box: a polygon from a
// file (--geometry, WKT or GeoJSON), a tile list from a file or stdin
// (--tiles), every stored parameter set (--all-parameters). Each task is
// exactly its area, and the command ends 0 with the task's count.
func TestSeedCommandsTakePolygonsAndTileLists(t *testing.T) {
	noTasksLeft(t)
	const wkt = "POLYGON((-150 -60, 120 -30, -30 80, -150 -60))"
	geom, _, err := area.ParseWKT(wkt, area.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	g, _ := gridset.Builtin("EPSG:4326")
	c := area.NewCover(g, geom, 1)
	var want int64
	for z := 0; z <= 3; z++ {
		want += c.Count(z, g.GridRange(z))
	}
	poly := writeFile(t, "area.wkt", wkt+"\n")
	r := cli(t, cliEnv(t), "seed", "--layer", "test:a", "--gridset", "EPSG:4326", "--levels", "0-3",
		"--geometry", poly, "--buffer", "1", "--wait", "--interval", "1s")
	m := endRe.FindStringSubmatch(r.stdout)
	if r.code != 0 || m == nil || m[3] != itoa(want) {
		t.Fatalf("polygon seed: want exit 0 and DONE with %d tiles:\n%s", want, r)
	}
	if ti := task(t, m[1]); ti.Total != want || ti.State != "DONE" {
		t.Fatalf("the polygon task on the server: %+v", ti)
	}

	// A tile list on stdin, reseeded with its parents up to level 1.
	cmd := exec.Command(caddyBin, "tile-cache", "reseed", "--layer", "test:a", "--gridset", "EPSG:4326", "--tiles", "-",
		"--parents", "1", "--wait", "--interval", "1s")
	cmd.Stdin = strings.NewReader("3/1/1\n3/1/1\n3/2/1\n")
	r = startCmd(t, cmd, cliEnv(t)).wait(60 * time.Second)
	// 3/1/1 and 3/2/1 (XYZ rows: native rows 6), their parents (0,3) and
	// (1,3) at z2 and (0,1) at z1: 5 distinct tiles.
	if m := endRe.FindStringSubmatch(r.stdout); r.code != 0 || m == nil || m[2] != "reseed" || m[3] != "5" {
		t.Fatalf("tile list reseed: want exit 0 and DONE with 5 tiles:\n%s", r)
	}

	// Every stored parameter set of the polygon, truncated.
	r = cli(t, cliEnv(t), "truncate", "--layer", "test:a", "--gridset", "EPSG:4326", "--levels", "0-3",
		"--geometry", poly, "--all-parameters", "--wait", "--interval", "1s")
	if m := endRe.FindStringSubmatch(r.stdout); r.code != 0 || m == nil || m[2] != "truncate" {
		t.Fatalf("truncate of every set: want exit 0:\n%s", r)
	}

	// Bad combinations are usage errors, before any request.
	r = cli(t, cliEnv(t), "seed", "--layer", "test:a", "--levels", "0-3", "--tiles", "-")
	if r.code != 1 || !strings.Contains(r.stderr, "--tiles names the tiles") {
		t.Fatalf("--tiles with --levels: want exit 1 and a usage line:\n%s", r)
	}
	// The server's refusal of a bad polygon: one line, exit 5.
	bad := writeFile(t, "bad.wkt", "POLYGON((0 0, 1 0, 1 1))")
	r = cli(t, cliEnv(t), "seed", "--layer", "test:a", "--levels", "0-3", "--geometry", bad)
	oneErrorLine(t, r, 5, "")
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
