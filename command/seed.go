package command

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

// seedOptions are the flags of seed, reseed and truncate: the fields of
// GeoWebCache's seed request.
type seedOptions struct {
	layer       string
	levels      string
	gridset     string
	srs         string
	bounds      string
	format      string
	params      []string
	threads     int
	retries     int
	maxFailures int
	// Areas other than a box (docs/rest.md, "Areas"): a polygon from a
	// file, or a tile list from a file, and every stored parameter set.
	geometry    string // file ("-": stdin) of GeoJSON or WKT
	geometrySRS string
	buffer      float64
	allParams   bool
	tiles       string // file ("-": stdin) of z/x/y lines
	scheme      string
	parents     int
	children    int
	stdin       io.Reader
	// given says whether a flag is on the command line (pflag's Changed).
	// A flag not given leaves its field to the server's default, and a
	// flag given may be refused even with its default value: --threads 0,
	// or --buffer 0 without --geometry.
	given func(flag string) bool
}

// addFlags adds the flags of seed, reseed or truncate (typ) to c.
func (o *seedOptions) addFlags(c *cobra.Command, typ string) {
	f := c.Flags()
	f.StringVar(&o.layer, "layer", "", "layer name (required)")
	f.StringVar(&o.levels, "levels", "", "zoom levels: 5 or 0-8 (required)")
	f.StringVar(&o.gridset, "gridset", "", "gridset name (default: the layer's first)")
	f.StringVar(&o.srs, "srs", "", "EPSG code instead of --gridset: the layer's gridset in it")
	f.StringVar(&o.bounds, "bounds", "", "minx,miny,maxx,maxy in the gridset's units (default: the whole layer)")
	f.StringVar(&o.format, "format", "", "tile format, e.g. image/png (default: the layer's first)")
	f.StringArrayVar(&o.params, "param", nil, "parameter filter value NAME=VALUE, e.g. STYLES=population (repeatable)")
	f.IntVar(&o.threads, "threads", 0, "workers the task may use at once, 1 or more (default 1; truncate uses 1)")
	f.IntVar(&o.retries, "retries", 0, "retries of a failed metatile (default: the server's)")
	f.IntVar(&o.maxFailures, "max-failures", 0, "failed attempts after which the task is aborted (default: the server's)")
	f.StringVar(&o.geometry, "geometry", "", "file (- for stdin) with a polygon, GeoJSON or WKT: the task is the tiles it overlaps")
	f.StringVar(&o.geometrySRS, "geometry-srs", "", "with --geometry: the polygon's CRS, EPSG:4326 (default) or the gridset's")
	f.Float64Var(&o.buffer, "buffer", 0, "with --geometry: grow the polygon by this many pixels of each level")
	f.StringVar(&o.tiles, "tiles", "", "file (- for stdin) with a tile list, z/x/y lines as osm2pgsql writes them, instead of --levels")
	f.StringVar(&o.scheme, "scheme", "", "with --tiles: the list's rows, xyz (from the top, the default) or tms")
	f.IntVar(&o.parents, "parents", 0, "with --tiles: also the tiles covering them up to this level")
	f.IntVar(&o.children, "children", 0, "with --tiles: also the tiles inside them down to this level")
	if typ == "reseed" || typ == "truncate" {
		f.BoolVar(&o.allParams, "all-parameters", false, "every parameter set stored, whatever its values")
	}
}

// seedRequest is the JSON form of GeoWebCache's seedRequest (decisions.md).
type seedRequest struct {
	Name        string      `json:"name"`
	GridSetID   string      `json:"gridSetId,omitempty"`
	SRS         *srsNumber  `json:"srs,omitempty"`
	Bounds      *bounds     `json:"bounds,omitempty"`
	ZoomStart   int         `json:"zoomStart"`
	ZoomStop    int         `json:"zoomStop"`
	Format      string      `json:"format,omitempty"`
	Type        string      `json:"type"`
	ThreadCount int         `json:"threadCount,omitempty"`
	Parameters  *parameters `json:"parameters,omitempty"`
	RetryCount  *int        `json:"tileFailureRetryCount,omitempty"`
	MaxFailures *int        `json:"totalFailuresBeforeAborting,omitempty"`
	// Extensions of this cache.
	Geometry      json.RawMessage `json:"geometry,omitempty"`
	GeometrySRS   string          `json:"geometrySrs,omitempty"`
	Buffer        float64         `json:"buffer,omitempty"`
	AllParameters bool            `json:"allParameters,omitempty"`
	ExportFormat  string          `json:"exportFormat,omitempty"`
	CachedOnly    bool            `json:"cachedOnly,omitempty"`
}

type srsNumber struct {
	Number int `json:"number"`
}

type bounds struct {
	Coords struct {
		Double []float64 `json:"double"`
	} `json:"coords"`
}

type parameters struct {
	Entry []entry `json:"entry"`
}

type entry struct {
	String [2]string `json:"string"`
}

// request checks the flags and builds the seed request of type typ.
func (o *seedOptions) request(typ string) (seedRequest, error) {
	r := seedRequest{Name: strings.TrimSpace(o.layer), Type: typ, Format: o.format, GridSetID: o.gridset}
	if r.Name == "" {
		return r, usage("--layer is required")
	}
	var err error
	if o.tiles == "" {
		if o.levels == "" {
			return r, usage("--levels is required: a zoom level (5) or a range (0-8)")
		}
		if r.ZoomStart, r.ZoomStop, err = parseLevels(o.levels); err != nil {
			return r, err
		}
	} else if o.levels != "" || o.bounds != "" || o.geometry != "" || o.srs != "" {
		return r, usage("--tiles names the tiles: --levels, --bounds, --geometry and --srs do not go with it (--parents and --children add levels)")
	}
	if err := o.needs(); err != nil {
		return r, err
	}
	if err := o.atLeast(); err != nil {
		return r, err
	}
	if o.geometry != "" {
		b, err := o.readFile("--geometry", o.geometry)
		if err != nil {
			return r, err
		}
		text := bytes.TrimSpace(b)
		if len(text) > 0 && text[0] == '{' {
			r.Geometry = text
		} else {
			r.Geometry, _ = json.Marshal(string(text)) // WKT, as a JSON string
		}
		r.GeometrySRS = o.geometrySRS
	}
	if o.buffer < 0 || math.IsNaN(o.buffer) {
		return r, usage("--buffer must be a number of pixels, 0 or more")
	}
	r.Buffer, r.AllParameters = o.buffer, o.allParams
	if o.gridset != "" && o.srs != "" {
		return r, usage("give --gridset or --srs, not both")
	}
	if o.srs != "" {
		n, err := parseSRS(o.srs)
		if err != nil {
			return r, err
		}
		r.SRS = &srsNumber{n}
	}
	if o.bounds != "" {
		b, err := parseBounds(o.bounds)
		if err != nil {
			return r, err
		}
		r.Bounds = &bounds{}
		r.Bounds.Coords.Double = b
	}
	for _, p := range o.params {
		k, v, ok := strings.Cut(p, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return r, usage("--param %q: NAME=VALUE is expected (e.g. STYLES=population)", p)
		}
		if r.Parameters == nil {
			r.Parameters = &parameters{}
		}
		r.Parameters.Entry = append(r.Parameters.Entry, entry{[2]string{strings.TrimSpace(k), v}})
	}
	r.ThreadCount = o.threads // 0, not given, is left out: the server's default
	if o.given("retries") {
		r.RetryCount = &o.retries
	}
	if o.given("max-failures") {
		r.MaxFailures = &o.maxFailures
	}
	return r, nil
}

// needs refuses a flag given without the one it goes with: the request
// would leave it out, and the task would silently be another than the
// one asked for.
func (o *seedOptions) needs() error {
	for _, n := range []struct {
		flag, needs, why string
		with             bool
	}{
		{"geometry-srs", "geometry", "the polygon's CRS", o.geometry != ""},
		{"buffer", "geometry", "it grows the polygon", o.geometry != ""},
		{"scheme", "tiles", "which way the list's rows count", o.tiles != ""},
		{"parents", "tiles", "it adds levels to the list's", o.tiles != ""},
		{"children", "tiles", "it adds levels to the list's", o.tiles != ""},
	} {
		if o.given(n.flag) && !n.with {
			return usage("--%s needs --%s (%s)", n.flag, n.needs, n.why)
		}
	}
	return nil
}

// atLeast refuses a number given below the least it can be. The server
// takes some such numbers as others (threadCount 0 or -1 runs as 1): the
// command refuses them rather than send what the server would change.
func (o *seedOptions) atLeast() error {
	for _, n := range []struct {
		flag     string
		v, least int
	}{
		{"threads", o.threads, 1},
		{"retries", o.retries, 0},
		{"max-failures", o.maxFailures, 0},
		{"parents", o.parents, 0},
		{"children", o.children, 0},
	} {
		if o.given(n.flag) && n.v < n.least {
			return usage("--%s must be at least %d", n.flag, n.least)
		}
	}
	return nil
}

var levelsRe = regexp.MustCompile(`^\s*(\d+)\s*(?:(?:-|\.\.)\s*(\d+)\s*)?$`)

// parseLevels reads "5" or "0-8" (also "0..8").
func parseLevels(s string) (int, int, error) {
	m := levelsRe.FindStringSubmatch(s)
	if m == nil {
		return 0, 0, usage("--levels %q: a zoom level (5) or a range (0-8) is expected", s)
	}
	a, err1 := strconv.Atoi(m[1])
	b, err2 := a, error(nil)
	if m[2] != "" {
		b, err2 = strconv.Atoi(m[2])
	}
	if err1 != nil || err2 != nil {
		return 0, 0, usage("--levels %q: the levels are too large", s)
	}
	if a > b {
		return 0, 0, usage("--levels %q: the first level is above the last", s)
	}
	return a, b, nil
}

// parseSRS reads 3857 or EPSG:3857.
func parseSRS(s string) (int, error) {
	t := strings.TrimSpace(s)
	if len(t) > 5 && strings.EqualFold(t[:5], "EPSG:") {
		t = t[5:]
	}
	n, err := strconv.Atoi(t)
	if err != nil || n <= 0 {
		return 0, usage("--srs %q: an EPSG code (3857 or EPSG:3857) is expected", s)
	}
	return n, nil
}

// parseBounds reads minx,miny,maxx,maxy (commas or spaces between).
func parseBounds(s string) ([]float64, error) {
	f := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' })
	if len(f) != 4 {
		return nil, usage("--bounds %q: minx,miny,maxx,maxy is expected (in the gridset's units)", s)
	}
	out := make([]float64, 4)
	for i, v := range f {
		x, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, usage("--bounds: %q is not a number", v)
		}
		out[i] = x
	}
	if out[0] >= out[2] || out[1] >= out[3] {
		return nil, usage("--bounds %q: minx must be below maxx and miny below maxy", s)
	}
	return out, nil
}

// readFile reads a file named by a flag, "-" being standard input.
func (o *seedOptions) readFile(flag, name string) ([]byte, error) {
	if name == "-" {
		return io.ReadAll(o.stdin)
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, usage("%s: %v", flag, err)
	}
	return b, nil
}

// listQuery is a tile list request's query string: the request's fields
// and the list's own.
func (o *seedOptions) listQuery(r seedRequest) string {
	q := url.Values{"type": {r.Type}}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("gridSetId", r.GridSetID)
	set("format", r.Format)
	set("scheme", o.scheme)
	if r.ThreadCount > 0 {
		q.Set("threadCount", strconv.Itoa(r.ThreadCount))
	}
	if o.given("parents") {
		q.Set("parents", strconv.Itoa(o.parents))
	}
	if o.given("children") {
		q.Set("children", strconv.Itoa(o.children))
	}
	if r.AllParameters {
		q.Set("allParameters", "true")
	}
	set("exportFormat", r.ExportFormat)
	if r.CachedOnly {
		q.Set("cachedOnly", "true")
	}
	if r.RetryCount != nil {
		q.Set("tileFailureRetryCount", strconv.Itoa(*r.RetryCount))
	}
	if r.MaxFailures != nil {
		q.Set("totalFailuresBeforeAborting", strconv.Itoa(*r.MaxFailures))
	}
	if r.Parameters != nil {
		for _, e := range r.Parameters.Entry {
			q.Set("parameter_"+e.String[0], e.String[1])
		}
	}
	return q.Encode()
}

// submitList posts a tile list, streamed from its file, and returns the
// new task's id.
func (c *client) submitList(ctx context.Context, o *seedOptions, r seedRequest) (int64, error) {
	var body io.Reader = o.stdin
	if o.tiles != "-" {
		f, err := os.Open(o.tiles)
		if err != nil {
			return 0, usage("--tiles: %v", err)
		}
		defer f.Close()
		body = f
	}
	a, err := c.do(ctx, http.MethodPost, "/rest/seed/"+layerPath(r.Name)+"/tiles?"+o.listQuery(r), "text/plain", body)
	if err != nil {
		return 0, err
	}
	return taskOf(a)
}

// layerPath is the path segment of a layer, escaped.
func layerPath(layer string) string { return url.PathEscape(layer) }

var taskIDRe = regexp.MustCompile(`/rest/tasks/(\d+)(?:\.json)?$`)

// submit posts the request and returns the new task's id, read from the
// Location header (an extension of GeoWebCache's interface this cache has).
func (c *client) submit(ctx context.Context, r seedRequest) (int64, error) {
	b, err := json.Marshal(map[string]seedRequest{"seedRequest": r})
	if err != nil {
		return 0, err
	}
	a, err := c.do(ctx, http.MethodPost, "/rest/seed/"+layerPath(r.Name)+".json", "application/json", bytes.NewReader(b))
	if err != nil {
		return 0, err
	}
	return taskOf(a)
}

// taskOf reads the new task's id from an accepted request's Location.
func taskOf(a answer) (int64, error) {
	m := taskIDRe.FindStringSubmatch(a.header.Get("Location"))
	if m == nil {
		// A GeoWebCache answers so: the task started, but which one it is
		// cannot be known, so neither can it be followed.
		return 0, fail(ExitRefused, "the server accepted the task but did not say which it is (no Location header): is it this tile cache?")
	}
	id, _ := strconv.ParseInt(m[1], 10, 64)
	return id, nil
}

// taskInfo is the task's own resource, GET rest/tasks/<id>.json
// (seeder.Info on the server).
type taskInfo struct {
	ID          int64      `json:"id"`
	Layer       string     `json:"layer"`
	Type        string     `json:"type"`
	State       string     `json:"state"`
	Status      int64      `json:"status"`
	Gridset     string     `json:"gridSetId"`
	Format      string     `json:"format"`
	ZoomStart   int        `json:"zoomStart"`
	ZoomStop    int        `json:"zoomStop"`
	Threads     int        `json:"threadCount"`
	Processed   int64      `json:"processed"`
	Total       int64      `json:"total"`
	Remaining   int64      `json:"remaining"`
	FailedTiles int64      `json:"failedTiles"`
	Failures    int64      `json:"failures"`
	LastError   string     `json:"lastError"`
	Reason      string     `json:"abortReason"`
	TilesPerSec float64    `json:"tilesPerSecond"`
	Parameters  [][]string `json:"parameters"`
}

// The task statuses of the REST contract.
const (
	statusAborted = -1
	statusPending = 0
	statusRunning = 1
	statusDone    = 2
)

func (t taskInfo) finished() bool { return t.Status == statusDone || t.Status == statusAborted }

func (c *client) task(ctx context.Context, id int64) (taskInfo, error) {
	var t taskInfo
	a, err := c.do(ctx, http.MethodGet, fmt.Sprintf("/rest/tasks/%d.json", id), "", nil)
	if err != nil {
		return t, err
	}
	if err := json.Unmarshal(a.body, &t); err != nil || t.ID != id {
		return t, fail(ExitRefused, "task %d: the answer is not a task of this tile cache", id)
	}
	return t, nil
}

// runSeed submits a seed, reseed or truncate task, and follows it with --wait.
func runSeed(ctx context.Context, c *client, typ string, o *seedOptions, w *waitOptions, stdout, stderr io.Writer) error {
	req, err := o.request(typ)
	if err != nil {
		return err
	}
	var id int64
	if o.tiles != "" {
		id, err = c.submitList(ctx, o, req)
	} else {
		id, err = c.submit(ctx, req)
	}
	if err != nil && ctx.Err() != nil {
		return fail(ExitInterrupted, "interrupted before the server answered: the task may have been submitted (caddy tile-cache tasks)")
	}
	if err != nil {
		return err
	}
	if w.wait {
		return follow(ctx, c, id, w, stdout, stderr)
	}
	// The task runs on the server whatever happens here: say which it is.
	line := fmt.Sprintf("task %d submitted: %s of %s, levels %d-%d", id, strings.ToLower(typ), req.Name, req.ZoomStart, req.ZoomStop)
	if t, err := c.task(ctx, id); err == nil {
		line = fmt.Sprintf("task %d submitted: %s of %s, %s %s, levels %d-%d, %d tiles", id, strings.ToLower(t.Type), t.Layer, t.Gridset, t.Format, t.ZoomStart, t.ZoomStop, t.Total)
	}
	fmt.Fprintln(stdout, line)
	return nil
}
