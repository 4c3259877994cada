package s3store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"golang.org/x/sync/errgroup"

	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/imaging"
	"github.com/tilecache/caddy-tilecache/module/store"
)

// Config is where the tiles go. Credentials left empty come from the
// environment (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, MINIO_ROOT_USER/
// MINIO_ROOT_PASSWORD), ~/.aws/credentials, or the instance's IAM role.
type Config struct {
	// Bucket must exist; the store does not create it.
	Bucket string `json:"bucket,omitempty"`
	// Prefix goes before every object key ("tiles/" keeps the cache in a
	// folder of a shared bucket). A missing trailing "/" is added.
	Prefix string `json:"prefix,omitempty"`
	// Endpoint is host[:port] of the S3 service. Default s3.amazonaws.com.
	Endpoint string `json:"endpoint,omitempty"`
	// Region of the bucket; empty lets the client find it.
	Region string `json:"region,omitempty"`
	// PathStyle addresses the bucket as endpoint/bucket instead of
	// bucket.endpoint (MinIO, Ceph RGW and Garage usually need it).
	PathStyle bool `json:"path_style,omitempty"`
	// Insecure speaks plain HTTP to the endpoint (a service on loopback or
	// a private network).
	Insecure bool `json:"insecure,omitempty"`
	// AccessKey, SecretKey and SessionToken are credentials; in a
	// Caddyfile write them as placeholders, e.g. {env.AWS_ACCESS_KEY_ID}.
	// They are never logged.
	AccessKey    string `json:"access_key,omitempty"`
	SecretKey    string `json:"secret_key,omitempty"`
	SessionToken string `json:"session_token,omitempty"`
	// Timeout bounds one S3 request. Default 10s.
	Timeout caddy.Duration `json:"timeout,omitempty"`
	// Concurrency bounds the requests one call makes at once (the 16
	// objects of a metatile, the deletes of a truncation). Default 16.
	Concurrency int `json:"concurrency,omitempty"`
}

// MaxConns bounds the connections one store opens to S3.
const MaxConns = 128

// Store is a tile store in an S3 bucket. It implements store.Tiles.
type Store struct {
	cfg    Config
	client *minio.Client
	core   minio.Core
	prefix string
	name   string
	log    *zap.Logger
	// failLog is log sampled, so an S3 outage is logged, not flooded.
	failLog *zap.Logger

	gens   perLayer[uint64]
	epochs perLayer[string]
	br     breaker
	// calls counts requests made through call, for tests that show what
	// an operation costs in requests rather than in time.
	calls atomic.Int64
	// puts counts the tiles and bytes PUT per layer (listing.go).
	puts atomic.Pointer[PutCounts]

	// requests bounds the goroutines making a tile request at once
	// across all of the store's operations, to MaxConns: a flood of
	// misses each storing 16 tiles would otherwise start 16 goroutines per
	// metatile, most of them only waiting for one of the connections.
	requests chan struct{}

	stop chan struct{}
	done sync.WaitGroup
	kick chan struct{}
	// reclaimDelay is how long a truncated generation stays before its
	// objects are deleted: a Put that read the old generation just before
	// the switch lands in it before the delete lists it (a variable for tests).
	reclaimDelay time.Duration
}

var (
	_ store.Tiles          = (*Store)(nil)
	_ store.ParamsRecorder = (*Store)(nil)
)

// ErrUnavailable wraps every error of a call the store refused without
// asking S3, because S3 failed too often just before (see breaker).
var ErrUnavailable = store.ErrUnavailable

// Open connects to the bucket. A bucket that does not exist or refuses the
// credentials is an error (the configuration is wrong and will stay so);
// an endpoint that does not answer is not: the store starts unavailable,
// logs it, and recovers when S3 answers, so that a node restarting during
// an S3 outage still serves maps from its upstream.
func Open(cfg Config, log *zap.Logger) (*Store, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("s3: no bucket")
	}
	if cfg.Endpoint == "" {
		cfg.Endpoint = "s3.amazonaws.com"
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = caddy.Duration(10 * time.Second)
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 16
	}
	prefix := strings.TrimLeft(cfg.Prefix, "/")
	if prefix != "" && !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	creds := credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, cfg.SessionToken)
	if cfg.AccessKey == "" && cfg.SecretKey == "" {
		creds = credentials.NewChainCredentials([]credentials.Provider{
			&credentials.EnvAWS{}, &credentials.EnvMinio{}, &credentials.FileAWSCredentials{},
			&credentials.IAM{Client: &http.Client{Transport: http.DefaultTransport}},
		})
	}
	lookup := minio.BucketLookupAuto
	if cfg.PathStyle {
		lookup = minio.BucketLookupPath
	}
	transport, err := minio.DefaultTransport(!cfg.Insecure)
	if err != nil {
		return nil, err
	}
	transport.MaxIdleConnsPerHost = 64 // every node keeps its hot path warm
	// A flood of visitors must not become a flood of connections to S3
	// (each costs two goroutines and a socket here, and S3 throttles):
	// calls past the bound wait for a connection, within their timeout.
	transport.MaxConnsPerHost = MaxConns
	var rt http.RoundTripper = transport
	if WrapTransport != nil {
		rt = WrapTransport(rt)
	}
	client, err := minio.New(cfg.Endpoint, &minio.Options{
		Creds: creds, Secure: !cfg.Insecure, Region: cfg.Region, BucketLookup: lookup,
		Transport: rt, MaxRetries: 1,
	})
	if err != nil {
		return nil, fmt.Errorf("s3: %w", err)
	}
	scheme := "https"
	if cfg.Insecure {
		scheme = "http"
	}
	s := &Store{
		cfg: cfg, client: client, core: minio.Core{Client: client}, prefix: prefix,
		name: fmt.Sprintf("s3:%s://%s/%s/%s", scheme, cfg.Endpoint, cfg.Bucket, prefix),
		stop: make(chan struct{}), kick: make(chan struct{}, 1), reclaimDelay: time.Minute,
		requests: make(chan struct{}, MaxConns),
	}
	s.log = log.With(zap.String("bucket", cfg.Bucket), zap.String("endpoint", cfg.Endpoint), zap.String("prefix", prefix))
	s.failLog = s.log.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return zapcore.NewSamplerWithOptions(c, 10*time.Second, 3, 0)
	}))
	s.br.init(5, 5*time.Second, available.WithLabelValues(s.name))
	s.puts.Store(NewPutCounts())

	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(cfg.Timeout))
	defer cancel()
	ok, err := client.BucketExists(ctx, cfg.Bucket)
	switch {
	case err != nil && unreachable(err):
		s.br.trip()
		s.log.Error("S3 does not answer: starting without the tile store; tiles come from the upstream "+
			"and are not stored until it answers", zap.Error(err))
	case err != nil:
		return nil, fmt.Errorf("s3: bucket %q at %s: %w", cfg.Bucket, cfg.Endpoint, err)
	case !ok:
		return nil, fmt.Errorf("s3: bucket %q does not exist at %s", cfg.Bucket, cfg.Endpoint)
	}
	s.done.Add(2)
	go s.refreshLoop()
	go s.reclaimLoop()
	s.log.Info("S3 tile store opened")
	return s, nil
}

// unreachable tells a network failure (the endpoint may come back) from
// an answer that refuses the configuration.
func unreachable(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.EOF) {
		return true
	}
	resp := minio.ToErrorResponse(err)
	return resp.StatusCode >= 500
}

// Name identifies the bucket and prefix.
func (s *Store) Name() string { return s.name }

// Close stops the background work; requests still running finish.
func (s *Store) Close() error {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	s.done.Wait()
	return nil
}

// call runs one S3 request through the breaker: refused at once while S3
// is considered down, and counted as a success or failure after.
func (s *Store) call(op string, fn func(ctx context.Context) error) error {
	return s.callCtx(context.Background(), op, fn)
}

// callCtx is call on behalf of a caller who may give up (a visitor who
// hung up): then the request ends at once, and counts neither as a
// failure of S3 nor in the logs.
func (s *Store) callCtx(parent context.Context, op string, fn func(ctx context.Context) error) error {
	if err := parent.Err(); err != nil {
		return err
	}
	if err := s.br.allow(); err != nil {
		return err
	}
	s.calls.Add(1)
	ctx, cancel := context.WithTimeout(parent, time.Duration(s.cfg.Timeout))
	defer cancel()
	err := fn(ctx)
	if err != nil && parent.Err() != nil {
		return parent.Err()
	}
	if err != nil && isNotFound(err) {
		s.br.success() // S3 answered
		return store.ErrNotFound
	}
	if err != nil {
		if s.br.failure() {
			s.failLog.Error("S3 failing: the tile store is unavailable for a while", zap.String("op", op), zap.Error(err))
		} else {
			s.failLog.Warn("S3 request failed", zap.String("op", op), zap.Error(err))
		}
		errorsTotal.WithLabelValues(op).Inc()
		return fmt.Errorf("s3 %s: %w", op, err)
	}
	s.br.success()
	return err
}

func isNotFound(err error) bool {
	code := minio.ToErrorResponse(err).Code
	return code == "NoSuchKey" || code == "NotFound"
}

const (
	metaStored = "Tc-Stored" // unix nanoseconds
	metaETag   = "Tc-Etag"   // store.ETagOf in hexadecimal
)

// Get implements store.Tiles.
func (s *Store) Get(ctx context.Context, k store.Key, dst []byte) (store.Tile, error) {
	gen, err := s.generation(k.Layer)
	if err != nil {
		return store.Tile{}, err
	}
	var t store.Tile
	err = s.callCtx(ctx, "get", func(ctx context.Context) error {
		body, info, _, err := s.core.GetObject(ctx, s.cfg.Bucket, s.tileKey(&k, gen), minio.GetObjectOptions{})
		if err != nil {
			return err
		}
		defer body.Close()
		buf := bytes.NewBuffer(dst[:0])
		if _, err := buf.ReadFrom(body); err != nil {
			return err
		}
		if info.Size >= 0 && int64(buf.Len()) != info.Size {
			return fmt.Errorf("short read: %d of %d bytes", buf.Len(), info.Size)
		}
		t = tileOf(info, buf.Bytes())
		return nil
	})
	return t, err
}

// tileOf reads the stamp and entity tag the store wrote; an object put
// there by something else gets its Last-Modified and a fresh hash.
func tileOf(info minio.ObjectInfo, data []byte) store.Tile {
	t := store.Tile{StoredAt: info.LastModified, Data: data}
	if v, err := strconv.ParseInt(info.UserMetadata[metaStored], 10, 64); err == nil {
		t.StoredAt = time.Unix(0, v)
	}
	if v, err := strconv.ParseUint(info.UserMetadata[metaETag], 16, 64); err == nil {
		t.ETag = v
	} else {
		t.ETag = store.ETagOf(data)
	}
	return t
}

// Put implements store.Tiles: the tiles of a metatile go up in parallel.
// Each object is written whole or not at all, so a failure part-way leaves
// some tiles stored and the rest missing, never a broken one.
func (s *Store) Put(entries []store.Entry, at time.Time) error {
	if len(entries) == 0 {
		return nil
	}
	gen, err := s.generation(entries[0].Key.Layer)
	if err != nil {
		return err
	}
	stamp := strconv.FormatInt(at.UnixNano(), 10)
	var g errgroup.Group
	g.SetLimit(s.cfg.Concurrency)
	for i := range entries {
		e := &entries[i]
		if e.Key.Layer != entries[0].Key.Layer {
			return errors.New("store: one batch holds one layer")
		}
		s.spawn(&g, func() error {
			return s.call("put", func(ctx context.Context) error {
				etag := strconv.FormatUint(store.ETagOf(e.Data), 16)
				err := s.retryTransport(ctx, "put", func() error {
					_, err := s.client.PutObject(ctx, s.cfg.Bucket, s.tileKey(&e.Key, gen), bytes.NewReader(e.Data),
						int64(len(e.Data)), minio.PutObjectOptions{
							ContentType:  contentType(e.Key.Format, e.Data),
							UserMetadata: map[string]string{metaStored: stamp, metaETag: etag},
							// Tiles are small: one request each, no multipart.
							DisableMultipart: true, SendContentMd5: false,
						})
					return err
				})
				if err == nil {
					s.countPut(e.Key.Layer, len(e.Data))
				}
				return err
			})
		})
	}
	return g.Wait()
}

// Transport faults of an idempotent request are tried again at once.
// minio-go's own retries (Options.MaxRetries) are left off: they also
// repeat HTTP answers (5xx, 429, SlowDown) and refused connections, with
// up to a second of backoff each, where the store's breaker must see the
// failure at once.
var (
	// transportRetries is how many times a request that met a transport
	// fault is sent again (within the call's own timeout).
	transportRetries = 2
	// transportRetryWait is the pause before each retry.
	transportRetryWait = 20 * time.Millisecond
)

// retryTransport runs one idempotent request (a PUT of a whole tile
// object: sent again, it writes the same object) and sends it again when
// it failed in the transport after the connection was made: a broken
// pipe, a connection reset or a connection closed before the answer, as
// when S3 or a load balancer closes a kept-alive connection the request
// went out on. Anything else, an HTTP error answer above all, is returned
// as it is. Without this a seed's metatile whose store met one such fault
// was rendered again by the upstream.
func (s *Store) retryTransport(ctx context.Context, op string, fn func() error) error {
	err := fn()
	for i := 0; i < transportRetries && err != nil && transportFault(err) && ctx.Err() == nil; i++ {
		s.log.Debug("S3 request met a transport fault; sending it again", zap.String("op", op), zap.Error(err))
		select {
		case <-ctx.Done():
			return err
		case <-time.After(transportRetryWait):
		}
		err = fn()
	}
	return err
}

// transportFault tells a request lost on its way (the connection broke
// after it was made) from an answer of S3 and from an endpoint that does
// not answer (refused, timed out, unknown host), which the breaker is
// for.
func transportFault(err error) bool {
	if minio.ToErrorResponse(err).StatusCode != 0 {
		return false // S3 answered
	}
	switch {
	case errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return true
	}
	// minio-go replaces an EOF of net/http by this message.
	msg := err.Error()
	return strings.Contains(msg, "Connection closed by foreign host") ||
		strings.Contains(msg, "server closed idle connection")
}

// contentType is a tile object's Content-Type: the one a hit answers
// (image/png for 8-bit PNG, the tile's own for the mixed formats).
func contentType(format string, tile []byte) string {
	if f, err := imaging.ParseFormat(format); err == nil {
		return f.ContentType(tile)
	}
	return "image/png"
}

// spawn runs fn in g once one of the store's request places is free; the
// caller waits for it, not a new goroutine.
func (s *Store) spawn(g *errgroup.Group, fn func() error) {
	s.requests <- struct{}{}
	g.Go(func() error {
		defer func() { <-s.requests }()
		return fn()
	})
}

// Has implements store.Tiles with a HEAD per key, in parallel.
func (s *Store) Has(keys []store.Key, notBefore time.Time) ([]bool, error) {
	out := make([]bool, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	gen, err := s.generation(keys[0].Layer)
	if err != nil {
		return nil, err
	}
	var g errgroup.Group
	g.SetLimit(s.cfg.Concurrency)
	for i := range keys {
		s.spawn(&g, func() error {
			k := &keys[i]
			kg := gen
			if k.Layer != keys[0].Layer {
				if kg, err = s.generation(k.Layer); err != nil {
					return err
				}
			}
			return s.call("head", func(ctx context.Context) error {
				info, err := s.client.StatObject(ctx, s.cfg.Bucket, s.tileKey(k, kg), minio.StatObjectOptions{})
				if isNotFound(err) {
					return nil
				}
				if err != nil {
					return err
				}
				out[i] = !tileOf(info, nil).StoredAt.Before(notBefore)
				return nil
			})
		})
	}
	return out, g.Wait()
}

// DeleteRange implements store.Tiles: it lists the level once and deletes
// the objects inside r in batches (one request per 1000 keys).
func (s *Store) DeleteRange(set store.Set, z int, r gridset.Range, stop func() bool) (int64, error) {
	gen, err := s.generation(set.Layer)
	if err != nil {
		return 0, err
	}
	if r.MaxX < r.MinX || r.MaxY < r.MinY {
		return 0, nil
	}
	zp := s.zoomPrefix(set, gen, z)
	var doomed []string
	err = s.call("list", func(ctx context.Context) error {
		// A level may take longer to list than one request's timeout.
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		for obj := range s.client.ListObjects(ctx, s.cfg.Bucket, minio.ListObjectsOptions{Prefix: zp, Recursive: true}) {
			if obj.Err != nil {
				return obj.Err
			}
			if stop != nil && stop() {
				return nil
			}
			x, y, ok := parseTail(strings.TrimPrefix(obj.Key, zp))
			if ok && x >= r.MinX && x <= r.MaxX && y >= r.MinY && y <= r.MaxY {
				doomed = append(doomed, obj.Key)
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	n, err := s.deleteKeys(doomed, stop)
	if n > 0 {
		s.countRemoval()
	}
	if err != nil {
		return n, err
	}
	// Copies of these tiles in local tiers (this node's and others') are
	// keyed by the layer's version: a new epoch hides them all.
	return n, s.newEpoch(set.Layer)
}

// deleteKeys removes the objects in batches and reports how many went.
func (s *Store) deleteKeys(keys []string, stop func() bool) (int64, error) {
	var n int64
	for len(keys) > 0 {
		if stop != nil && stop() {
			return n, nil
		}
		batch := keys[:min(len(keys), 1000)]
		keys = keys[len(batch):]
		err := s.call("delete", func(ctx context.Context) error {
			ch := make(chan minio.ObjectInfo, len(batch))
			for _, k := range batch {
				ch <- minio.ObjectInfo{Key: k}
			}
			close(ch)
			for e := range s.client.RemoveObjects(ctx, s.cfg.Bucket, ch, minio.RemoveObjectsOptions{}) {
				if e.Err != nil && !isNotFound(e.Err) {
					return e.Err
				}
			}
			return nil
		})
		if err != nil {
			return n, err
		}
		n += int64(len(batch))
	}
	return n, nil
}

// SetsOf implements store.Tiles: two levels of listing under the gridset.
func (s *Store) SetsOf(layer, gridsetName string) ([]store.Set, error) {
	gen, err := s.generation(layer)
	if err != nil {
		return nil, err
	}
	gp := s.gridsetPrefix(layer, gridsetName, gen)
	formats, err := s.children(gp)
	if err != nil {
		return nil, err
	}
	var out []store.Set
	for _, f := range formats {
		name, err := formatName(f)
		if err != nil {
			continue
		}
		params, err := s.children(gp + f + "/")
		if err != nil {
			return nil, err
		}
		for _, p := range params {
			out = append(out, store.Set{Layer: layer, Gridset: gridsetName, Format: name, Params: p})
		}
	}
	return out, nil
}

// children lists the "folders" right under prefix.
func (s *Store) children(prefix string) ([]string, error) {
	var out []string
	err := s.call("list", func(ctx context.Context) error {
		for obj := range s.client.ListObjects(ctx, s.cfg.Bucket, minio.ListObjectsOptions{Prefix: prefix}) {
			if obj.Err != nil {
				return obj.Err
			}
			if strings.HasSuffix(obj.Key, "/") {
				out = append(out, strings.TrimSuffix(strings.TrimPrefix(obj.Key, prefix), "/"))
			}
		}
		return nil
	})
	return out, err
}
