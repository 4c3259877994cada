package s3store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/minio/minio-go/v7"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/store"
	"github.com/tilecache/caddy-tilecache/module/store/s3store/s3test"
	"github.com/tilecache/caddy-tilecache/module/store/storetest"
)

// minioFor starts a MinIO of the test's own (about a second): tests stop
// and start it.
func minioFor(t *testing.T) *s3test.Server {
	t.Helper()
	return s3test.Start(t)
}

func openStore(t *testing.T, m *s3test.Server, bucket string) *Store {
	t.Helper()
	return openStoreTimeout(t, m, bucket, 0)
}

// openStoreTimeout opens a store whose requests may each take up to d (0:
// the default, 10 s). Tests that fill a bucket with many concurrent
// requests, setting the scene and not testing timeouts, give MinIO
// minutes: on a loaded machine one of 16 concurrent Puts of 100 tiles
// took over 10 s.
func openStoreTimeout(t *testing.T, m *s3test.Server, bucket string, d time.Duration) *Store {
	t.Helper()
	s, err := Open(Config{Bucket: bucket, Prefix: "cache", Endpoint: m.Addr, Region: "us-east-1", PathStyle: true,
		Insecure: true, AccessKey: s3test.AccessKey, SecretKey: s3test.SecretKey, Timeout: caddy.Duration(d)}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

var png = store.Set{Layer: "test:polygons", Gridset: "EPSG:4326", Format: "image/png", Params: "e3b0c44298fc1c14"}

func entries(set store.Set, z int, xs, ys []int64) []store.Entry {
	var out []store.Entry
	for _, x := range xs {
		for _, y := range ys {
			out = append(out, store.Entry{Key: store.Key{Set: set, Z: z, X: x, Y: y}, Data: fmt.Appendf(nil, "tile %d/%d/%d", z, x, y)})
		}
	}
	return out
}

func TestObjectsUnderDocumentedKeys(t *testing.T) {
	m := minioFor(t)
	b := m.Bucket("keys")
	s := openStore(t, m, b)
	jpeg := png
	jpeg.Format = "image/jpeg"
	at := time.Date(2026, 11, 25, 1, 2, 3, 456789, time.UTC)
	if err := s.Put(entries(png, 2, []int64{5}, []int64{2, 3}), at); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(entries(jpeg, 0, []int64{1}, []int64{0}), at); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"cache/test:polygons/1/EPSG:4326/jpeg/e3b0c44298fc1c14/0/1/0.jpeg",
		"cache/test:polygons/1/EPSG:4326/png/e3b0c44298fc1c14/2/5/2.png",
		"cache/test:polygons/1/EPSG:4326/png/e3b0c44298fc1c14/2/5/3.png",
	}
	if got := m.Keys(b, ""); !slices.Equal(got, want) {
		t.Fatalf("objects:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	info, err := m.Client.StatObject(context.Background(), b, want[0], minio.StatObjectOptions{})
	if err != nil || info.ContentType != "image/jpeg" {
		t.Fatalf("JPEG tile: Content-Type %q, %v", info.ContentType, err)
	}
	info, _ = m.Client.StatObject(context.Background(), b, want[1], minio.StatObjectOptions{})
	if info.ContentType != "image/png" {
		t.Fatalf("PNG tile: Content-Type %q", info.ContentType)
	}

	k := store.Key{Set: png, Z: 2, X: 5, Y: 3}
	tile, err := s.Get(context.Background(), k, make([]byte, 0, 4))
	if err != nil {
		t.Fatal(err)
	}
	if string(tile.Data) != "tile 2/5/3" || !tile.StoredAt.Equal(at) || tile.ETag != store.ETagOf(tile.Data) {
		t.Fatalf("Get = %q stored %v etag %x; want the stored tile, stamp %v, etag %x",
			tile.Data, tile.StoredAt, tile.ETag, at, store.ETagOf(tile.Data))
	}
	if _, err := s.Get(context.Background(), store.Key{Set: png, Z: 2, X: 5, Y: 4}, nil); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get of a missing tile: %v, want ErrNotFound", err)
	}

	has, err := s.Has([]store.Key{k, {Set: png, Z: 2, X: 4, Y: 3}, {Set: jpeg, Z: 0, X: 1, Y: 0}}, at)
	if err != nil || !slices.Equal(has, []bool{true, false, true}) {
		t.Fatalf("Has = %v, %v; want [true false true]", has, err)
	}
	has, _ = s.Has([]store.Key{k}, at.Add(time.Nanosecond))
	if has[0] {
		t.Fatal("Has counts a tile stored before notBefore")
	}

	sets, err := s.SetsOf(png.Layer, png.Gridset)
	if err != nil || len(sets) != 2 || !slices.Contains(sets, png) || !slices.Contains(sets, jpeg) {
		t.Fatalf("SetsOf = %v, %v; want the PNG and JPEG sets", sets, err)
	}
	if sets, _ := s.SetsOf(png.Layer, "EPSG:900913"); len(sets) != 0 {
		t.Fatalf("SetsOf another gridset = %v", sets)
	}
}

func TestFormatSegmentsRoundTrip(t *testing.T) {
	for _, f := range []string{"image/png", "image/jpeg", "image/png; mode=8bit", "image/png8"} {
		seg := formatSegment(f)
		if strings.Contains(seg, "/") {
			t.Errorf("%q: segment %q has a slash", f, seg)
		}
		if back, err := formatName(seg); err != nil || back != f {
			t.Errorf("%q → %q → %q, %v", f, seg, back, err)
		}
	}
}

func TestDeleteRangeDeletesExactlyTheRange(t *testing.T) {
	m := minioFor(t)
	b := m.Bucket("ranges")
	s := openStore(t, m, b)
	all := []int64{0, 1, 2, 3, 10, 11}
	if err := s.Put(entries(png, 4, all, all), time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(entries(png, 3, all, all), time.Now()); err != nil {
		t.Fatal(err)
	}
	n, err := s.DeleteRange(png, 4, gridset.Range{MinX: 1, MaxX: 10, MinY: 2, MaxY: 3}, nil)
	if err != nil || n != 4*2 {
		t.Fatalf("DeleteRange = %d, %v; want 8 (x 1,2,3,10 × y 2,3)", n, err)
	}
	for _, x := range all {
		for _, y := range all {
			for _, z := range []int{3, 4} {
				_, err := s.Get(context.Background(), store.Key{Set: png, Z: z, X: x, Y: y}, nil)
				gone := z == 4 && x >= 1 && x <= 10 && y >= 2 && y <= 3
				if gone != errors.Is(err, store.ErrNotFound) || (!gone && err != nil) {
					t.Errorf("tile %d/%d/%d: %v (in range: %v)", z, x, y, err, gone)
				}
			}
		}
	}
	if got := len(m.Keys(b, "cache/test:polygons/1/")); got != 2*36-8 {
		t.Fatalf("%d tile objects left, want %d", got, 2*36-8)
	}
	// Besides the tiles, the deletion wrote the layer's epoch, which local
	// tiers key their copies by.
	if got := m.Keys(b, ""); len(got) != 2*36-8+1 || !slices.Contains(got, "cache/test:polygons/epoch") {
		t.Fatalf("%d objects in the bucket, want the tiles and cache/test:polygons/epoch", len(got))
	}
}

// TestTruncateLayerCostsTwoRequests: truncating a layer is one read and one
// write of its generation object whatever it holds (counted in requests,
// not timed); the old objects go in the background.
func TestTruncateLayerCostsTwoRequests(t *testing.T) {
	m := minioFor(t)
	b := m.Bucket("truncate")
	s := openStoreTimeout(t, m, b, 3*time.Minute)
	other := png
	other.Layer = "test:roads"
	if err := s.Put(entries(other, 1, []int64{0}, []int64{0}), time.Now()); err != nil {
		t.Fatal(err)
	}
	stored := 0
	for _, n := range []int{1_000, 100_000} {
		// Grow the layer to n tiles, 100 per Put (many Puts at once).
		fill := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, n/100)
		for x := int64(stored / 100); x < int64(n/100); x++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ys := make([]int64, 100)
				for i := range ys {
					ys[i] = int64(i)
				}
				errs <- s.Put(entries(png, 12, []int64{x}, ys), time.Now())
			}()
			if x%16 == 15 {
				wg.Wait()
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		stored = n
		gen, _ := s.generation(png.Layer)
		if got := len(m.Keys(b, s.genPrefix(png.Layer, gen))); got != n {
			t.Fatalf("%d objects stored, want %d", got, n)
		}
		filled := time.Since(fill)
		before, start := s.calls.Load(), time.Now()
		if err := s.TruncateLayer(png.Layer); err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		if c := s.calls.Load() - before; c != 2 {
			t.Fatalf("truncating a layer of %d tiles took %d requests, want 2", n, c)
		}
		if _, err := s.Get(context.Background(), store.Key{Set: png, Z: 12, X: 0, Y: 0}, nil); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("a truncated tile is still served: %v", err)
		}
		if _, err := s.Get(context.Background(), store.Key{Set: other, Z: 1}, nil); err != nil {
			t.Fatalf("truncating one layer lost another's tile: %v", err)
		}
		// Reclaim deletes exactly the old generation's objects.
		start = time.Now()
		reclaimed, err := s.Reclaim()
		t.Logf("%d tiles: stored in %v, truncateLayer took %v (2 requests), reclaimed in %v",
			n, filled.Round(time.Millisecond), took.Round(time.Microsecond), time.Since(start).Round(time.Millisecond))
		if err != nil || reclaimed != int64(n) {
			t.Fatalf("Reclaim = %d, %v; want %d", reclaimed, err, n)
		}
		if left := m.Keys(b, "cache/test:polygons/"); !slices.Equal(left, []string{"cache/test:polygons/generation"}) {
			t.Fatalf("after reclaiming: %d objects left under the layer, e.g. %v", len(left), left[:min(3, len(left))])
		}
		stored = 0
	}
	obj, err := m.Client.GetObject(context.Background(), b, "cache/test:polygons/generation", minio.GetObjectOptions{})
	var buf bytes.Buffer
	if err == nil {
		_, err = buf.ReadFrom(obj)
	}
	if err != nil || buf.String() != "3" {
		t.Fatalf("generation object %q, %v; want 3 after two truncations", buf.String(), err)
	}
}

// TestGenerationSeenFromAnotherStore: a second store on the same bucket
// (another node) stops serving a layer truncated by the first within the
// refresh interval.
func TestGenerationSeenFromAnotherStore(t *testing.T) {
	m := minioFor(t)
	b := m.Bucket("nodes")
	a, other := openStore(t, m, b), openStore(t, m, b)
	k := store.Key{Set: png, Z: 1, X: 1, Y: 0}
	if err := a.Put([]store.Entry{{Key: k, Data: []byte("x")}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Get(context.Background(), k, nil); err != nil {
		t.Fatalf("the other node does not see the tile: %v", err)
	}
	if err := a.TruncateLayer(k.Layer); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(refreshEvery + 2*time.Second)
	for {
		_, err := other.Get(context.Background(), k, nil)
		if errors.Is(err, store.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the other node still serves the truncated tile after %s: %v", refreshEvery+2*time.Second, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestOutage: with S3 down, calls fail (never ErrNotFound, which would
// read as "render it"), the breaker then refuses them at once, and the
// store recovers by itself when S3 is back.
func TestOutage(t *testing.T) {
	m := minioFor(t)
	b := m.Bucket("outage")
	s := openStore(t, m, b)
	k := store.Key{Set: png, Z: 1, X: 1, Y: 0}
	if err := s.Put([]store.Entry{{Key: k, Data: []byte("x")}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	m.Stop()
	for i := 0; i < 5; i++ {
		if _, err := s.Get(context.Background(), k, nil); err == nil || errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Get with S3 down: %v, want an error that is not ErrNotFound", err)
		}
	}
	before := s.calls.Load()
	_, err := s.Get(context.Background(), k, nil)
	if !errors.Is(err, store.ErrUnavailable) || s.calls.Load() != before || s.Ready() {
		t.Fatalf("after 5 failures: %v (requests made: %d); want ErrUnavailable without a request", err, s.calls.Load()-before)
	}
	if err := s.Put([]store.Entry{{Key: k, Data: []byte("y")}}, time.Now()); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Put while unavailable: %v", err)
	}
	m.Start()
	deadline := time.Now().Add(20 * time.Second)
	for {
		tile, err := s.Get(context.Background(), k, nil)
		if err == nil {
			if string(tile.Data) != "x" {
				t.Fatalf("after the outage: %q, want the tile stored before it", tile.Data)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the store did not recover in 20 s: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestOpenRefusesWrongSettings(t *testing.T) {
	m := minioFor(t)
	m.Bucket("exists")
	cfg := Config{Bucket: "exists", Endpoint: m.Addr, PathStyle: true, Insecure: true, Region: "us-east-1",
		AccessKey: s3test.AccessKey, SecretKey: s3test.SecretKey, Timeout: 0}
	bad := cfg
	bad.Bucket = "missing"
	if _, err := Open(bad, zap.NewNop()); err == nil || !strings.Contains(err.Error(), `bucket "missing" does not exist`) {
		t.Errorf("missing bucket: %v", err)
	}
	bad = cfg
	bad.SecretKey = "wrong"
	if _, err := Open(bad, zap.NewNop()); err == nil || strings.Contains(err.Error(), "wrong") {
		t.Errorf("wrong secret key: %v (must fail, and never print the key)", err)
	}
	bad = cfg
	bad.Bucket = ""
	if _, err := Open(bad, zap.NewNop()); err == nil {
		t.Error("no bucket: no error")
	}
	// Nothing listens there: the store starts, unavailable, and says so.
	down := cfg
	down.Endpoint = "127.0.0.1:1"
	s, err := Open(down, zap.NewNop())
	if err != nil {
		t.Fatalf("unreachable endpoint: %v, want a degraded start", err)
	}
	defer s.Close()
	if s.Ready() {
		t.Error("a store whose endpoint does not answer says it is ready")
	}
	if _, err := s.Get(context.Background(), store.Key{Set: png, Z: 0}, nil); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Get from a store that started degraded: %v", err)
	}
}

// TestTilesContract: the S3 store keeps the contract of every store (the
// one the Badger store passes), each part in a bucket of its own.
func TestTilesContract(t *testing.T) {
	m := minioFor(t)
	n := 0
	storetest.Tiles(t, func(t *testing.T) store.Tiles {
		n++
		return openStore(t, m, m.Bucket(fmt.Sprintf("contract-%d", n)))
	})
}

// TestGetGivesUpWithItsCaller: a Get whose visitor hung up ends at once,
// asks S3 nothing if it had not yet, and is no failure of S3: a flood of
// abandoned requests neither queues on S3 nor opens the breaker.
func TestGetGivesUpWithItsCaller(t *testing.T) {
	m := minioFor(t)
	s := openStore(t, m, m.Bucket("gone"))
	k := store.Key{Set: png, Z: 1}
	if err := s.Put([]store.Entry{{Key: k, Data: []byte("tile")}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	before := s.calls.Load()
	if _, err := s.Get(gone, k, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Get for a caller already gone = %v, want context.Canceled", err)
	}
	if n := s.calls.Load() - before; n != 0 {
		t.Fatalf("Get for a caller already gone made %d requests", n)
	}
	// S3 hangs; callers give up after 100 ms, more of them than the
	// breaker's failure threshold.
	m.Pause()
	for i := 0; i < 8; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		start := time.Now()
		_, err := s.Get(ctx, k, nil)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			m.Resume()
			t.Fatalf("Get given up by its caller = %v, want the caller's context error", err)
		}
		if took := time.Since(start); took > 2*time.Second {
			m.Resume()
			t.Fatalf("Get went on %v after its caller gave up at 100 ms", took)
		}
	}
	m.Resume()
	if tile, err := s.Get(context.Background(), k, nil); err != nil || string(tile.Data) != "tile" {
		t.Fatalf("after callers gave up on a hanging S3: %q, %v (the breaker counted them as failures?)", tile.Data, err)
	}
}

// faultyPuts is a transport that fails the first `fail` attempts of PUTs
// of tile objects (keys under cache/) with fault, or answers them with
// status when fault is nil, and counts every attempt.
type faultyPuts struct {
	rt       http.RoundTripper
	fail     int
	fault    error
	status   int
	mu       sync.Mutex
	attempts int
}

func (f *faultyPuts) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPut || !strings.Contains(req.URL.Path, "/cache/") {
		return f.rt.RoundTrip(req)
	}
	f.mu.Lock()
	f.attempts++
	failing := f.attempts <= f.fail
	f.mu.Unlock()
	if !failing {
		return f.rt.RoundTrip(req)
	}
	// Part of the body went out before the connection broke.
	if req.Body != nil {
		io.CopyN(io.Discard, req.Body, 3)
		req.Body.Close()
	}
	if f.fault != nil {
		return nil, f.fault
	}
	return &http.Response{StatusCode: f.status, Status: http.StatusText(f.status), Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"application/xml"}}, Request: req,
		Body: io.NopCloser(strings.NewReader(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>InternalError</Code>` +
			`<Message>We encountered an internal error, please try again.</Message></Error>`))}, nil
}

func (f *faultyPuts) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.attempts
}

// openFaulty opens a store whose PUTs of tiles go through f.
func openFaulty(t *testing.T, m *s3test.Server, bucket string, f *faultyPuts) *Store {
	t.Helper()
	WrapTransport = func(rt http.RoundTripper) http.RoundTripper { f.rt = rt; return f }
	defer func() { WrapTransport = nil }()
	return openStore(t, m, bucket)
}

func putErrors(t *testing.T) float64 {
	t.Helper()
	var m dto.Metric
	if err := errorsTotal.WithLabelValues("put").Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestPutRetriesATransportFault: a PUT whose connection broke on its way
// (a kept-alive connection S3 closed: broken pipe, reset, EOF) is sent
// again, so the metatile is stored and its render not lost (a seed would
// otherwise ask the upstream for it again); it is no failure of S3. A
// fault that stays fails the Put after two retries, and a refused
// connection (S3 down: the breaker's business) is not retried.
func TestPutRetriesATransportFault(t *testing.T) {
	m := minioFor(t)
	opErr := func(op string, errno syscall.Errno) error {
		return &net.OpError{Op: op, Net: "tcp", Err: os.NewSyscallError(op, errno)}
	}
	for i, c := range []struct {
		name     string
		fail     int
		fault    error
		attempts int // of the tile's PUT
		ok       bool
	}{
		{"broken pipe", 1, opErr("write", syscall.EPIPE), 2, true},
		{"connection reset", 1, opErr("read", syscall.ECONNRESET), 2, true},
		{"closed before the answer", 1, io.EOF, 2, true},
		{"unexpected EOF", 1, io.ErrUnexpectedEOF, 2, true},
		{"broken twice", 2, opErr("write", syscall.EPIPE), 3, true},
		{"broken for good", 100, opErr("write", syscall.EPIPE), 3, false},
		{"refused", 1, opErr("dial", syscall.ECONNREFUSED), 1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := &faultyPuts{fail: c.fail, fault: c.fault}
			s := openFaulty(t, m, m.Bucket(fmt.Sprintf("transport-%d", i)), f)
			k := store.Key{Set: png, Z: 3, X: 2, Y: 1}
			errsBefore := putErrors(t)
			err := s.Put([]store.Entry{{Key: k, Data: []byte("the rendered tile")}}, time.Now())
			if got := f.count(); got != c.attempts {
				t.Errorf("%d PUT attempts, want %d", got, c.attempts)
			}
			if !c.ok {
				if err == nil {
					t.Fatal("Put succeeded")
				}
				if putErrors(t) != errsBefore+1 {
					t.Errorf("s3_errors_total{op=put} %v -> %v, want one failure", errsBefore, putErrors(t))
				}
				return
			}
			if err != nil {
				t.Fatalf("Put: %v", err)
			}
			tile, err := s.Get(context.Background(), k, nil)
			if err != nil || string(tile.Data) != "the rendered tile" {
				t.Fatalf("stored tile %q, %v", tile.Data, err)
			}
			if e := putErrors(t); e != errsBefore {
				t.Errorf("s3_errors_total{op=put} %v -> %v for a Put that stored its tile", errsBefore, e)
			}
			if s.br.inRow != 0 {
				t.Errorf("the breaker counts %d failures", s.br.inRow)
			}
		})
	}
}

// TestPutFailsOnAnErrorAnswer: an HTTP error answer of S3 to a PUT (here
// 500 InternalError) fails the Put at once, sent once, and counts as a
// failure for the breaker: answers are not transport faults.
func TestPutFailsOnAnErrorAnswer(t *testing.T) {
	m := minioFor(t)
	f := &faultyPuts{fail: 1, status: http.StatusInternalServerError}
	s := openFaulty(t, m, m.Bucket("answer"), f)
	errsBefore := putErrors(t)
	err := s.Put([]store.Entry{{Key: store.Key{Set: png, Z: 3, X: 2, Y: 1}, Data: []byte("tile")}}, time.Now())
	if err == nil || minio.ToErrorResponse(errors.Unwrap(err)).StatusCode != http.StatusInternalServerError {
		t.Fatalf("Put answered 500: %v", err)
	}
	if n := f.count(); n != 1 {
		t.Errorf("%d PUT attempts for an error answer, want 1", n)
	}
	if putErrors(t) != errsBefore+1 || s.br.inRow != 1 {
		t.Errorf("s3_errors_total{op=put} %v -> %v, breaker %d failures in a row; want one failure", errsBefore, putErrors(t), s.br.inRow)
	}
}
