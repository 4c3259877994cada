package tilecache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"io"
	"math/bits"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/tilecache/caddy-tilecache/module/cluster"
	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/imaging"
	"github.com/tilecache/caddy-tilecache/module/ogc"
	"github.com/tilecache/caddy-tilecache/module/params"
	"github.com/tilecache/caddy-tilecache/module/store"
)

// maxUpstreamBody bounds what is read from the upstream for one metatile;
// a 16×16 metatile of 256 px RGBA is 64 MiB uncompressed, PNG far less.
const maxUpstreamBody = 64 << 20

// MetaRequest names one metatile of one tile set: everything needed to
// fetch it from the upstream and store its tiles.
type MetaRequest struct {
	Layer  *Layer
	Grid   *Grid
	Format *Format
	Params ParamValues
	Meta   gridset.Meta
}

// NewMetaRequest names the metatile holding tile idx of the layer.
func (l *Layer) NewMetaRequest(g *Grid, f *Format, p ParamValues, idx gridset.Index) (*MetaRequest, error) {
	meta, err := g.MetaTile(idx, l.MetaWidth, l.MetaHeight, l.Gutter, g.Coverage[idx.Z])
	if err != nil {
		return nil, err
	}
	return &MetaRequest{Layer: l, Grid: g, Format: f, Params: p, Meta: meta}, nil
}

func (m *MetaRequest) set() store.Set {
	return store.Set{Layer: m.Layer.Name, Gridset: m.Grid.Name, Format: m.Format.Name, Params: m.Params.Hash()}
}

// ParamValues is a layer's normalised parameter-filter values.
type ParamValues = params.Values

// flightKey identifies a metatile fetch across all its concurrent askers,
// in whichever config they are: the store is part of it, so a reload onto
// another store does not hand one store's fetch to the other.
type flightKey struct {
	store string
	set   store.Set
	meta  gridset.Index
}

// MetaResult is a fetched, sliced and stored metatile.
type MetaResult struct {
	Tiles    []store.Entry
	StoredAt time.Time
	// StoreErr is set when the tiles were fetched but could not be stored;
	// they are still good to answer with.
	StoreErr error
}

// Tile returns the encoded tile at idx from the result.
func (r *MetaResult) Tile(idx gridset.Index) ([]byte, bool) {
	for i := range r.Tiles {
		k := &r.Tiles[i].Key
		if k.X == idx.X && k.Y == idx.Y && k.Z == idx.Z {
			return r.Tiles[i].Data, true
		}
	}
	return nil, false
}

type flight struct {
	// queued ends the flight's wait in line: cancelled when nobody waits
	// for it any more (a visitor left). It does not
	// reach the upstream request: once on the wire, a fetch finishes and
	// stores its tiles for whoever asks next.
	queued context.Context
	drop   context.CancelFunc
	// Guarded by the shared upstream's mu: callers waiting for the result,
	// and whether the fetch holds an upstream slot.
	waiters int
	onWire  bool

	done chan struct{}
	// fetched closes once the upstream has answered (or failed): from
	// then on the work is local CPU, and a seeder may start its next fetch.
	// answered says whether it answered; set before fetched closes.
	fetched  chan struct{}
	answered bool
	res      *MetaResult
	err      error
	// prio is who the fetch waits in line for; urgent closes when a user
	// joins a seeder's fetch, so it moves up to the users' line.
	prio   Priority
	urgent chan struct{}
}

// fetcher turns metatile requests into stored tiles, one upstream request
// per metatile however many ask for it at once. Each config's cache has
// its own fetcher (its store and client); the upstream's slots,
// breaker and fetches in flight are shared by cache name (upstream.go).
type fetcher struct {
	name     string
	upstream *url.URL
	client   *http.Client
	timeout  time.Duration
	store    store.Store
	log      *zap.Logger
	shared   *upstream
	// node is the cluster this cache is a node of, or nil: its render
	// markers keep other nodes from rendering a metatile this one is
	// rendering (cluster/render.go).
	node *cluster.Node
}

// fetcherConfig is what a fetcher is built from, in Provision and in tests.
type fetcherConfig struct {
	name        string
	upstream    *url.URL
	concurrency int
	timeout     time.Duration
	store       store.Store
	shared      *upstream
	node        *cluster.Node
	log         *zap.Logger
}

func newFetcher(c fetcherConfig) *fetcher {
	return &fetcher{
		name:     c.name,
		upstream: c.upstream,
		client: &http.Client{Transport: &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			MaxIdleConnsPerHost: c.concurrency,
			IdleConnTimeout:     90 * time.Second,
		}},
		timeout: c.timeout,
		store:   c.store,
		log:     c.log,
		shared:  c.shared,
		node:    c.node,
	}
}

// close gives back the shared upstream state and closes the connections
// this config's client keeps idle; fetches still running finish.
func (f *fetcher) close() {
	f.client.CloseIdleConnections()
	releaseUpstream(f.name)
}

// fetch fetches, slices and stores the metatile, sharing the work with
// every concurrent caller asking for the same one. The fetch itself runs
// detached from ctx, so a visitor who gives up does not waste the work
// others (or later visitors) need; ctx only bounds this caller's wait.
// fetched (may be nil) is called as soon as the upstream has answered,
// before the image is decoded, sliced, encoded and stored; when the
// upstream fails it is not called, so a seeder's retries of that metatile
// come before its next one.
func (f *fetcher) fetch(ctx context.Context, m *MetaRequest, p Priority, fetched func()) (*MetaResult, error) {
	key := flightKey{store: f.store.Name(), set: m.set(), meta: m.Meta.Key()}
	sh := f.shared
	sh.mu.Lock()
	fl, ok := sh.flights[key]
	switch {
	case !ok:
		fl = &flight{done: make(chan struct{}), fetched: make(chan struct{}), prio: p, urgent: make(chan struct{})}
		// The wait in line ends only when nobody waits any more: the line
		// is bounded (upstream_queue), so its length, not a clock, bounds
		// the wait.
		fl.queued, fl.drop = context.WithCancel(context.Background())
		sh.flights[key] = fl
		go f.run(key, fl, m)
	case p == PriorityUser && fl.prio != PriorityUser:
		fl.prio = PriorityUser
		close(fl.urgent)
	}
	fl.waiters++
	sh.mu.Unlock()
	if fetched != nil {
		select {
		case <-fl.fetched:
			if fl.answered {
				fetched()
			}
		case <-ctx.Done():
			f.leave(key, fl)
			return nil, ctx.Err()
		}
	}
	select {
	case <-fl.done:
		return fl.res, fl.err
	case <-ctx.Done():
		f.leave(key, fl)
		return nil, ctx.Err()
	}
}

// leave is a caller giving up on a flight. The last one to leave a flight
// still waiting in line drops it: under a flood of misses from clients
// that hang up, the upstream renders only what someone still waits for.
func (f *fetcher) leave(key flightKey, fl *flight) {
	sh := f.shared
	sh.mu.Lock()
	defer sh.mu.Unlock()
	fl.waiters--
	if fl.waiters == 0 && !fl.onWire {
		fl.drop()
		if sh.flights[key] == fl {
			delete(sh.flights, key) // the next asker starts afresh
		}
	}
}

func (f *fetcher) run(key flightKey, fl *flight, m *MetaRequest) {
	defer func() {
		if r := recover(); r != nil {
			fl.err = fmt.Errorf("metatile fetch panicked: %v", r)
			f.log.Error("metatile fetch panicked", zap.Any("panic", r), zap.Stack("stack"))
		}
		f.shared.mu.Lock()
		if f.shared.flights[key] == fl {
			delete(f.shared.flights, key)
		}
		f.shared.mu.Unlock()
		fl.drop()
		fl.markFetched()
		close(fl.done)
	}()
	fl.res, fl.err = f.fetchAndStore(key.set, m, fl)
}

func (f *fetcher) fetchAndStore(set store.Set, m *MetaRequest, fl *flight) (*MetaResult, error) {
	unmark := func() {}
	defer func() { unmark() }() // once the tiles are stored, or the render failed
	var marker string
	if f.node != nil {
		marker = cluster.MarkerKey(set.Layer, set.Gridset, set.Format, set.Params, fmt.Sprint(m.Meta.Key()))
		if res := f.renderedElsewhere(marker, set, m, fl); res != nil {
			fl.answered = true
			fl.markFetched()
			return res, nil
		}
		// From now until the tiles are stored, or the fetch fails or is
		// dropped: other nodes' misses wait for this render, also while
		// it waits in line for an upstream slot. At most the upstream's
		// timeout twice over (the line, then decoding, encoding, storing).
		unmark = f.node.MarkRender(marker, 2*f.timeout)
	}
	body, contentType, err := f.fetchBody(m, fl)
	fl.answered = err == nil
	fl.markFetched()
	f.shared.mu.Lock()
	seeding := err == nil && fl.prio == PrioritySeed
	f.shared.mu.Unlock()
	if seeding {
		// markFetched readied the seeder's worker, which puts its next
		// GetMap on the wire. Let it run first: readied goroutines wait
		// on this P while this one decodes (several ms of CPU without a
		// yield), and with both cores busy the upstream then sat idle
		// ~1.1 ms per metatile; 0.04 ms with the yield (20 ms renders:
		// 88 % of the limit before, 91-93 % after).
		runtime.Gosched()
		// A seed's decoding, slicing and encoding waits for a core
		// (seedcpu.go), unless a visitor asks for the metatile meanwhile.
		if seedCPU.acquire(fl.urgent) {
			defer seedCPU.release()
		} else {
			seeding = false
		}
	}
	if err != nil {
		if _, refused := refusal(err); refused || errors.Is(err, ErrUpstreamBusy) {
			return nil, err // the upstream was not asked
		}
		m.Layer.upstreamErrors.Inc()
		return nil, fmt.Errorf("upstream: %w", err)
	}
	if !seeding {
		return f.cutAndStore(set, m, contentType, body, false)
	}
	var res *MetaResult
	onSeedThread(func() { res, err = f.cutAndStore(set, m, contentType, body, true) })
	return res, err
}

// cutAndStore decodes a metatile's answer, cuts and encodes its tiles and
// stores them: the CPU work of a miss, after the upstream slot is given
// back.
func (f *fetcher) cutAndStore(set store.Set, m *MetaRequest, contentType string, body []byte, seeding bool) (*MetaResult, error) {
	t0 := time.Now()
	img, err := imaging.Decode(contentType, body, m.Meta.Width, m.Meta.Height)
	putBody(body) // neither decoder keeps the body, nor does an error message
	if seeding {
		seedCPU.pace(time.Since(t0))
	}
	if err != nil {
		m.Layer.upstreamErrors.Inc()
		return nil, fmt.Errorf("upstream: %w", err)
	}
	// Once the tiles are encoded (into copies; encodeAll waits for all of
	// its encoders), the metatile's 4 MB go back to the decoder's pool
	// instead of to the garbage collector.
	defer imaging.Recycle(img)
	tiles, err := imaging.Slice(img, m.Meta.Cols(), m.Meta.Rows(), m.Grid.TileWidth, m.Grid.TileHeight,
		imaging.Gutter(m.Meta.Gutter))
	if err != nil {
		return nil, err
	}
	entries := make([]store.Entry, len(tiles))
	if err := f.encodeAll(tiles, entries, m, set, seeding); err != nil {
		return nil, err
	}
	res := &MetaResult{Tiles: entries, StoredAt: time.Now()}
	if err := f.store.Put(entries, res.StoredAt); err != nil {
		res.StoreErr = err
		metrics().storeErrors.Inc()
		f.log.Error("storing metatile failed", zap.String("layer", set.Layer), zap.Error(err))
	} else {
		f.recordParams(set, m.Params)
	}
	return res, nil
}

// recordedParams are the tile sets whose parameter values this process
// has recorded in their store, by store name and set.
var recordedParams sync.Map

// recordParams saves a parameter set's values in the store the first
// time this process stores a tile of it, so that a reseed of every stored
// parameter set can request them again (store.ParamsRecorder). One write
// per set and process; the empty set needs none.
func (f *fetcher) recordParams(set store.Set, p ParamValues) {
	canonical := p.Canonical()
	rec, ok := f.store.(store.ParamsRecorder)
	if canonical == "" || !ok {
		return
	}
	key := f.store.Name() + "\x00" + set.Layer + "\x00" + set.Gridset + "\x00" + set.Format + "\x00" + set.Params
	if _, done := recordedParams.LoadOrStore(key, struct{}{}); done {
		return
	}
	if err := rec.RecordParams(set, canonical); err != nil {
		recordedParams.Delete(key) // the next store tries again
		f.log.Warn("recording a parameter set's values failed", zap.String("layer", set.Layer), zap.Error(err))
	}
}

// renderedElsewhere waits for another node of the cluster that is
// rendering the metatile (its render marker is there) and returns its
// tiles from the shared store; nil when nobody else renders it, or the
// tiles are not all there after the wait: then this node renders.
func (f *fetcher) renderedElsewhere(marker string, set store.Set, m *MetaRequest, fl *flight) *MetaResult {
	busy, until := f.node.RenderingElsewhere(marker)
	if !busy {
		return nil
	}
	f.node.WaitRender(fl.queued, marker, until)
	if fl.queued.Err() != nil {
		return nil // nobody waits any more; fetch's own checks end it
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	cols, rows := m.Meta.Cols(), m.Meta.Rows()
	res := &MetaResult{Tiles: make([]store.Entry, 0, cols*rows)}
	for i := range cols * rows {
		idx := m.Meta.TileAt(i%cols, i/cols)
		k := store.Key{Set: set, Z: idx.Z, X: idx.X, Y: idx.Y}
		t, err := f.store.Get(ctx, k, nil)
		if err != nil {
			return nil
		}
		res.Tiles = append(res.Tiles, store.Entry{Key: k, Data: t.Data})
		if t.StoredAt.After(res.StoredAt) {
			res.StoredAt = t.StoredAt
		}
	}
	metrics().renderedElsewhere.Inc()
	return res
}

// encodeAll encodes the tiles: a visitor's metatile on all cores, since
// encoding is most of the CPU a miss costs; a seed's on this goroutine
// (a seed thread on Linux, seedthread_linux.go; elsewhere yielding between
// tiles).
func (f *fetcher) encodeAll(tiles []image.Image, out []store.Entry, m *MetaRequest, set store.Set, seeding bool) error {
	cols := m.Meta.Cols()
	encode := func(i int, buf *bytes.Buffer) error {
		buf.Reset()
		if err := m.Layer.encoder.Encode(buf, tiles[i], m.Format.Format); err != nil {
			return err
		}
		idx := m.Meta.TileAt(i%cols, i/cols)
		out[i] = store.Entry{Key: store.Key{Set: set, Z: idx.Z, X: idx.X, Y: idx.Y}, Data: bytes.Clone(buf.Bytes())}
		return nil
	}
	if seeding {
		var buf bytes.Buffer
		for i := range tiles {
			t0 := time.Now()
			if err := encode(i, &buf); err != nil {
				return err
			}
			seedCPU.pace(time.Since(t0))
			if !seedThreadsLocked {
				runtime.Gosched()
			}
		}
		return nil
	}
	workers := min(runtime.GOMAXPROCS(0), len(tiles))
	var wg sync.WaitGroup
	errs := make([]error, workers)
	next := make(chan int, len(tiles))
	for i := range tiles {
		next <- i
	}
	close(next)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf bytes.Buffer
			for i := range next {
				if err := encode(i, &buf); err != nil {
					errs[w] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// markFetched closes fetched once.
func (fl *flight) markFetched() {
	select {
	case <-fl.fetched:
	default:
		close(fl.fetched)
	}
}

// fetchBody makes the upstream GetMap, holding an upstream slot only while
// the request is on the wire. While the circuit breaker is open it refuses
// at once, before and after waiting for a slot. The timeout runs from the
// moment the request goes out: time in line is not the upstream's, and a
// fetch that waited long must not fail as if the upstream had been slow.
func (f *fetcher) fetchBody(m *MetaRequest, fl *flight) (_ []byte, _ string, err error) {
	sh := f.shared
	brk, limit := sh.breaker, sh.limit
	if err := brk.check(); err != nil {
		return nil, "", err
	}
	sh.mu.Lock()
	p := fl.prio
	sh.mu.Unlock()
	held, err := limit.acquire(fl.queued, p, fl.urgent)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			err = fmt.Errorf("%w: nobody waits for the tile any more", ErrUpstreamBusy)
		}
		return nil, "", err
	}
	defer limit.release(held)
	sh.mu.Lock()
	abandoned := fl.waiters == 0 // the last caller left just as the slot came
	fl.onWire = !abandoned
	sh.mu.Unlock()
	if abandoned {
		return nil, "", fmt.Errorf("%w: nobody waits for the tile any more", ErrUpstreamBusy)
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	probe, err := brk.allow()
	if err != nil {
		return nil, "", err
	}
	down := false // err says the upstream is unavailable
	defer func() { err = brk.record(probe, down, err) }()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.getMapURL(m), nil)
	if err != nil {
		return nil, "", err
	}
	start := time.Now()
	resp, err := f.client.Do(req)
	if err != nil {
		down = true
		return nil, "", f.transportError(ctx, "GetMap request failed", err)
	}
	defer resp.Body.Close()
	body, err := readBody(resp)
	m.Layer.upstreamLatency.Observe(time.Since(start).Seconds())
	if err != nil {
		down = true
		return nil, "", f.transportError(ctx, "reading GetMap answer", err)
	}
	contentType := resp.Header.Get("Content-Type")
	if resp.StatusCode != http.StatusOK {
		down = resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests
		err := &answerError{status: resp.StatusCode, reason: ogc.Reason(contentType, body)}
		putBody(body)
		return nil, "", err
	}
	if len(body) > maxUpstreamBody {
		return nil, "", errors.New("GetMap answer too large")
	}
	if !looksLikeImage(contentType, body) {
		// A WMS reports a bad request as an exception document, with
		// HTTP 200 (MapServer) or 400 (QGIS Server): its words, not
		// only "not an image", are what the operator needs.
		err := &answerError{status: resp.StatusCode, contentType: contentType, reason: ogc.Reason(contentType, body)}
		putBody(body)
		return nil, "", err
	}
	return body, contentType, nil
}

// answerError is a GetMap the upstream answered, but not with an image:
// an HTTP error status, or a document (an exception report) in place of
// the image. Its message carries the upstream's own words, one escaped
// line of bounded length (ogc.Reason), for the 502, the log and a seed
// task's last error.
type answerError struct {
	status      int
	contentType string // set when the status was 200
	reason      string // "" when the answer had no text
}

func (e *answerError) Error() string {
	msg := fmt.Sprintf("GetMap answered HTTP %d", e.status)
	if e.status == http.StatusOK {
		msg += fmt.Sprintf(" with %q, not an image", e.contentType)
	}
	if e.reason != "" {
		msg += ", saying: " + e.reason
	}
	return msg
}

// looksLikeImage tells an image from an exception document before the
// decoder does: the Content-Type must be an image's, and the body must not
// be markup (some servers send their exceptions as image/png). Whether it
// really is a PNG or JPEG of the right size is imaging.Decode's to check.
func looksLikeImage(contentType string, body []byte) bool {
	mt, _, _ := strings.Cut(contentType, ";")
	if !strings.HasPrefix(strings.ToLower(strings.TrimSpace(mt)), "image/") {
		return false
	}
	body = bytes.TrimPrefix(body, []byte("\xef\xbb\xbf"))
	body = bytes.TrimLeft(body, " \t\r\n")
	return len(body) == 0 || body[0] != '<'
}

// readBody reads an answer of at most maxUpstreamBody (+1, to tell a
// larger one). An answer that says its length is read into one buffer of
// that size (net/http stops its body there): an uncompressed metatile is
// megabytes, which io.ReadAll would reach through a score of growing
// copies. Buffers of large answers come from bodyPools (putBody).
func readBody(resp *http.Response) ([]byte, error) {
	n := resp.ContentLength
	if n < 0 || n > maxUpstreamBody {
		return io.ReadAll(io.LimitReader(resp.Body, maxUpstreamBody+1))
	}
	body := getBody(int(n))
	if _, err := io.ReadFull(resp.Body, body); err != nil {
		putBody(body)
		return nil, err
	}
	return body, nil
}

// bodyPools hold answer buffers of pooledBody bytes or more by size class
// (powers of two): a seed of uncompressed metatiles reads 4 MB per
// metatile, which the garbage collector would otherwise chase several
// times a second, taking CPU from the cache hits beside it.
var bodyPools [bits.UintSize]sync.Pool

const pooledBody = 64 << 10

func getBody(n int) []byte {
	if n < pooledBody {
		return make([]byte, n)
	}
	class := bits.Len(uint(n - 1))
	if b, ok := bodyPools[class].Get().(*[]byte); ok {
		return (*b)[:n]
	}
	return make([]byte, n, 1<<class)
}

// putBody gives a buffer from getBody back; nothing may use it after.
func putBody(b []byte) {
	c := cap(b)
	if c < pooledBody || c&(c-1) != 0 {
		return // small, or an odd size (io.ReadAll's): not worth keeping
	}
	b = b[:0]
	bodyPools[bits.Len(uint(c-1))].Put(&b)
}

// transportError words a failed request or read for users and logs: a
// timeout as such, and never the upstream's URL (its host and query, a
// map file's path, are nobody else's business).
func (f *fetcher) transportError(ctx context.Context, what string, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%s: no complete answer within the timeout of %v", what, f.timeout)
	}
	// *url.Error names the URL, *net.OpError the addresses, *net.DNSError
	// the host: keep what went wrong, not where.
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		err = oe.Err
	}
	var de *net.DNSError
	if errors.As(err, &de) {
		err = errors.New("name lookup failed: " + de.Err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// getMapURL is the upstream GetMap for a metatile. It always speaks WMS
// 1.1.1, whose BBOX is x,y in every CRS, and keeps whatever query the
// configured upstream URL carries (map=... for MapServer).
func (f *fetcher) getMapURL(m *MetaRequest) string {
	q := f.upstream.Query()
	set := func(k, v string) {
		for old := range q {
			if strings.EqualFold(old, k) {
				delete(q, old)
			}
		}
		q.Set(k, v)
	}
	set("SERVICE", "WMS")
	set("VERSION", "1.1.1")
	set("REQUEST", "GetMap")
	set("LAYERS", m.Layer.upstreamLayers)
	set("STYLES", "")
	set("SRS", upstreamSRS(m.Grid.SRS))
	b := m.Meta.BBox
	set("BBOX", fmtFloat(b.MinX)+","+fmtFloat(b.MinY)+","+fmtFloat(b.MaxX)+","+fmtFloat(b.MaxY))
	set("WIDTH", strconv.Itoa(m.Meta.Width))
	set("HEIGHT", strconv.Itoa(m.Meta.Height))
	if m.Layer.upstreamFormat != "" {
		set("FORMAT", m.Layer.upstreamFormat)
	} else {
		// The tile's format, or for formats encoded here (png8, the mixed
		// ones, WebP) lossless PNG.
		set("FORMAT", m.Format.UpstreamMIME())
	}
	if m.Format.Transparency() {
		set("TRANSPARENT", strings.ToUpper(strconv.FormatBool(m.Layer.transparent)))
	}
	for _, kv := range m.Params.Pairs() {
		set(kv[0], kv[1])
	}
	u := *f.upstream
	u.RawQuery = q.Encode()
	return u.String()
}

// upstreamSRS names the CRS for the upstream: the spherical Mercator
// family as EPSG:3857, the code every current WMS knows.
func upstreamSRS(code int) string {
	if gridset.CanonicalSRS(code) == 900913 {
		code = 3857
	}
	return "EPSG:" + strconv.Itoa(code)
}

func fmtFloat(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
