package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/minio/minio-go/v7"

	"github.com/tilecache/caddy-tilecache/caddytest/proctest"
	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/store/s3store/s3test"
)

// client talks to the nodes: bounded, so that a hung node fails the test
// instead of hanging it.
var client = &http.Client{
	Timeout:   30 * time.Second,
	Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 16},
}

// options of a cluster's nodes.
type options struct {
	name     string                   // cluster name ("": `cluster {` without one)
	lease    string                   // default 3s
	poll     string                   // default 250ms
	local    bool                     // a local tier (`local { ttl 1h }`) on every node
	upstream func(node string) string // each node's upstream WMS URL
	layers   string                   // default: test:a in EPSG:4326
	tiles    string                   // more tile_cache options (timeout…)
	workers  int                      // tile_cache_admin workers (default 2)
	jsonNode string                   // this node gets a JSON config (cluster set in JSON)
	// neighbour: a fourth member beats as fast as the storage lets it
	// (busyNeighbour), so that the nodes' listings race its writes many
	// times a second instead of now and then.
	neighbour bool
}

const defaultLayers = `layer test:a {
				gridsets EPSG:4326
			}`

// cluster is three Caddy processes (a, b, c) sharing one storage
// directory, one bucket and one prefix.
type cluster struct {
	t       *testing.T
	opts    options
	storage string // the shared file_system storage
	bucket  string
	prefix  string
	nodes   []*node
}

// node is one Caddy process.
type node struct {
	t         *testing.T
	name      string
	port      int
	adminPort int
	dir       string // its own Badger (tasks of its own, local tier)
	config    string // path of its config file
	log       *proctest.Output
	cmd       *exec.Cmd
	exited    chan struct{}
}

var seq atomic.Int64

// newCluster starts nodes a, b and c and waits until each answers. They
// are killed when the test ends; when it failed, the end of each node's
// log goes to the test log.
func newCluster(t *testing.T, o options) *cluster {
	t.Helper()
	if o.lease == "" {
		o.lease = "3s"
	}
	if o.poll == "" {
		o.poll = "250ms"
	}
	if o.layers == "" {
		o.layers = defaultLayers
	}
	if o.workers == 0 {
		o.workers = 2
	}
	n := seq.Add(1)
	c := &cluster{t: t, opts: o, storage: filepath.Join(t.TempDir(), "shared"),
		bucket: fmt.Sprintf("cluster%d", n), prefix: fmt.Sprintf("c%d", n)}
	if err := os.MkdirAll(c.storage, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := minioSrv.Client.MakeBucket(context.Background(), c.bucket, minio.MakeBucketOptions{}); err != nil {
		t.Fatalf("making bucket %s: %v", c.bucket, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("---- lock files in the shared storage:\n%s", c.locks())
			for _, nd := range c.nodes {
				notable := nd.log.Grep(`"level":"warn"`, `"level":"error"`, "\terror\t", "\twarn\t", "taking over", "stale")
				if len(notable) > 40 {
					notable = notable[len(notable)-40:]
				}
				t.Logf("---- node %s (port %d): warnings, errors, takeovers:\n%s\n---- node %s, last lines:\n%s",
					nd.name, nd.port, strings.Join(notable, "\n"), nd.name, nd.log.Tail(30))
			}
		}
	})
	for _, name := range []string{"a", "b", "c"} {
		c.nodes = append(c.nodes, c.start(name))
	}
	for _, nd := range c.nodes {
		nd.waitReady()
	}
	if o.neighbour {
		c.busyNeighbour()
	}
	return c
}

// busyNeighbour stands for members of the cluster that hold no work and
// rewrite their heartbeat records as fast as the storage lets them (until
// the test ends), through certmagic's file_system storage as Caddy does:
// a temporary file beside the key, renamed into place. A node listing
// nodes/ meanwhile often meets a temporary file that vanishes under it
// (its List fails with not-exist), which on code that took that for "no
// heartbeats" made every live node dead for good.
func (c *cluster) busyNeighbour() {
	c.t.Helper()
	nodes := filepath.Dir(c.storedFile("/nodes/" + c.nodes[0].id()))
	rel, err := filepath.Rel(c.storage, nodes)
	if err != nil {
		c.t.Fatal(err)
	}
	st := &certmagic.FileStorage{Path: c.storage}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	c.t.Cleanup(func() { stop(); wg.Wait() })
	for i := range neighbours {
		id := fmt.Sprintf("neighbour%d-0badcafe", i)
		key := filepath.ToSlash(rel) + "/" + id
		wg.Add(1)
		go func() {
			defer wg.Done()
			for beat := 1; ctx.Err() == nil; beat++ {
				b, _ := json.Marshal(map[string]any{"id": id, "beat": beat, "host": "neighbour"})
				st.Store(ctx, key, b)
			}
		}()
	}
}

// neighbours is how many busy neighbours write at once: enough that about
// one listing of nodes/ in ten races a write.
const neighbours = 4

// locks describes the lock files in the shared storage: name, age of the
// last write, content.
func (c *cluster) locks() string {
	var b strings.Builder
	entries, err := os.ReadDir(filepath.Join(c.storage, "locks"))
	if err != nil {
		return err.Error()
	}
	for _, e := range entries {
		p := filepath.Join(c.storage, "locks", e.Name())
		data, _ := os.ReadFile(p)
		if fi, err := os.Stat(p); err == nil {
			fmt.Fprintf(&b, "%s written %v ago: %s\n", e.Name(), time.Since(fi.ModTime()).Round(time.Millisecond), bytes.TrimSpace(data))
		}
	}
	return b.String()
}

func (c *cluster) node(name string) *node {
	for _, n := range c.nodes {
		if n.name == name {
			return n
		}
	}
	panic(name)
}

// caddyfile is node nd's Caddyfile; withCluster false leaves the cluster
// block out (for the JSON node, whose cluster is set in JSON).
func (c *cluster) caddyfile(nd *node, withCluster bool) string {
	o := c.opts
	local := ""
	if o.local {
		local = `
				local {
					ttl 1h
				}`
	}
	cl := ""
	if withCluster {
		name := ""
		if o.name != "" {
			name = " " + o.name
		}
		cl = fmt.Sprintf(`
			cluster%s {
				lease %s
				poll %s
			}`, name, o.lease, o.poll)
	}
	tiles := ""
	if o.tiles != "" {
		tiles = "\n\t\t\t" + o.tiles
	}
	return fmt.Sprintf(`{
	admin localhost:%d
	http_port %d
	auto_https off
	grace_period 1ns
	storage file_system %s
	log {
		level INFO
	}
}

http://127.0.0.1:%d {
	handle_path /geowebcache/* {
		tile_cache_admin {
			workers %d
			checkpoint_interval 200ms
			retry_wait 100ms
		}
	}
	handle {
		tile_cache {
			upstream %s
			storage %s%s
			s3 {
				bucket %s
				prefix %s
				endpoint %s
				region us-east-1
				path_style
				insecure
				access_key {env.TC_S3_KEY}
				secret_key {env.TC_S3_SECRET}%s
			}%s
			%s
		}
	}
}
`, nd.adminPort, nd.port, c.storage, nd.port, o.workers, o.upstream(nd.name), nd.dir, tiles,
		c.bucket, c.prefix, minioSrv.Addr, local, cl, o.layers)
}

// jsonConfig adapts nd's Caddyfile without the cluster block to JSON and
// sets the cluster there, as a JSON config writes it.
func (c *cluster) jsonConfig(nd *node) string {
	t := c.t
	f := filepath.Join(t.TempDir(), "Caddyfile")
	if err := os.WriteFile(f, []byte(c.caddyfile(nd, false)), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(caddyBin, "adapt", "--config", f, "--adapter", "caddyfile").Output()
	if err != nil {
		t.Fatalf("caddy adapt: %v", err)
	}
	var cfg any
	if err := json.Unmarshal(out, &cfg); err != nil {
		t.Fatalf("adapted config: %v", err)
	}
	cl := map[string]any{"lease": c.opts.lease, "poll": c.opts.poll}
	if c.opts.name != "" {
		cl["name"] = c.opts.name
	}
	set := 0
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if v["handler"] == "tile_cache" && v["upstream"] != nil {
				v["cluster"] = cl
				set++
			}
			for _, e := range v {
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(cfg)
	if set != 1 {
		t.Fatalf("%d tile_cache handlers in the adapted config:\n%s", set, out)
	}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	return string(b)
}

// start writes node name's config and starts its process.
func (c *cluster) start(name string) *node {
	t := c.t
	t.Helper()
	nd := &node{t: t, name: name, port: proctest.FreePort(t), adminPort: proctest.FreePort(t), dir: filepath.Join(t.TempDir(), "store-"+name),
		log: &proctest.Output{}, exited: make(chan struct{})}
	var cfg, args string
	if name == c.opts.jsonNode {
		cfg, args = c.jsonConfig(nd), "json"
	} else {
		cfg, args = c.caddyfile(nd, true), "caddyfile"
	}
	nd.config = filepath.Join(t.TempDir(), "config-"+name+"."+args)
	if err := os.WriteFile(nd.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	argv := []string{"run", "--config", nd.config}
	if args == "caddyfile" {
		argv = append(argv, "--adapter", "caddyfile")
	}
	nd.cmd = exec.Command(caddyBin, argv...)
	nd.cmd.Stdout, nd.cmd.Stderr = nd.log, nd.log
	// A test binary that dies (a timeout's panic) takes its nodes along.
	nd.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	nd.cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+t.TempDir(), "XDG_CONFIG_HOME="+t.TempDir(),
		"TC_S3_KEY="+s3test.AccessKey, "TC_S3_SECRET="+s3test.SecretKey)
	if err := nd.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { nd.cmd.Wait(); close(nd.exited) }()
	t.Cleanup(func() { nd.kill() })
	return nd
}

// waitReady waits until the node's site answers (its config is loaded),
// failing at once if the process ends.
func (n *node) waitReady() {
	n.t.Helper()
	deadline := time.Now().Add(patience)
	for time.Now().Before(deadline) {
		select {
		case <-n.exited:
			n.t.Fatalf("node %s exited while starting:\n%s", n.name, n.log.Tail(40))
		default:
		}
		if resp, err := http.Get(n.url("/")); err == nil {
			resp.Body.Close()
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	n.t.Fatalf("node %s did not answer on port %d in %v:\n%s", n.name, n.port, patience, n.log.Tail(40))
}

// kill ends the process with SIGKILL (a crash) and waits for it.
func (n *node) kill() {
	n.cmd.Process.Kill()
	select {
	case <-n.exited:
	case <-time.After(10 * time.Second):
	}
}

// ---- HTTP

type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) String() string {
	b := string(a.body)
	if len(b) > 300 {
		b = b[:300] + "…"
	}
	return fmt.Sprintf("%d %q", a.status, b)
}

func (n *node) url(path string) string { return fmt.Sprintf("http://127.0.0.1:%d%s", n.port, path) }

// send makes one request (safe from any goroutine).
func send(method, u, contentType, body string) (answer, error) {
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	return answer{resp.StatusCode, resp.Header, b}, nil
}

func (n *node) do(method, path, contentType, body string) answer {
	n.t.Helper()
	a, err := send(method, n.url(path), contentType, body)
	if err != nil {
		n.t.Fatalf("node %s: %s %s: %v", n.name, method, path, err)
	}
	return a
}

// rest is a request to the node's REST interface (mounted at /geowebcache).
func (n *node) rest(method, path, contentType, body string) answer {
	n.t.Helper()
	return n.do(method, "/geowebcache"+path, contentType, body)
}

var taskIDRE = regexp.MustCompile(`/rest/tasks/(\d+)\.json$`)

// submit POSTs a JSON seed request for layer and returns the task's id.
func (n *node) submit(layer, req string) int64 {
	n.t.Helper()
	a := n.rest("POST", "/rest/seed/"+layer+".json", "application/json", req)
	if a.status != 200 {
		n.t.Fatalf("node %s: seed POST: %v", n.name, a)
	}
	loc := a.header.Get("Location")
	m := taskIDRE.FindStringSubmatch(loc)
	if m == nil || !strings.HasPrefix(loc, n.url("/geowebcache/rest/tasks/")) {
		n.t.Fatalf("node %s: Location %q names no task of its REST interface", n.name, loc)
	}
	id, _ := strconv.ParseInt(m[1], 10, 64)
	return id
}

func seedReq(typ string, z0, z1 int, extra string) string {
	return fmt.Sprintf(`{"seedRequest":{"gridSetId":"EPSG:4326","zoomStart":%d,"zoomStop":%d,"type":%q,"format":"image/png","threadCount":2%s}}`,
		z0, z1, typ, extra)
}

// taskInfo is the task resource's JSON.
type taskInfo struct {
	ID          int64  `json:"id"`
	Layer       string `json:"layer"`
	Type        string `json:"type"`
	State       string `json:"state"`
	Status      int64  `json:"status"`
	Processed   int64  `json:"processed"`
	Total       int64  `json:"total"`
	Remaining   int64  `json:"remaining"`
	FailedTiles int64  `json:"failedTiles"`
	Failures    int64  `json:"failures"`
	LastError   string `json:"lastError"`
	Reason      string `json:"abortReason"`
	Export      *struct {
		Phase   string `json:"phase"`
		Tiles   int64  `json:"tiles"`
		Missing int64  `json:"missing"`
		File    string `json:"file"`
		Node    string `json:"node"`
	} `json:"export"`
}

func (ti taskInfo) finished() bool { return ti.Status == 2 || ti.Status == -1 }

// task GETs a task's resource; ok is false unless it answered 200.
func (n *node) task(id int64) (taskInfo, answer) {
	n.t.Helper()
	a := n.rest("GET", fmt.Sprintf("/rest/tasks/%d.json", id), "", "")
	var ti taskInfo
	if a.status == 200 {
		if err := json.Unmarshal(a.body, &ti); err != nil {
			n.t.Fatalf("node %s: task %d JSON: %v: %s", n.name, id, err, a.body)
		}
	}
	return ti, a
}

func (n *node) mustTask(id int64) taskInfo {
	n.t.Helper()
	ti, a := n.task(id)
	if a.status != 200 {
		n.t.Fatalf("node %s: GET task %d: %v", n.name, id, a)
	}
	return ti
}

// waitTask polls task id on node n until it is finished (bounded, by
// within and at least by patience).
func (n *node) waitTask(id int64, within time.Duration) taskInfo {
	n.t.Helper()
	within = max(within, patience)
	deadline := time.Now().Add(within)
	for {
		ti, a := n.task(id)
		if a.status == 200 && ti.finished() {
			return ti
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("node %s: task %d not finished after %v: %v", n.name, id, within, a)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// listing GETs a task listing ([[processed,total,remaining,id,status],…]).
func (n *node) listing(path string) ([][5]int64, answer) {
	n.t.Helper()
	a := n.rest("GET", path, "", "")
	if a.status != 200 {
		return nil, a
	}
	var l struct {
		L [][5]int64 `json:"long-array-array"`
	}
	if err := json.Unmarshal(a.body, &l); err != nil || l.L == nil {
		n.t.Fatalf("node %s: listing %s: %v: %q", n.name, path, err, a.body)
	}
	return l.L, a
}

func (n *node) mustListing(path string) [][5]int64 {
	n.t.Helper()
	l, a := n.listing(path)
	if a.status != 200 {
		n.t.Fatalf("node %s: GET %s: %v", n.name, path, a)
	}
	return l
}

// ---- tiles

var epsg4326, _ = gridset.Builtin("EPSG:4326")

func fmtF(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// tilePath is a WMS 1.1.1 GetMap of one EPSG:4326 tile of layer.
func tilePath(layer string, x, y int64, z int) string {
	b := epsg4326.TileBBox(gridset.Index{X: x, Y: y, Z: z})
	q := url.Values{
		"SERVICE": {"WMS"}, "VERSION": {"1.1.1"}, "REQUEST": {"GetMap"},
		"LAYERS": {layer}, "STYLES": {""}, "SRS": {"EPSG:4326"},
		"BBOX":  {fmtF(b.MinX) + "," + fmtF(b.MinY) + "," + fmtF(b.MaxX) + "," + fmtF(b.MaxY)},
		"WIDTH": {"256"}, "HEIGHT": {"256"}, "FORMAT": {"image/png"},
	}
	return "/wms?" + q.Encode()
}

// tile GETs a tile of test:a from the node.
func (n *node) tile(x, y int64, z int) answer {
	n.t.Helper()
	return n.do("GET", tilePath("test:a", x, y, z), "", "")
}

// mustTile asserts a 200 PNG tile of test:a with the given cache result.
func (n *node) mustTile(x, y int64, z int, want string) answer {
	n.t.Helper()
	return n.mustTileOf("test:a", x, y, z, want)
}

func result(a answer) string { return a.header.Get("Geowebcache-Cache-Result") }

// mustTileOf asserts a 200 PNG tile of layer with the given cache result
// ("" any).
func (n *node) mustTileOf(layer string, x, y int64, z int, want string) answer {
	n.t.Helper()
	a := n.do("GET", tilePath(layer, x, y, z), "", "")
	if a.status != 200 {
		n.t.Fatalf("node %s: tile %d/%d/%d: %v", n.name, z, x, y, a)
	}
	if want != "" && result(a) != want {
		n.t.Fatalf("node %s: tile %d/%d/%d is a %q, want %q (Cache-Status %q)", n.name, z, x, y, result(a), want,
			a.header.Get("Cache-Status"))
	}
	if _, err := png.Decode(bytes.NewReader(a.body)); err != nil {
		n.t.Fatalf("node %s: tile %d/%d/%d is no PNG: %v", n.name, z, x, y, err)
	}
	return a
}

// metatiles is the number of 4×4 metatiles of EPSG:4326 levels z0..z1.
func metatiles(z0, z1 int) int {
	n := 0
	for z := z0; z <= z1; z++ {
		l := epsg4326.Levels[z]
		n += int((l.TilesWide + 3) / 4 * ((l.TilesHigh + 3) / 4))
	}
	return n
}

// tiles is the number of tiles of EPSG:4326 levels z0..z1.
func tiles(z0, z1 int) int64 {
	var n int64
	for z := z0; z <= z1; z++ {
		n += epsg4326.Levels[z].TilesWide * epsg4326.Levels[z].TilesHigh
	}
	return n
}

// ---- metrics

func (n *node) metrics() string {
	n.t.Helper()
	a, err := send("GET", fmt.Sprintf("http://localhost:%d/metrics", n.adminPort), "", "")
	if err != nil || a.status != 200 {
		n.t.Fatalf("node %s: /metrics: %v %v", n.name, a, err)
	}
	return string(a.body)
}

// metric is the value of the sample name{labels} (0 when absent).
func (n *node) metric(name, labels string) float64 {
	n.t.Helper()
	prefix := name
	if labels != "" {
		prefix += "{" + labels + "}"
	}
	for _, line := range strings.Split(n.metrics(), "\n") {
		if strings.HasPrefix(line, prefix+" ") {
			v, err := strconv.ParseFloat(strings.TrimSpace(line[len(prefix):]), 64)
			if err != nil {
				n.t.Fatal(err)
			}
			return v
		}
	}
	return 0
}

// ---- S3

// keys lists the objects under the cluster's prefix + "/" + sub.
func (c *cluster) keys(sub string) []string {
	c.t.Helper()
	var out []string
	for o := range minioSrv.Client.ListObjects(context.Background(), c.bucket,
		minio.ListObjectsOptions{Prefix: c.prefix + "/" + sub, Recursive: true}) {
		if o.Err != nil {
			c.t.Fatalf("listing %s: %v", c.bucket, o.Err)
		}
		out = append(out, o.Key)
	}
	return out
}

// tileKeys lists the tile objects of layer's generation 1.
func (c *cluster) tileKeys(layer string) []string {
	c.t.Helper()
	var out []string
	for _, k := range c.keys(layer + "/1/") {
		if strings.HasSuffix(k, ".png") {
			out = append(out, k)
		}
	}
	return out
}

// checkObjects asserts want tile objects of layer, each a whole 256×256
// PNG, read by 8 goroutines.
func (c *cluster) checkObjects(layer string, want int) {
	c.t.Helper()
	keys := c.tileKeys(layer)
	if len(keys) != want {
		c.t.Fatalf("%d tile objects of %s in the bucket, want %d", len(keys), layer, want)
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		bad  []string
		next atomic.Int64
	)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(len(keys)); i = next.Add(1) - 1 {
				k := keys[i]
				err := func() error {
					obj, err := minioSrv.Client.GetObject(context.Background(), c.bucket, k, minio.GetObjectOptions{})
					if err != nil {
						return err
					}
					defer obj.Close()
					b, err := io.ReadAll(obj)
					if err != nil {
						return err
					}
					img, err := png.Decode(bytes.NewReader(b))
					if err != nil {
						return err
					}
					if img.Bounds().Dx() != 256 || img.Bounds().Dy() != 256 {
						return fmt.Errorf("%v", img.Bounds())
					}
					return nil
				}()
				if err != nil {
					mu.Lock()
					bad = append(bad, k+": "+err.Error())
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if len(bad) > 0 {
		c.t.Fatalf("%d of %d objects are not whole 256×256 PNGs, e.g. %v", len(bad), len(keys), bad[:min(3, len(bad))])
	}
}

// ---- polling

// patience is the least bound of a wait for an event: the bounds only end
// a test that hangs, and three Caddy processes beside CPU hogs took more
// than two minutes over a seed that takes seconds on a quiet machine
// (docs/development.md, "The suite on a busy machine").
const patience = 5 * time.Minute

// eventually polls cond every 50 ms until it holds or within (at least
// patience) has passed.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	within = max(within, patience)
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still not %s after %v", what, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ---- the shared storage, read as an outsider

var joinedRE = regexp.MustCompile(`"node":"([^"]+)"`)

// id is the node's id in the cluster, from its "joined the cluster" log line.
func (n *node) id() string {
	n.t.Helper()
	for _, l := range n.log.Grep("joined the cluster") {
		if m := joinedRE.FindStringSubmatch(l); m != nil {
			return m[1]
		}
	}
	n.t.Fatalf("node %s logged no cluster id:\n%s", n.name, n.log.Tail(20))
	return ""
}

// storedFile finds the one file of the shared storage whose path ends in
// suffix (the cluster's area is named after the cache).
func (c *cluster) storedFile(suffix string) string {
	c.t.Helper()
	var found []string
	filepath.WalkDir(c.storage, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(filepath.ToSlash(p), suffix) {
			found = append(found, p)
		}
		return nil
	})
	if len(found) != 1 {
		c.t.Fatalf("%d files ending in %s in the shared storage: %v", len(found), suffix, found)
	}
	return found[0]
}

// ledger is what a test reads of a task's record in the shared storage.
type ledger struct {
	PerUnit int64            `json:"perUnit"`
	Held    map[int64]string `json:"held"`
}

// ledger reads task id's work-unit ledger.
func (c *cluster) ledger(id int64) ledger {
	c.t.Helper()
	b, err := os.ReadFile(c.storedFile(fmt.Sprintf("/tasks/%d/task", id)))
	if err != nil {
		c.t.Fatal(err)
	}
	var l ledger
	if err := json.Unmarshal(b, &l); err != nil {
		c.t.Fatalf("task %d's record: %v", id, err)
	}
	return l
}

// heartbeatWritten is when node id's heartbeat record was last written
// (its modification time: before any other node could read it).
func (c *cluster) heartbeatWritten(id string) time.Time {
	c.t.Helper()
	fi, err := os.Stat(c.storedFile("/nodes/" + id))
	if err != nil {
		c.t.Fatal(err)
	}
	return fi.ModTime()
}
