package tilecache

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/tilecache/caddy-tilecache/module/cluster"
	"github.com/tilecache/caddy-tilecache/module/gridset"
	"github.com/tilecache/caddy-tilecache/module/imaging"
	"github.com/tilecache/caddy-tilecache/module/quota"
	"github.com/tilecache/caddy-tilecache/module/quota/s3quota"
	"github.com/tilecache/caddy-tilecache/module/store"
	"github.com/tilecache/caddy-tilecache/module/store/s3store"
	"github.com/tilecache/caddy-tilecache/module/store/tiered"
)

// DefaultName is the name of a cache that is given none.
const DefaultName = "default"

// Cache is one named tile cache of a config: its compiled layers, its store
// and its fetch path. The tile_cache app owns it; tile_cache handlers serve
// its tiles and the seeder fills it. What must outlive a config reload (the
// upstream's slots, circuit breaker and fetches in flight) is shared by
// name with the next config's Cache of the same name (upstream.go); the
// store is shared by directory (package store).
type Cache struct {
	name string
	cfg  Config // as configured, defaults filled in

	layers  map[string]*Layer
	order   []*Layer           // configuration order
	grids   []*gridset.Gridset // every gridset a layer uses, first use first
	neutral []string

	store store.Store
	// evictor enforces the quota (nil without one), localEvictor the S3
	// local tier's max_size; each is shared per store directory across
	// reloads.
	evictor, localEvictor *quota.Evictor
	// s3quota is what the evictor sees of the bucket when the quota is
	// over S3 storage (nil otherwise), one per bucket and prefix.
	s3quota *s3quota.Adapter
	fetch   *fetcher
	// node is this process's member of the cache's cluster, or nil.
	node *cluster.Node
	log  *zap.Logger
	// failLog is log, sampled: a flood of failing misses must not flood
	// the log as well.
	failLog *zap.Logger
	// refs counts the Cache's users: the app that made it, and seeding
	// engines that keep working with it across a reload. The last
	// release gives back the store and the upstream.
	refs atomic.Int32
}

// compile checks a configuration and builds its layers and gridsets. It
// needs no I/O, so configuration errors come out before anything is opened.
func compile(name string, c Config) (*Cache, error) {
	c.setDefaults()
	if err := c.validate(); err != nil {
		return nil, err
	}
	grids := make(map[string]*gridset.Gridset)
	for _, n := range gridset.BuiltinNames() {
		grids[n], _ = gridset.Builtin(n)
	}
	for _, gc := range c.Gridsets {
		if _, dup := grids[gc.Name]; dup {
			return nil, fmt.Errorf("gridset %q defined twice (or shadows a built-in)", gc.Name)
		}
		g, err := gridset.New(gc)
		if err != nil {
			return nil, err
		}
		if err := checkIndexRange(g); err != nil {
			return nil, err
		}
		grids[gc.Name] = g
	}
	cache := &Cache{name: name, cfg: c, layers: make(map[string]*Layer, len(c.Layers))}
	for i := range c.Layers {
		lc := &c.Layers[i]
		if _, dup := cache.layers[lc.Name]; dup {
			return nil, fmt.Errorf("layer %q defined twice", lc.Name)
		}
		l, err := compileLayer(lc, grids, c.JPEGQuality)
		if err != nil {
			return nil, err
		}
		cache.layers[l.Name] = l
		cache.order = append(cache.order, l)
		for _, g := range l.Grids {
			if !slices.Contains(cache.grids, g.Gridset) {
				cache.grids = append(cache.grids, g.Gridset)
			}
		}
	}
	// A parameter a layer filters is part of its cache key and can never
	// be neutral: an explicit neutral_params entry that clashes is an
	// error, a default one simply yields to the filter.
	for _, n := range defaultNeutral {
		if cache.filteredBy(n) == "" {
			cache.neutral = append(cache.neutral, n)
		}
	}
	for _, n := range c.NeutralParams {
		if l := cache.filteredBy(n); l != "" {
			return nil, fmt.Errorf("neutral_params %s is a parameter filter of layer %q: remove one of them", n, l)
		}
		cache.neutral = append(cache.neutral, n)
	}
	return cache, nil
}

// neutral parameters change nothing about the image a tile request gets,
// whatever their value. TRANSPARENT is one of them as in GeoWebCache: a
// layer's tiles have its configured transparency, and clients send a
// value by habit (GDAL, OWSLib and Leaflet FALSE, OpenLayers TRUE).
var defaultNeutral = []string{"TILED", "TRANSPARENT", "EXCEPTIONS", "TILESORIGIN"}

// filteredBy names a layer that has a parameter filter for key, or "".
func (c *Cache) filteredBy(key string) string {
	for _, l := range c.order {
		if l.Params.Has(key) {
			return l.Name
		}
	}
	return ""
}

// checkIndexRange rejects gridsets the store's key layout cannot hold.
func checkIndexRange(g *gridset.Gridset) error {
	if len(g.Levels) > store.MaxZoom+1 {
		return fmt.Errorf("gridset %s: too many levels", g.Name)
	}
	for _, l := range g.Levels {
		if l.TilesWide > store.MaxIndex || l.TilesHigh > store.MaxIndex {
			return fmt.Errorf("gridset %s: level %s has too many tiles", g.Name, l.Name)
		}
	}
	return nil
}

// NewCache compiles and opens a cache outside any Caddy config, for tools
// and tests (the tile_cache app makes its own). Release it when done.
func NewCache(name string, cfg Config, log *zap.Logger) (*Cache, error) {
	c, err := compile(name, cfg)
	if err != nil {
		return nil, err
	}
	if err := c.open(log, nil, nil); err != nil {
		return nil, err
	}
	return c, nil
}

// open acquires what the compiled cache serves from: its store, its share
// of the upstream and, when clustered, its node of the cluster in
// storage (Caddy's). st may be given (tests); nil opens the configured
// Badger directory.
func (c *Cache) open(log *zap.Logger, st store.Store, storage certmagic.Storage) error {
	c.log = log
	c.failLog = log.WithOptions(zap.WrapCore(func(core zapcore.Core) zapcore.Core {
		return zapcore.NewSamplerWithOptions(core, 10*time.Second, 3, 0) // 3 per message per 10 s
	}))
	up, err := url.Parse(c.cfg.Upstream)
	if err != nil {
		return err // validate parsed it already
	}
	if st == nil {
		if st, err = c.openStore(log); err != nil {
			return err
		}
	}
	c.store = st
	clusterName := ""
	if cl := c.cfg.Cluster; cl != nil {
		name := cl.Name
		if name == "" {
			name = c.name
		}
		clusterName = name
		lease, poll := cl.Settings()
		if c.node, err = cluster.Acquire(storage, name, lease, poll, log.Named("cluster")); err != nil {
			st.Release()
			return err
		}
	}
	if c.cfg.S3 != nil && c.cfg.Quota != nil {
		if err := c.openS3Quota(st, storage, clusterName, log); err != nil {
			c.releaseNode()
			st.Release()
			return err
		}
	}
	failures, cooldown := c.cfg.breakerSettings()
	shared, err := acquireUpstream(c.name, upstreamSettings{
		url: c.cfg.Upstream, concurrency: c.cfg.UpstreamConcurrency,
		seedSlots: *c.cfg.SeedSlots, queue: c.cfg.UpstreamQueue,
		breakerFailures: failures, breakerCooldown: cooldown,
	}, log)
	if err != nil {
		c.releaseNode()
		st.Release()
		return err
	}
	c.fetch = newFetcher(fetcherConfig{
		name:        c.name,
		upstream:    up,
		concurrency: c.cfg.UpstreamConcurrency,
		timeout:     time.Duration(c.cfg.Timeout),
		store:       st,
		shared:      shared,
		node:        c.node,
		log:         c.failLog, // sampled: a store outage fails every miss
	})
	c.warmEncoders()
	c.refs.Store(1)
	return nil
}

// warmEncoders compiles the WebP encoder in the background when a layer
// has WebP tiles, so that the first tile does not wait about a second for
// it; a cache without WebP never pays it.
func (c *Cache) warmEncoders() {
	for _, l := range c.layers {
		for _, f := range l.Formats {
			if f.MIME == "image/webp" {
				go func() {
					if err := imaging.WarmWebP(); err != nil {
						c.log.Error("the WebP encoder did not compile: WebP tiles will fail", zap.Error(err))
					}
				}()
				return
			}
		}
	}
}

// openStore opens the configured storage: the Badger directory, or an S3
// bucket with the directory keeping tasks (and the local tier).
func (c *Cache) openStore(log *zap.Logger) (store.Store, error) {
	if c.cfg.S3 == nil {
		q := c.cfg.Quota
		usage := c.cfg.Usage || q != nil
		opts := store.Options{Usage: usage}
		if q != nil {
			opts.ValueLogFileSize = quota.ValueLogFileSize(q.MaxSize)
		}
		st, err := store.Open(c.cfg.Storage, opts)
		if err != nil {
			return nil, err
		}
		// On a reload the store is open already, with the old config's
		// settings.
		if err := st.SetUsage(usage); err != nil {
			st.Release()
			return nil, err
		}
		if err := st.SetTracking(q != nil); err != nil {
			st.Release()
			return nil, err
		}
		if q != nil {
			if c.evictor, err = quota.Acquire(st, q, log.Named("quota")); err != nil {
				st.Release()
				return nil, err
			}
		}
		return st, nil
	}
	sc := c.cfg.S3.Config
	// Credentials come as placeholders ({env.AWS_SECRET_ACCESS_KEY}), so
	// that they stay out of the config Caddy saves and logs.
	repl := caddy.NewReplacer()
	for _, f := range []*string{&sc.Bucket, &sc.Prefix, &sc.Endpoint, &sc.Region, &sc.AccessKey, &sc.SecretKey, &sc.SessionToken} {
		*f = repl.ReplaceKnown(*f, "")
	}
	var opts store.Options
	var to tiered.Options
	var bound *quota.Config
	if l := c.cfg.S3.Local; l != nil {
		// The local tier keeps its max_size as a quota of its own: usage
		// counted with its tiles (recounted every ttl, as copies expire),
		// the coldest pages evicted (package quota).
		bound = &quota.Config{MaxSize: l.MaxSize}
		if err := bound.Validate(); err != nil {
			return nil, err
		}
		opts = store.Options{TileTTL: time.Duration(l.TTL), Usage: true, ValueLogFileSize: quota.ValueLogFileSize(l.MaxSize)}
		to = tiered.Options{Hot: true}
	}
	local, err := store.Open(c.cfg.Storage, opts)
	if err != nil {
		return nil, err
	}
	if err := local.SetUsage(bound != nil); err != nil {
		local.Release()
		return nil, err
	}
	if err := local.SetTracking(bound != nil); err != nil {
		local.Release()
		return nil, err
	}
	if bound != nil {
		if c.localEvictor, err = quota.Acquire(local, bound, log.Named("local_tier")); err != nil {
			local.Release()
			return nil, err
		}
	}
	remote, err := s3store.Open(sc, log.Named("s3"))
	if err != nil {
		c.releaseEvictors()
		local.Release()
		return nil, err
	}
	return tiered.New(remote, local, to, log.Named("tiers")), nil
}

// openS3Quota puts the quota on the bucket (package quota/s3quota): one
// adapter and one evictor per bucket and prefix in the process, shared
// across reloads; a clustered cache shares usage, hits and the evict lock
// with the other nodes under tile_cache/<cluster>/quota in Caddy's storage.
func (c *Cache) openS3Quota(st store.Store, storage certmagic.Storage, clusterName string, log *zap.Logger) error {
	ts, ok := st.(*tiered.Store)
	if !ok {
		return nil // a test's store
	}
	remote, ok := ts.Remote().(*s3store.Store)
	if !ok {
		return nil
	}
	var shared *s3quota.Shared
	if c.node != nil && storage != nil {
		shared = &s3quota.Shared{St: storage, Prefix: "tile_cache/" + clusterName + "/quota", ID: c.node.ID}
	}
	a, err := s3quota.Acquire(remote, ts, shared, log.Named("quota"))
	if err != nil {
		return err
	}
	ev, err := quota.Acquire(a, c.cfg.Quota, log.Named("quota"))
	if err != nil {
		a.Release()
		return err
	}
	a.SetConfig(ev.Config)
	c.evictor, c.s3quota = ev, a
	return nil
}

// releaseEvictors gives back the quota's and the local tier's evictors.
func (c *Cache) releaseEvictors() {
	for _, e := range []**quota.Evictor{&c.evictor, &c.localEvictor} {
		if *e != nil {
			if err := (*e).Release(); err != nil {
				c.log.Warn("stopping an evictor", zap.Error(err))
			}
			*e = nil
		}
	}
	if c.s3quota != nil {
		if err := c.s3quota.Release(); err != nil {
			c.log.Warn("stopping the S3 quota", zap.Error(err))
		}
		c.s3quota = nil
	}
}

// Retain adds a user; each Retain is paired with one Release.
func (c *Cache) Retain() { c.refs.Add(1) }

// Release gives back one use; the last gives back the store and the
// upstream share, and closes the upstream connections left idle.
func (c *Cache) Release() error {
	if c.refs.Add(-1) != 0 || c.store == nil {
		return nil
	}
	c.fetch.close()
	c.releaseNode()
	c.releaseEvictors()
	return c.store.Release()
}

func (c *Cache) releaseNode() {
	if c.node != nil {
		if err := c.node.Release(); err != nil {
			c.log.Warn("leaving the cluster", zap.Error(err))
		}
	}
}

// Quota is the evictor enforcing the cache's quota, or nil without one.
func (c *Cache) Quota() *quota.Evictor { return c.evictor }

// S3Quota is what the quota knows of the bucket when it is over S3
// storage (its usage for rest/usage.json), or nil.
func (c *Cache) S3Quota() *s3quota.Adapter { return c.s3quota }

// Cluster is this process's node of the cache's cluster, or nil when the
// cache is not clustered.
func (c *Cache) Cluster() *cluster.Node { return c.node }

// Name is the cache's name.
func (c *Cache) Name() string { return c.name }

// Layer returns the configured layer named name.
func (c *Cache) Layer(name string) (*Layer, bool) {
	l, ok := c.layers[name]
	return l, ok
}

// Layers lists the configured layers in configuration order.
func (c *Cache) Layers() []*Layer { return c.order }

// LayerNames lists the configured layers, sorted.
func (c *Cache) LayerNames() []string {
	names := make([]string, 0, len(c.order))
	for _, l := range c.order {
		names = append(names, l.Name)
	}
	slices.Sort(names)
	return names
}

// Store is the cache's tile store.
func (c *Cache) Store() store.Store { return c.store }

// Fetch fetches, slices and stores one metatile through the single flight
// and upstream limit every visitor's miss goes through. fetched, if not
// nil, is called as soon as the upstream has answered, while decoding,
// slicing, encoding and storing go on: a seeder uses it to put its next
// request on the wire meanwhile.
func (c *Cache) Fetch(ctx context.Context, m *MetaRequest, p Priority, fetched func()) (*MetaResult, error) {
	return c.fetch.fetch(ctx, m, p, fetched)
}

// UpstreamReady waits while the upstream is considered down (the circuit
// breaker is open and no probe is due, or the probe is on its way), and
// returns nil as soon as a fetch would be let through, or ctx's error. A
// seeder that got an ErrBreakerOpen waits here before trying again.
func (c *Cache) UpstreamReady(ctx context.Context) error {
	return c.fetch.shared.breaker.ready(ctx)
}

// same reports whether two configurations describe the same cache, so two
// handlers may name one cache without one silently taking over the other.
func sameConfig(a, b *Config) bool { return configJSON(a) == configJSON(b) }
