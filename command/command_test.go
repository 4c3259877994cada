package command

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

func TestParseLevels(t *testing.T) {
	for in, want := range map[string][2]int{"0-8": {0, 8}, "5": {5, 5}, " 3 - 4 ": {3, 4}, "2..7": {2, 7}} {
		a, b, err := parseLevels(in)
		if err != nil || a != want[0] || b != want[1] {
			t.Errorf("parseLevels(%q) = %d, %d, %v; want %v", in, a, b, err, want)
		}
	}
	for _, in := range []string{"", "8-0", "-1", "a-b", "1-2-3", "1,2", "99999999999999999999"} {
		if _, _, err := parseLevels(in); codeOf(err) != ExitUsage {
			t.Errorf("parseLevels(%q): %v, want a usage error", in, err)
		}
	}
}

func TestParseBoundsAndSRS(t *testing.T) {
	b, err := parseBounds("-180,-90, 180,90")
	if err != nil || b[0] != -180 || b[1] != -90 || b[2] != 180 || b[3] != 90 {
		t.Errorf("parseBounds: %v %v", b, err)
	}
	for _, in := range []string{"1,2,3", "1,2,3,x", "3,0,1,1", "0,0,NaN,1", "0,0,1,Inf"} {
		if _, err := parseBounds(in); codeOf(err) != ExitUsage {
			t.Errorf("parseBounds(%q): %v, want a usage error", in, err)
		}
	}
	for in, want := range map[string]int{"3857": 3857, "EPSG:4326": 4326, "epsg:900913": 900913} {
		if n, err := parseSRS(in); err != nil || n != want {
			t.Errorf("parseSRS(%q) = %d, %v", in, n, err)
		}
	}
	if _, err := parseSRS("EPSG:x"); err == nil {
		t.Error("parseSRS(EPSG:x) accepted")
	}
}

// seedFlags parses the flags of a seed, reseed or truncate command line
// as the command does.
func seedFlags(t *testing.T, typ string, args ...string) *seedOptions {
	t.Helper()
	o, c := &seedOptions{}, &cobra.Command{}
	o.addFlags(c, typ)
	if err := c.Flags().Parse(args); err != nil {
		t.Fatal(err)
	}
	o.given = c.Flags().Changed
	return o
}

func TestSeedRequestJSON(t *testing.T) {
	o := seedFlags(t, "reseed", "--layer", "topp:states", "--levels", "0-8", "--srs", "EPSG:3857", "--bounds", "0,0,10,10",
		"--param", "STYLES=population", "--param", "CQL_FILTER=a=1,b", "--threads", "2", "--max-failures", "5")
	r, err := o.request("reseed")
	if err != nil {
		t.Fatal(err)
	}
	if r.Type != "reseed" || r.ZoomStart != 0 || r.ZoomStop != 8 || r.SRS.Number != 3857 || r.ThreadCount != 2 ||
		r.RetryCount != nil || *r.MaxFailures != 5 || len(r.Parameters.Entry) != 2 ||
		r.Parameters.Entry[1].String != [2]string{"CQL_FILTER", "a=1,b"} {
		t.Errorf("request %+v", r)
	}
	o.gridset = "EPSG:4326"
	if _, err := o.request("seed"); err == nil {
		t.Error("--gridset with --srs accepted")
	}
	if _, err := seedFlags(t, "seed", "--layer", "x", "--levels", "1", "--param", "novalue").request("seed"); err == nil {
		t.Error("--param without = accepted")
	}
	// Not given, the server's defaults: no threadCount, no retry fields.
	r, err = seedFlags(t, "seed", "--layer", "x", "--levels", "1").request("seed")
	if err != nil || r.ThreadCount != 0 || r.RetryCount != nil || r.MaxFailures != nil {
		t.Errorf("defaults: %+v %v", r, err)
	}
}

// threadCount is 1 or more: 0 is refused as -1 is, not sent and run as 1
// (the server raises it). The other counts may be 0, not below.
func TestCountsBelowTheirLeast(t *testing.T) {
	box := []string{"--layer", "x", "--levels", "1"}
	list := []string{"--layer", "x", "--tiles", "expire.list"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{append(box, "--threads", "0"), "--threads must be at least 1"},
		{append(box, "--threads", "-1"), "--threads must be at least 1"},
		{append(box, "--retries", "-1"), "--retries must be at least 0"},
		{append(box, "--max-failures", "-1"), "--max-failures must be at least 0"},
		{append(list, "--parents", "-1"), "--parents must be at least 0"},
		{append(list, "--children", "-2"), "--children must be at least 0"},
	} {
		_, err := seedFlags(t, "seed", c.args...).request("seed")
		if codeOf(err) != ExitUsage || err.Error() != c.want {
			t.Errorf("%v: %v, want the usage error %q", c.args, err, c.want)
		}
	}
	for _, args := range [][]string{append(box, "--threads", "1"), append(box, "--retries", "0", "--max-failures", "0"),
		append(list, "--parents", "0", "--children", "0")} {
		if _, err := seedFlags(t, "seed", args...).request("seed"); err != nil {
			t.Errorf("%v: %v", args, err)
		}
	}
}

// A flag that only means something with another is refused without it,
// whatever its value (--buffer 0 too), instead of being left out of the
// request.
func TestFlagsThatNeedAnother(t *testing.T) {
	for flag, needs := range map[string]string{"--buffer": "--geometry", "--geometry-srs": "--geometry",
		"--scheme": "--tiles", "--parents": "--tiles", "--children": "--tiles"} {
		value := map[string]string{"--geometry-srs": "EPSG:3857", "--scheme": "tms"}[flag]
		if value == "" {
			value = "0"
		}
		_, err := seedFlags(t, "seed", "--layer", "x", "--levels", "1", flag, value).request("seed")
		if want := flag + " needs " + needs + " ("; codeOf(err) != ExitUsage || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s without %s: %v, want a usage error %q…", flag, needs, err, want)
		}
	}
	o := seedFlags(t, "seed", "--layer", "x", "--tiles", "-", "--scheme", "tms", "--parents", "0", "--children", "12")
	r, err := o.request("seed")
	if q := o.listQuery(r); err != nil || q != "children=12&parents=0&scheme=tms&type=seed" {
		t.Errorf("with --tiles: %q %v", q, err)
	}
	o = seedFlags(t, "seed", "--layer", "x", "--levels", "1", "--geometry", "-", "--buffer", "0", "--geometry-srs", "EPSG:3857")
	o.stdin = strings.NewReader("POINT(1 2)")
	if r, err := o.request("seed"); err != nil || r.GeometrySRS != "EPSG:3857" {
		t.Errorf("with --geometry: %+v %v", r, err)
	}
}

// An empty or blank first line of the password file is refused before
// anything is sent; spaces inside a password are kept.
func TestPasswordFileFirstLine(t *testing.T) {
	dir := t.TempDir()
	for content, want := range map[string]string{"": "", "\n": "", "\r\nsecret\n": "", "  \t\nsecret": "",
		"a b \r\nsecond": "a b ", " pw": " pw"} {
		f := filepath.Join(dir, "pw")
		if err := os.WriteFile(f, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		p, err := (&connOptions{user: "admin", passwordFile: f}).password()
		if want == "" {
			if codeOf(err) != ExitUsage || !strings.Contains(err.Error(), "--password-file "+f+": ") {
				t.Errorf("%q: %q %v, want a usage error", content, p, err)
			}
		} else if err != nil || p != want {
			t.Errorf("%q: %q %v, want %q", content, p, err, want)
		}
	}
}

func TestBarFitsTheWidthAndTellsTheState(t *testing.T) {
	running := taskInfo{ID: 3, Type: "SEED", Layer: "a", Status: statusRunning, State: "RUNNING", Processed: 50, Total: 200, Remaining: 150}
	for _, w := range []int{20, 40, 79, 200} {
		line := barLine(running, 10, w, "")
		if n := len([]rune(line)); n > w {
			t.Errorf("width %d: %d runes: %q", w, n, line)
		}
	}
	line := barLine(running, 10, 79, "")
	if !strings.HasPrefix(line, "[=====>") || !strings.Contains(line, " 25%  50/200 tiles  10.0 tiles/s  0:15 left") {
		t.Errorf("running: %q", line)
	}
	pending := running
	pending.Status, pending.Processed = statusPending, 0
	if line := barLine(pending, 0, 79, ""); !strings.Contains(line, "PENDING") || strings.Contains(line, "=") {
		t.Errorf("pending: %q", line)
	}
	failed := running
	failed.FailedTiles = 7
	if line := barLine(failed, 10, 79, "(no answer, retrying)"); !strings.Contains(line, "7 failed  (no answer, retrying)") {
		t.Errorf("failed tiles and note: %q", line)
	}
}

func TestClockAndRate(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "--:--", 59 * time.Second: "0:59", 61 * time.Second: "1:01", 3723 * time.Second: "1:02:03"} {
		if got := clock(d); got != want {
			t.Errorf("clock(%s) = %s, want %s", d, got, want)
		}
	}
	m := &rateMeter{window: 10 * time.Second}
	t0 := time.Now()
	m.add(t0, 0)
	if r := m.rate(7); r != 7 {
		t.Errorf("one sample: %v, want the fallback", r)
	}
	for i := 1; i <= 30; i++ {
		m.add(t0.Add(time.Duration(i)*time.Second), int64(i*5)) // 5 tiles/s
	}
	if r := m.rate(0); r != 5 {
		t.Errorf("rate %v, want 5", r)
	}
	if len(m.samples) > 12 {
		t.Errorf("%d samples kept for a 10 s window", len(m.samples))
	}
}

// The kill page as tile_cache_admin writes it (admin/endpoints.go).
func TestKilledTasksFromThePage(t *testing.T) {
	page := "<!DOCTYPE html>\n<html><head></head><body>\n<p>…</p>\n<h2>Terminated tasks</h2>\n<ul>\n" +
		"<li>[12: topp:states, SEED, RUNNING]</li>\n<li>[13: a&amp;b, TRUNCATE, PENDING]</li>\n</ul>\n" +
		"<h2>Tasks that had already finished</h2>\n<ul>\n<li>[9: x, SEED, DONE]</li>\n</ul>\n</body></html>\n"
	got, ok := killedTasks(page)
	if !ok || len(got) != 2 || got[0] != "task 12: SEED of topp:states" || got[1] != "task 13: TRUNCATE of a&b" {
		t.Errorf("killedTasks: %q %v", got, ok)
	}
	if _, ok := killedTasks("<html>GeoWebCache</html>"); ok {
		t.Error("another page read as this cache's")
	}
}

// Statuses map to exit codes, with the server's one-line message and
// without an HTML page's markup.
func TestStatusErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/gwc/rest/seed.json":
			w.Header().Set("Retry-After", "5")
			http.Error(w, "cluster storage unavailable\nsecond line", http.StatusServiceUnavailable)
		case "/gwc/rest/tasks/1.json":
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte("<html><body>Not here</body></html>"))
		case "/gwc/rest/tasks/2.json":
			w.WriteHeader(http.StatusTooManyRequests)
		default:
			http.Redirect(w, r, "https://elsewhere/gwc", http.StatusMovedPermanently)
		}
	}))
	defer srv.Close()
	c, err := newClient(&connOptions{url: srv.URL + "/gwc/", timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, _, err = c.listing(ctx, "")
	if codeOf(err) != ExitUnavailable || err.Error() != "503 Service Unavailable: cluster storage unavailable (retry after 5 s)" {
		t.Errorf("503: %d %v", codeOf(err), err)
	}
	_, err = c.task(ctx, 1)
	if codeOf(err) != ExitRefused || err.Error() != "404 Not Found (is "+srv.URL+"/gwc where tile_cache_admin is mounted?)" {
		t.Errorf("404: %d %v", codeOf(err), err)
	}
	if _, err = c.task(ctx, 2); codeOf(err) != ExitUnavailable {
		t.Errorf("429: %d %v", codeOf(err), err)
	}
	if _, err = c.task(ctx, 3); codeOf(err) != ExitRefused || !strings.Contains(err.Error(), "to https://elsewhere/gwc (give that URL as --url)") {
		t.Errorf("301: %d %v", codeOf(err), err)
	}
}

func TestURLs(t *testing.T) {
	for in, want := range map[string]string{
		"http://h/geowebcache":       "http://h/geowebcache",
		"http://h/geowebcache/":      "http://h/geowebcache",
		"http://h/geowebcache/rest/": "http://h/geowebcache",
		"https://h:8443":             "https://h:8443",
	} {
		c, err := newClient(&connOptions{url: in, timeout: time.Second})
		if err != nil || c.base != want {
			t.Errorf("%s: %v %v, want %s", in, c, err, want)
		}
	}
	for _, in := range []string{"ftp://h/x", "h/geowebcache", "http://h/x?a=1"} {
		if _, err := newClient(&connOptions{url: in, timeout: time.Second}); codeOf(err) != ExitUsage {
			t.Errorf("%s: %v, want a usage error", in, err)
		}
	}
	// From the environment, credentials in the URL are no secret in the process list.
	c, err := newClient(&connOptions{url: "http://u:p@h/gwc", timeout: time.Second})
	if err != nil || c.user != "u" || c.pass != "p" || strings.Contains(c.base, "p@") {
		t.Errorf("credentials in the URL: %+v %v", c, err)
	}
}
