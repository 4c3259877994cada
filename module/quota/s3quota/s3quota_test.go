package s3quota

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/minio/minio-go/v7"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/quota"
	"github.com/tilecache/caddy-tilecache/module/store"
	"github.com/tilecache/caddy-tilecache/module/store/s3store"
	"github.com/tilecache/caddy-tilecache/module/store/s3store/s3test"
)

// counter counts the S3 requests of the stores opened after it is set,
// by kind.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

type countingRT struct {
	c  *counter
	rt http.RoundTripper
}

func (t countingRT) RoundTrip(r *http.Request) (*http.Response, error) {
	kind := r.Method
	switch q := r.URL.Query(); {
	case r.Method == "GET" && q.Has("list-type"):
		kind = "LIST"
	case r.Method == "POST" && q.Has("delete"):
		kind = "DELETE-MULTI"
	}
	t.c.mu.Lock()
	t.c.n[kind]++
	t.c.mu.Unlock()
	return t.rt.RoundTrip(r)
}

func (c *counter) get(kind string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[kind]
}

func (c *counter) reset() {
	c.mu.Lock()
	c.n = map[string]int{}
	c.mu.Unlock()
}

var reqs = &counter{n: map[string]int{}}

func init() {
	s3store.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return countingRT{reqs, rt} }
	MinListEvery = 200 * time.Millisecond
	SyncEvery = 200 * time.Millisecond
	HitsEvery = 200 * time.Millisecond
	ClockMargin = 300 * time.Millisecond
}

var set = store.Set{Layer: "test:a", Gridset: "EPSG:4326", Format: "image/png", Params: "e3b0c44298fc1c14"}

func openRemote(t *testing.T, m *s3test.Server, bucket string) *s3store.Store {
	t.Helper()
	s, err := s3store.Open(s3store.Config{Bucket: bucket, Prefix: "cache", Endpoint: m.Addr, Region: "us-east-1", PathStyle: true,
		Insecure: true, AccessKey: s3test.AccessKey, SecretKey: s3test.SecretKey}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func newTestAdapter(t *testing.T, remote *s3store.Store, sh *Shared, cfg *quota.Config) *Adapter {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	a, err := Acquire(remote, nil, sh, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	a.SetConfig(func() *quota.Config { mu.Lock(); defer mu.Unlock(); return cfg })
	t.Cleanup(func() { a.Release() })
	return a
}

// metatile is the 4×4 tiles at (x0, y0) of level z, each size bytes.
func metatile(z int, x0, y0 int64, size int) []store.Entry {
	var out []store.Entry
	for x := x0; x < x0+4; x++ {
		for y := y0; y < y0+4; y++ {
			b := make([]byte, size)
			for i := range b {
				b[i] = byte(rand.IntN(256))
			}
			out = append(out, store.Entry{Key: store.Key{Set: set, Z: z, X: x, Y: y}, Data: b})
		}
	}
	return out
}

func total(levels []store.LevelUsage) (b int64) {
	for _, l := range levels {
		b += l.Bytes
	}
	return b
}

func bucketBytes(t *testing.T, m *s3test.Server, bucket string) (n, b int64) {
	t.Helper()
	for o := range m.Client.ListObjects(context.Background(), bucket, minio.ListObjectsOptions{Prefix: "cache/test:a/1/", Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		n++
		b += o.Size
	}
	return n, b
}

// PUTs count in the estimate at once, with no request per tile (no HEAD);
// an overwrite counts twice until a listing corrects it, and a listing
// that finds the bucket under its quota evicts nothing.
func TestUsageEstimateAndOverwrites(t *testing.T) {
	m := s3test.Start(t)
	b := m.Bucket("usage")
	remote := openRemote(t, m, b)
	cfg := &quota.Config{MaxSize: 1 << 30}
	a := newTestAdapter(t, remote, nil, cfg)
	if lv, rc, err := a.Usage(); err != nil || rc || total(lv) != 0 {
		t.Fatalf("empty bucket: %v %v %v", lv, rc, err)
	}
	reqs.reset()
	mt := metatile(5, 0, 0, 1000)
	if err := remote.Put(mt, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := remote.Put(metatile(5, 4, 0, 500), time.Now()); err != nil {
		t.Fatal(err)
	}
	lv, _, _ := a.Usage()
	if got := total(lv); got != 16*1500 {
		t.Fatalf("estimate %d after 32 tiles of 24,000 bytes", got)
	}
	if h := reqs.get("HEAD"); h != 0 {
		t.Fatalf("%d HEAD requests for 32 PUTs", h)
	}
	if p := reqs.get("PUT"); p != 32 {
		t.Fatalf("%d PUTs for 32 tiles", p)
	}
	// Overwrite the first metatile: the estimate runs high.
	if err := remote.Put(mt, time.Now()); err != nil {
		t.Fatal(err)
	}
	lv, _, _ = a.Usage()
	if got := total(lv); got != 16*2500 {
		t.Fatalf("estimate %d after overwriting 16,000 bytes", got)
	}
	// A quota between the true size and the estimate: the listing says
	// the bucket is under it, nothing goes.
	cfg.MaxSize = 30000
	time.Sleep(MinListEvery)
	reqs.reset()
	lv, rc, err := a.Usage()
	if err != nil || rc || total(lv) != 24000 {
		t.Fatalf("after the listing: %d bytes, recounting %v, %v", total(lv), rc, err)
	}
	if n := reqs.get("LIST"); n == 0 || n > 3 {
		t.Fatalf("%d list requests for 32 tiles", n)
	}
	if reqs.get("DELETE-MULTI") != 0 || a.holding {
		t.Fatal("a pass began under the quota")
	}
	if n, _ := bucketBytes(t, m, b); n != 32 {
		t.Fatalf("%d objects left", n)
	}
	if v := usageGauge(t, a.Name()); v != 24000 {
		t.Fatalf("usage_bytes gauge %v after the listing", v)
	}
	// Under the quota, a bucket written since its listing is listed
	// again once RefreshEvery has passed: the overwrite's double count
	// ends there.
	defer func(d time.Duration) { RefreshEvery = d }(RefreshEvery)
	RefreshEvery = MinListEvery
	cfg.MaxSize = 1 << 30
	if err := remote.Put(mt, time.Now()); err != nil {
		t.Fatal(err)
	}
	if lv, _, _ := a.Usage(); total(lv) != 40000 || usageGauge(t, a.Name()) != 40000 {
		t.Fatalf("estimate %d, gauge %v after an overwrite", total(lv), usageGauge(t, a.Name()))
	}
	// RefreshEvery, or ten times the last listing's time, which on a busy
	// machine is the longer: waited for, not slept.
	time.Sleep(RefreshEvery)
	reqs.reset()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
		lv, rc, err := a.Usage()
		if err == nil && !rc && total(lv) == 24000 && reqs.get("LIST") > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after RefreshEvery: %d bytes, recounting %v, %v, %d list requests", total(lv), rc, err, reqs.get("LIST"))
		}
	}
	// Nothing written since: no listing, however old the last.
	a.mu.Lock()
	refresh := max(RefreshEvery, 10*a.baseTook)
	a.mu.Unlock()
	time.Sleep(refresh)
	reqs.reset()
	if lv, _, _ := a.Usage(); total(lv) != 24000 || reqs.get("LIST") != 0 {
		t.Fatalf("nothing written: %d bytes, %d list requests", total(lv), reqs.get("LIST"))
	}
}

// usageGauge is caddy_tile_cache_usage_bytes{dir, layer="test:a"} as a
// registry gathers it from store.UsageCollector.
func usageGauge(t *testing.T, dir string) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(store.UsageCollector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "caddy_tile_cache_usage_bytes" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["dir"] == dir && labels["layer"] == "test:a" {
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}

// Eviction takes the coldest pages, by Last-Modified and by recorded
// uses, down to the low watermark.
func TestEvictsColdestPages(t *testing.T) {
	m := s3test.Start(t)
	b := m.Bucket("lru")
	remote := openRemote(t, m, b)
	cfg := &quota.Config{MaxSize: 1 << 30, LowWatermark: 0.9}
	a := newTestAdapter(t, remote, nil, cfg)
	ev, err := quota.Acquire(a, cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Release()
	ev.SetEnabled(false) // passes run here
	// Five pages of z 6, one metatile each, a second apart (S3 keeps
	// Last-Modified in seconds): page i at x 16·i.
	for i := range 5 {
		if err := remote.Put(metatile(6, int64(16*i), 0, 1000), time.Now()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(1100 * time.Millisecond)
	}
	// Page 0, the oldest, is used now.
	a.hits.now.Store(time.Now().Unix())
	a.hits.touch(store.Key{Set: set, Z: 6, X: 1, Y: 1})
	// 80,000 bytes; a quota of 60,000 brings them to 54,000: two pages go,
	// the oldest not used (1 and 2).
	cfg.MaxSize = 60000
	ev.SetConfig(cfg)
	ev.SetEnabled(false)
	reqs.reset()
	p, err := ev.Enforce()
	if err != nil {
		t.Fatal(err)
	}
	a.Usage() // ends the pass
	if p.Pages != 2 || p.Bytes != 32000 {
		t.Fatalf("pass %+v", p)
	}
	if d := reqs.get("DELETE-MULTI"); d != 2 {
		t.Errorf("%d delete requests for 2 pages", d)
	}
	left := map[int64]int{}
	for o := range m.Client.ListObjects(context.Background(), b, minio.ListObjectsOptions{Prefix: "cache/test:a/1/", Recursive: true}) {
		var x, y int64
		var z int
		fmt.Sscanf(o.Key[strings.LastIndex(o.Key, "/png/")+len("/png/e3b0c44298fc1c14/"):], "%d/%d/%d.png", &z, &x, &y)
		left[x/16]++
	}
	if len(left) != 3 || left[0] != 16 || left[3] != 16 || left[4] != 16 {
		t.Fatalf("pages left (x/16 → tiles): %v; want 0, 3, 4", left)
	}
	evicted, _ := a.Evicted()
	if evicted["test:a"] != [2]int64{32, 32000} {
		t.Errorf("evicted %v", evicted)
	}
	lv, _, _ := a.Usage()
	if total(lv) != 48000 {
		t.Errorf("usage after the pass %d, want 48000", total(lv))
	}
}

// Seeding three times the quota through the store with the evictor
// running leaves the bucket within 10 % of the quota; no HEAD request.
func TestSeedThreeTimesQuota(t *testing.T) {
	m := s3test.Start(t)
	b := m.Bucket("seed")
	remote := openRemote(t, m, b)
	const q = 2 << 20
	cfg := &quota.Config{MaxSize: q}
	a := newTestAdapter(t, remote, nil, cfg)
	ev, err := quota.Acquire(a, cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Release()
	reqs.reset()
	var seeded int64
	var maxSeen atomic.Int64
	stop, watched := make(chan struct{}), make(chan struct{})
	go func() { // the bucket's size while seeding
		defer close(watched)
		for {
			select {
			case <-stop:
				return
			case <-time.After(500 * time.Millisecond):
			}
			_, bb := bucketBytes(t, m, b)
			if bb > maxSeen.Load() {
				maxSeen.Store(bb)
			}
		}
	}()
	start := time.Now()
	for i := int64(0); seeded < 3*q; i++ {
		mt := metatile(8, (i%64)*4, (i/64)*4, 2000+rand.IntN(2000))
		if err := remote.Put(mt, time.Now()); err != nil {
			t.Fatal(err)
		}
		for _, e := range mt {
			seeded += int64(len(e.Data))
		}
	}
	seedTook := time.Since(start)
	// The last passes: waited for (the evictor checks every 0.5 s, a
	// listing may not follow the last within MinListEvery), bounded by
	// patience; the figures below are those of the bucket once it came
	// within the bound, or at the deadline.
	n, bb := bucketBytes(t, m, b)
	for deadline := time.Now().Add(patience); bb > q*11/10 && time.Now().Before(deadline); n, bb = bucketBytes(t, m, b) {
		time.Sleep(200 * time.Millisecond)
	}
	close(stop)
	<-watched // its listing must not outlive the test (and its MinIO)
	t.Logf("seeded %d bytes in %v; bucket %d objects, %d bytes = %.3f × the quota (max seen while seeding %.3f×); requests %v",
		seeded, seedTook.Round(time.Millisecond), n, bb, float64(bb)/q, float64(maxSeen.Load())/q, reqs.n)
	if bb > q*11/10 {
		t.Fatalf("bucket %d bytes, quota %d", bb, q)
	}
	if bb < q/2 {
		t.Fatalf("bucket %d bytes: evicted far too much", bb)
	}
	if h := reqs.get("HEAD"); h != 0 {
		t.Fatalf("%d HEAD requests", h)
	}
	if ev.LastPass().Pages == 0 {
		t.Fatal("no pass evicted")
	}
}

// twoNodes are two stores and two adapters over one bucket and one
// storage, as two clustered processes have them, under a quota of 1 GiB.
type twoNodes struct {
	m      *s3test.Server
	bucket string
	fs     *certmagic.FileStorage
	cfg    *quota.Config
	r1, r2 *s3store.Store
	a1, a2 *Adapter
}

func newTwoNodes(t *testing.T, bucket string) *twoNodes {
	t.Helper()
	n := &twoNodes{m: s3test.Start(t), fs: &certmagic.FileStorage{Path: t.TempDir()}, cfg: &quota.Config{MaxSize: 1 << 30}}
	n.bucket = n.m.Bucket(bucket)
	n.r1, n.r2 = openRemote(t, n.m, n.bucket), openRemote(t, n.m, n.bucket)
	n.r2.SetPutCounts(s3store.NewPutCounts())
	n.a1 = newTestAdapter(t, n.r1, &Shared{St: n.fs, Prefix: "tile_cache/x/quota", ID: "n1"}, n.cfg)
	// A second adapter of the same bucket needs another pool key: a
	// different area name stands for another process.
	n.a2 = newAdapter("second", &Shared{St: n.fs, Prefix: "tile_cache/x/quota", ID: "n2"}, zap.NewNop())
	n.a2.attach(n.r2, nil)
	n.a2.SetConfig(func() *quota.Config { return n.cfg })
	t.Cleanup(func() { n.a2.Destruct() })
	return n
}

// Two nodes (two stores, two adapters) over one bucket and one storage:
// each writes only its own record, each estimate holds both nodes' PUTs,
// and a listing resets them.
func TestClusterMergedUsage(t *testing.T) {
	n := newTwoNodes(t, "merged")
	fs, cfg, r1, r2, a1, a2 := n.fs, n.cfg, n.r1, n.r2, n.a1, n.a2
	if _, _, err := a1.Usage(); err != nil { // lists: the first epoch
		t.Fatal(err)
	}
	if err := r1.Put(metatile(3, 0, 0, 100), time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := r2.Put(metatile(3, 4, 0, 200), time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, a := range []*Adapter{a1, a2} {
		deadline := time.Now().Add(patience) // syncs every SyncEvery
		for {
			lv, _, err := a.Usage()
			if err == nil && total(lv) == 4800 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: estimate %d, want 4800 (%v)", a.shared.ID, total(lv), err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for _, id := range []string{"n1", "n2"} {
		raw, err := fs.Load(context.Background(), "tile_cache/x/quota/nodes/"+id)
		if err != nil || !strings.Contains(string(raw), `"id":"`+id+`"`) {
			t.Fatalf("record of %s: %s %v", id, raw, err)
		}
	}
	// Over a quota: one node lists and evicts while it holds the lock;
	// the other skips its pass meanwhile.
	cfg.MaxSize = 3000
	time.Sleep(MinListEvery)
	lv, rc, err := a1.Usage()
	if err != nil || rc || !a1.holding {
		t.Fatalf("a1: %d %v %v holding %v", total(lv), rc, err, a1.holding)
	}
	if _, rc, err := a2.Usage(); err != nil || !rc {
		t.Fatalf("a2 while a1 holds the lock: recounting %v, %v", rc, err)
	}
	a1.Usage() // ends a1's pass (it evicted nothing: no evictor here)
}

// PUTs another node makes while a listing runs, of keys the listing has
// already passed, and that node's sync before the listing is stored: they
// are in no listing, and must still count. (They were lost when a node
// counted from its last sync before it saw the listing: a cluster then
// sat over its quota with an estimate under the low watermark.) Both
// estimates hold every byte in the bucket, and at most the PUTs made
// shortly before the listing twice.
func TestPutsDuringAListingCount(t *testing.T) {
	n := newTwoNodes(t, "during")
	m, b, r2, a1, a2 := n.m, n.bucket, n.r2, n.a1, n.a2
	if _, _, err := a1.Usage(); err != nil { // the first epoch
		t.Fatal(err)
	}
	if err := a2.syncOnce(); err != nil {
		t.Fatal(err)
	}
	before := metatile(2, 0, 0, 100)
	if err := r2.Put(before, time.Now()); err != nil {
		t.Fatal(err)
	}
	// Well before the next listing by both clocks: its counts are taken.
	time.Sleep(3 * ClockMargin)
	listedHook = func() {
		if err := r2.Put(metatile(2, 4, 0, 200), time.Now()); err != nil {
			t.Error(err)
		}
		// n2's loop takes its counts, with these PUTs, and it syncs.
		a2.mu.Lock()
		a2.remember(time.Now(), a2.puts.Snapshot())
		a2.mu.Unlock()
		if err := a2.syncOnce(); err != nil {
			t.Error(err)
		}
	}
	a1.mu.Lock()
	err := a1.list()
	a1.mu.Unlock()
	listedHook = nil
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []*Adapter{a2, a1, a2} { // a2 sees the listing; a1 sees a2's record
		if err := a.syncOnce(); err != nil {
			t.Fatal(err)
		}
	}
	_, inBucket := bucketBytes(t, m, b)
	if inBucket != 16*300 {
		t.Fatalf("bucket: %d bytes", inBucket)
	}
	for _, a := range []*Adapter{a1, a2} {
		a.mu.Lock()
		est, epoch := total(a.estimate()), a.epoch
		a.mu.Unlock()
		if epoch != a1.epoch {
			t.Fatalf("%s: epoch %s, not the listing's %s", a.shared.ID, epoch, a1.epoch)
		}
		if est < inBucket || est > inBucket+16*100 {
			t.Errorf("%s: estimate %d, bucket %d bytes", a.shared.ID, est, inBucket)
		}
	}
}

// A use of a page already known allocates nothing (the hit path).
func TestTouchAllocatesNothing(t *testing.T) {
	tr := newTracker(time.Now().Unix())
	k := store.Key{Set: set, Z: 7, X: 33, Y: 17}
	tr.touch(k)
	if n := testing.AllocsPerRun(1000, func() { tr.touch(k) }); n != 0 {
		t.Fatalf("%v allocations per use", n)
	}
	if h, _ := tr.get(pageOf(k)); h < 1001 {
		t.Fatalf("%d uses counted", h)
	}
}

// The evict lock of a node that holds it and beats is never broken; once
// its beats stop (a node that died or hung mid-pass), another node breaks
// it after BreakAfter and makes the pass itself.
func TestSilentHolderLockBroken(t *testing.T) {
	defer func(d time.Duration) { BreakAfter = d }(BreakAfter)
	BreakAfter = 1500 * time.Millisecond
	n := newTwoNodes(t, "silent")
	n.cfg.MaxSize = 1000
	if err := n.r2.Put(metatile(3, 0, 0, 100), time.Now()); err != nil {
		t.Fatal(err)
	}
	// A third node takes the lock for a pass and beats while it holds it.
	r3 := openRemote(t, n.m, n.bucket)
	r3.SetPutCounts(s3store.NewPutCounts())
	a3 := newAdapter("third", &Shared{St: n.fs, Prefix: "tile_cache/x/quota", ID: "n3"}, zap.NewNop())
	a3.attach(r3, nil)
	a3.SetConfig(func() *quota.Config { return n.cfg })
	t.Cleanup(func() { store.RemoveUsageSource(a3) })
	if _, rc, err := a3.Usage(); err != nil || rc || !a3.holding {
		t.Fatalf("n3: recounting %v, %v, holding %v", rc, err, a3.holding)
	}
	for end := time.Now().Add(2 * BreakAfter); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if _, rc, err := n.a2.Usage(); err != nil || !rc || n.a2.locked {
			t.Fatalf("n2 while n3 holds the lock and beats: recounting %v, %v, locked %v", rc, err, n.a2.locked)
		}
	}
	// n3 falls silent: its loop stops, the lock stays taken.
	close(a3.stop)
	<-a3.done
	deadline := time.Now().Add(BreakAfter + patience)
	for !n.a2.holding {
		if time.Now().After(deadline) {
			t.Fatal("n2 never broke the lock of a silent holder")
		}
		time.Sleep(100 * time.Millisecond)
		if _, _, err := n.a2.Usage(); err != nil {
			t.Fatal(err)
		}
	}
	n.a2.Usage() // ends n2's pass
}

// A range deletion or a truncation makes the figures stale: the bucket is
// listed again as soon as listings may follow each other, quota crossed
// or not, and the figures drop to what is left.
func TestRemovalsRelist(t *testing.T) {
	m := s3test.Start(t)
	b := m.Bucket("removals")
	remote := openRemote(t, m, b)
	a := newTestAdapter(t, remote, nil, &quota.Config{MaxSize: 1 << 30})
	if _, _, err := a.Usage(); err != nil { // the first listing
		t.Fatal(err)
	}
	for _, mt := range [][]store.Entry{metatile(4, 0, 0, 100), metatile(4, 4, 0, 200)} {
		if err := remote.Put(mt, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(MinListEvery)
	// Nothing removed, nothing listed: the PUTs count as they were.
	reqs.reset()
	if lv, _, _ := a.Usage(); total(lv) != 16*300 || reqs.get("LIST") != 0 {
		t.Fatalf("estimate %d, %d list requests", total(lv), reqs.get("LIST"))
	}
	n, err := remote.DeleteRange(set, 4, gridset.Range{MinX: 0, MinY: 0, MaxX: 3, MaxY: 3}, nil)
	if err != nil || n != 16 {
		t.Fatalf("DeleteRange: %d, %v", n, err)
	}
	// Listings may follow each other MinListEvery after the last one
	// ended, or ten times as long as it took, which on a busy machine is
	// the longer: the relisting is waited for, not slept.
	waitUsage(t, a, 16*200, "after a range deletion")
	if err := remote.TruncateLayer(set.Layer); err != nil {
		t.Fatal(err)
	}
	waitUsage(t, a, 0, "after truncateLayer")
}

// patience bounds a wait for an event (a listing, a sync, the last
// passes): long enough for a machine whose every core is busy with other
// work, so that only an event that never comes fails a test.
const patience = 3 * time.Minute

// waitUsage calls Usage, as the evictor does, until the estimate is want
// bytes (bounded by patience), and fails with the last figure.
func waitUsage(t *testing.T, a *Adapter, want int64, what string) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		lv, rc, err := a.Usage()
		if err == nil && total(lv) == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d bytes (recounting %v, %v) after %v, want %d", what, total(lv), rc, err, patience, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
