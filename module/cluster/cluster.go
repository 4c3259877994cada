// Package cluster lets several Caddy nodes act as one tile cache. What
// they share goes through Caddy's configured storage (a
// certmagic.Storage: file_system on a shared volume, Redis, Consul, S3,
// Postgres…), the mechanism Caddy itself uses to run as a cluster: no
// coordination server of the plugin's own.
//
// A Node is this process's member of one cluster. It writes a heartbeat,
// watches the others' heartbeats (a node silent for the lease is dead and
// its claims void), and offers the storage under the cluster's own prefix
// with timings and errors that say where they come from.
//
// What a node concludes about the others rests on what it saw stored,
// never on what it failed to see: a listing or a read that fails, or that
// raced another node's write, leaves every judgment as it was. A node is
// dead when its heartbeat has not changed for the lease by this node's
// clock, or when its own record says it left; a heartbeat missing from a
// listing is a heartbeat that did not change, nothing more. Death is a
// judgment that the next beat revises. Package seeder
// keeps its task registry and work units with it; the tile fetch path
// marks the metatiles it renders (render.go).
package cluster

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Config is the cluster option of a tile_cache.
type Config struct {
	// Name is the cluster's area in the shared storage
	// (tile_cache/<name>/…). Every node of one cache names the same.
	// Default: the cache's name.
	Name string `json:"name,omitempty"`
	// Lease is how long a node may be silent (no heartbeat seen to change)
	// before the others take over the work it had claimed. Default 10s.
	Lease caddy.Duration `json:"lease,omitempty"`
	// Poll is how often a node reads the shared task registry: the delay
	// before it joins a task submitted elsewhere, or stops one killed
	// elsewhere. Default 1s.
	Poll caddy.Duration `json:"poll,omitempty"`
}

// Defaults of Config.
const (
	DefaultLease = 10 * time.Second
	DefaultPoll  = time.Second
)

// Validate checks the settings; zero values take the defaults.
func (c *Config) Validate() error {
	if c.Name != "" && (strings.ContainsAny(c.Name, "/\\") || c.Name == "." || c.Name == "..") {
		return fmt.Errorf("cluster name %q must not contain a slash", c.Name)
	}
	if c.Lease < 0 || c.Poll < 0 {
		return errors.New("cluster lease and poll must not be negative")
	}
	lease, poll := c.Settings()
	if lease < time.Second {
		return fmt.Errorf("cluster lease %v is below 1s: a busy node would be declared dead", lease)
	}
	if poll >= lease {
		return fmt.Errorf("cluster poll %v must be shorter than the lease %v", poll, lease)
	}
	return nil
}

// Settings returns the lease and poll interval with defaults applied.
func (c *Config) Settings() (lease, poll time.Duration) {
	lease, poll = time.Duration(c.Lease), time.Duration(c.Poll)
	if lease == 0 {
		lease = DefaultLease
	}
	if poll == 0 {
		poll = min(DefaultPoll, lease/2)
	}
	return lease, poll
}

// ErrStorage wraps every failure of the shared storage, so that callers
// (the REST interface above all) can tell it from other errors.
var ErrStorage = errors.New("cluster storage unavailable")

// storageErr names the key (relative to the cluster's area) and what went
// wrong, never where the storage keeps it: the message reaches REST
// clients (503), and a server's file system paths are not theirs to see.
func (n *Node) storageErr(op, key string, err error) error {
	return fmt.Errorf("%w: %s %s: %s", ErrStorage, op, key, n.reason(err))
}

// reason is err without the storage's own names for keys: the operation
// and the cause of a file system error, and for the file_system storage
// its root cut from messages that carry a path in their text.
func (n *Node) reason(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Op + ": " + pe.Err.Error()
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Op + ": " + le.Err.Error()
	}
	msg := err.Error()
	if fst, ok := n.st.(*certmagic.FileStorage); ok && fst.Path != "" {
		msg = strings.ReplaceAll(msg, filepath.Clean(fst.Path)+string(filepath.Separator), "")
	}
	return msg
}

// IsNotExist reports whether err says a key is not stored. Storages say
// so with fs.ErrNotExist (certmagic's contract).
func IsNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

// Node is this process's member of a cluster. One per cluster area and
// storage, shared by the configs that use it through a caddy.UsagePool:
// a reload keeps the node's identity, so the work it has claimed stays its.
type Node struct {
	// ID names the node in the cluster: host name and a random suffix
	// drawn per process, so that a restarted node is a new one and its
	// predecessor's claims are taken over, not mistaken for its own.
	ID     string
	prefix string
	st     certmagic.Storage
	log    *zap.Logger
	// quiet is log, sampled: an outage of the storage fails every call.
	quiet  *zap.Logger
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	// keyInPool is the node's key in the usage pool, for Release.
	keyInPool string

	mu    sync.Mutex
	lease time.Duration
	poll  time.Duration
	beat  int64
	peers map[string]peer
	// waiting is, for each lock this node waits for without getting it,
	// when it began to wait and the lock's break mark then (breakStuck).
	waiting map[string]lockWaitState
	// healthy is false while this node's own heartbeat cannot be written
	// or the others' read: it then judges nobody dead.
	healthy bool
	lastErr string
	// lastRead is when the heartbeats were last read. A node is judged by
	// what that read saw, not by the time now: a node that was itself
	// stalled (a starved process, a slow disk) must not judge the others
	// dead for its own silence.
	lastRead time.Time
}

// peer is what this node last saw of another's heartbeat, by its own
// clock: liveness never compares two machines' clocks.
type peer struct {
	beat    int64
	changed time.Time
	// left: the newest record seen says the node left the cluster.
	left bool
}

// heartbeat is a node's record under nodes/.
type heartbeat struct {
	// ID is the node's own: a record whose key is not its ID is a
	// storage's temporary copy caught mid-write (certmagic's file_system
	// storage writes a file of another name, then renames it), not a node.
	ID      string    `json:"id,omitempty"`
	Beat    int64     `json:"beat"`
	Host    string    `json:"host"`
	PID     int       `json:"pid"`
	Started time.Time `json:"started"`
	// Left is written by a node that leaves cleanly, as its last beat:
	// the others count it dead at once instead of after the lease.
	Left bool `json:"left,omitempty"`
}

var nodes = caddy.NewUsagePool()

// Acquire returns this process's node of the cluster area name in st,
// joining the cluster on first use, with the newest settings. Pair with
// Release.
func Acquire(st certmagic.Storage, name string, lease, poll time.Duration, log *zap.Logger) (*Node, error) {
	if st == nil {
		return nil, errors.New("cluster: no storage (Caddy's storage is not configured)")
	}
	prefix := "tile_cache/" + name
	key := fmt.Sprintf("%v|%s", st, prefix)
	v, _, err := nodes.LoadOrNew(key, func() (caddy.Destructor, error) {
		n := Join(st, name, lease, poll, log)
		n.keyInPool = key
		return n, nil
	})
	if err != nil {
		return nil, err
	}
	n := v.(*Node)
	n.SetSettings(lease, poll)
	return n, nil
}

// SetSettings changes the lease and poll interval (the newest config's).
func (n *Node) SetSettings(lease, poll time.Duration) {
	n.mu.Lock()
	n.lease, n.poll = lease, poll
	n.mu.Unlock()
}

// Join makes a node of the cluster area name in st outside the usage
// pool: every call is a node of its own (tests run several in one
// process). Destruct leaves.
func Join(st certmagic.Storage, name string, lease, poll time.Duration, log *zap.Logger) *Node {
	prefix := "tile_cache/" + name
	host, _ := os.Hostname()
	if host == "" {
		host = "node"
	}
	suffix := make([]byte, 4)
	crand.Read(suffix)
	ctx, cancel := context.WithCancel(context.Background())
	n := &Node{
		ID:     host + "-" + hex.EncodeToString(suffix),
		prefix: prefix, st: st, ctx: ctx, cancel: cancel, done: make(chan struct{}),
		peers: map[string]peer{}, waiting: map[string]lockWaitState{}, lease: lease, poll: poll,
	}
	n.log = log.With(zap.String("node", n.ID), zap.String("cluster", prefix))
	n.quiet = n.log.WithOptions(zap.WrapCore(func(core zapcore.Core) zapcore.Core {
		return zapcore.NewSamplerWithOptions(core, 10*time.Second, 2, 0)
	}))
	n.writeBeat() // known to the others before it claims anything
	go n.heartbeatLoop()
	n.log.Info("joined the cluster")
	return n
}

// Release gives back one use of the node; the last leaves the cluster.
func (n *Node) Release() error {
	_, err := nodes.Delete(n.keyInPool)
	return err
}

// Destruct leaves the cluster: the heartbeat stops with a last one that
// says so, so the others need not wait out the lease for work this node
// still held (the seeder gives its claims back before). The record stays
// (a record's absence proves nothing: see readPeers) until a node forgets
// it with the long-dead ones.
func (n *Node) Destruct() error {
	n.cancel()
	<-n.done
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n.mu.Lock()
	n.beat++
	hb := heartbeat{ID: n.ID, Beat: n.beat, PID: os.Getpid(), Left: true}
	n.mu.Unlock()
	hb.Host, _ = os.Hostname()
	b, _ := json.Marshal(hb)
	err := n.st.Store(ctx, n.key("nodes/"+n.ID), b)
	n.log.Info("left the cluster")
	return err
}

// Settings are the lease and poll interval in force.
func (n *Node) Settings() (lease, poll time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.lease, n.poll
}

func (n *Node) key(k string) string { return path.Join(n.prefix, k) }

// heartbeatLoop writes the node's heartbeat and reads the others' four
// times per lease.
func (n *Node) heartbeatLoop() {
	defer close(n.done)
	for {
		lease, _ := n.Settings()
		select {
		case <-n.ctx.Done():
			return
		case <-time.After(lease / 4):
		}
		n.writeBeat()
	}
}

func (n *Node) writeBeat() {
	start := time.Now()
	n.mu.Lock()
	n.beat++
	hb := heartbeat{ID: n.ID, Beat: n.beat, PID: os.Getpid()}
	n.mu.Unlock()
	hb.Host, _ = os.Hostname()
	b, _ := json.Marshal(hb)
	err := n.Store("nodes/"+n.ID, b)
	if err == nil {
		err = n.readPeers()
	}
	observe("beat", start)
	n.mu.Lock()
	defer n.mu.Unlock()
	if err != nil {
		if n.healthy || n.lastErr == "" {
			n.log.Warn("cluster heartbeat failed: this node judges no other node dead until the storage answers again", zap.Error(err))
		}
		n.healthy, n.lastErr = false, err.Error()
		return
	}
	if !n.healthy {
		// Back after an outage: nobody could be seen beating meanwhile,
		// so every node's silence is counted from now.
		now := time.Now()
		for id, p := range n.peers {
			p.changed = now
			n.peers[id] = p
		}
		if n.lastErr != "" {
			n.log.Info("cluster storage answers again")
		}
	}
	n.healthy, n.lastErr = true, ""
}

// readPeers loads every node's heartbeat and notes whose changed. Only
// what it read counts: a node whose record it did not find (not listed,
// gone between the listing and the read, unreadable) is a node whose
// heartbeat it did not see change, and is judged by the lease like one
// that stopped beating. A listing can miss a record that is there (a
// storage that walks a directory while another node renames its
// temporary file into place), and a record can be gone for a while (the
// storage wiped, or forgotten by a node that wrongly thought it long
// dead): neither may make a live node dead.
func (n *Node) readPeers() error {
	keys, err := n.List("nodes")
	if err != nil {
		return err
	}
	now := time.Now()
	seen := make(map[string]heartbeat, len(keys))
	for _, k := range keys {
		b, err := n.Load(k)
		if IsNotExist(err) {
			continue // a temporary file renamed meanwhile, or a record forgotten
		}
		if err != nil {
			return err
		}
		var hb heartbeat
		if json.Unmarshal(b, &hb) != nil {
			continue
		}
		id := path.Base(k)
		if hb.ID != "" && hb.ID != id {
			continue // another node's record caught before its rename
		}
		seen[id] = hb
	}
	n.mu.Lock()
	var forget []string
	for id, hb := range seen {
		p, ok := n.peers[id]
		switch {
		case !ok || p.beat != hb.Beat:
			if ok && !p.left && n.lastRead.Sub(p.changed) >= n.lease {
				n.log.Info("a node judged dead beats again: alive", zap.String("peer", id),
					zap.Duration("silent", now.Sub(p.changed)))
			}
			n.peers[id] = peer{beat: hb.Beat, changed: now, left: hb.Left}
		case n.healthy && now.Sub(p.changed) > forgetAfter*n.lease:
			forget = append(forget, id) // long dead (killed, never back): its record goes
		}
	}
	for id, p := range n.peers {
		if _, ok := seen[id]; !ok && now.Sub(p.changed) > forgetAfter*n.lease {
			delete(n.peers, id) // long dead and its record forgotten: only memory
		}
	}
	n.lastRead = now
	n.mu.Unlock()
	for _, id := range forget {
		if err := n.Delete("nodes/" + id); err == nil {
			n.log.Info("forgot a node silent for long", zap.String("dead", id))
		}
	}
	return nil
}

// forgetAfter × the lease is how long a dead node's heartbeat record stays:
// long enough that every claim has long since taken over its work.
const forgetAfter = 30

// Alive reports whether node id counts as alive: this node itself, and
// any node whose heartbeat this node's last read of the heartbeats had
// seen change within the lease before (see lastRead), unless that
// heartbeat said the node left. While this node cannot read the storage,
// everybody counts as alive. A node not heard of yet (it joined since
// this node last read the heartbeats, or it held a work unit long ago)
// counts as alive from now until the lease runs out without a beat.
func (n *Node) Alive(id string) bool {
	if id == n.ID {
		return true
	}
	if id == "" {
		return false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	p, ok := n.peers[id]
	if !ok {
		n.peers[id] = peer{beat: -1, changed: time.Now()}
		return true
	}
	if p.left {
		return false
	}
	return !n.healthy || n.lastRead.Sub(p.changed) < n.lease
}

// Err is the last storage failure of the heartbeat, or nil while it works.
func (n *Node) Err() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.lastErr == "" {
		return nil
	}
	return errors.New(n.lastErr)
}

// Peers lists the nodes this one counts as alive, itself included.
func (n *Node) Peers() []string {
	n.mu.Lock()
	ids := make([]string, 0, len(n.peers)+1)
	for id := range n.peers {
		ids = append(ids, id)
	}
	n.mu.Unlock()
	out := []string{n.ID}
	for _, id := range ids {
		if id != n.ID && n.Alive(id) {
			out = append(out, id)
		}
	}
	return out
}

// opTimeout bounds one storage call: a hung storage must not hang a
// worker or a REST request for ever.
const opTimeout = 10 * time.Second

func (n *Node) opCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(n.ctx, opTimeout)
}

// Load reads key (relative to the cluster's area). A key that is not
// stored is an error satisfying IsNotExist, not an ErrStorage.
func (n *Node) Load(key string) ([]byte, error) {
	ctx, cancel := n.opCtx()
	defer cancel()
	full := key
	if !strings.HasPrefix(key, n.prefix+"/") {
		full = n.key(key)
	}
	b, err := n.st.Load(ctx, full)
	if err != nil && !IsNotExist(err) {
		return nil, n.storageErr("reading", key, err)
	}
	return b, err
}

// Store writes key.
func (n *Node) Store(key string, value []byte) error {
	ctx, cancel := n.opCtx()
	defer cancel()
	if err := n.st.Store(ctx, n.key(key), value); err != nil {
		return n.storageErr("writing", key, err)
	}
	return nil
}

// Delete removes key and, for a prefix, every key under it.
func (n *Node) Delete(key string) error {
	ctx, cancel := n.opCtx()
	defer cancel()
	if err := n.st.Delete(ctx, n.key(key)); err != nil && !IsNotExist(err) {
		return n.storageErr("deleting", key, err)
	}
	return nil
}

// List returns the full keys directly under prefix; none when nothing
// is stored there. A not-exist error of the storage's List is not taken
// for "nothing": certmagic's file_system storage walks the directory and
// fails with one when a file it has listed is gone before it looks at it,
// which another node's write does (a temporary file renamed into place)
// and a deletion does. Only a prefix that is itself absent means nothing
// is stored; a listing that raced is done again, and one that races
// listRetries times in a row is an ErrStorage like any failure, which the
// callers read as "unknown".
func (n *Node) List(prefix string) ([]string, error) {
	ctx, cancel := n.opCtx()
	defer cancel()
	full := n.key(prefix)
	for try := 1; ; try++ {
		keys, err := n.st.List(ctx, full, false)
		if err == nil {
			return keys, nil
		}
		if !IsNotExist(err) {
			return nil, n.storageErr("listing", prefix, err)
		}
		if _, serr := n.st.Stat(ctx, full); IsNotExist(serr) {
			return nil, nil // nothing was ever stored there
		} else if serr != nil {
			return nil, n.storageErr("listing", prefix, serr)
		}
		observeRace()
		if try == listRetries {
			return nil, n.storageErr("listing", prefix, fmt.Errorf("keys went while listed, %d times in a row (last: %s)", try, n.reason(err)))
		}
		select {
		case <-ctx.Done():
			return nil, n.storageErr("listing", prefix, ctx.Err())
		case <-time.After(time.Duration(rand.Int64N(int64(listPause)))):
		}
	}
}

// listRetries bounds the listings of one List that may race other nodes'
// writes; listPause is the longest random pause between two.
const (
	listRetries = 8
	listPause   = 5 * time.Millisecond
)

// lock takes the storage's lock full. A storage's Lock blocks until the
// lock is free, polling as it likes: certmagic's file_system storage
// looks once a second, which made nodes that met at a task's lock wait a
// second for a lock held a few milliseconds. So each Lock call here may
// wait lockTry only, and the next one comes after a short random pause:
// waiting nodes look every ~lockTry instead, spread apart.
func (n *Node) lock(full string) error {
	deadline := time.Now().Add(lockWait)
	for {
		ctx, cancel := context.WithTimeout(n.ctx, lockTry)
		err := n.st.Lock(ctx, full)
		cancel()
		if err == nil {
			n.mu.Lock()
			delete(n.waiting, full)
			n.mu.Unlock()
			return nil
		}
		if !errors.Is(err, context.DeadlineExceeded) || n.ctx.Err() != nil {
			return err
		}
		if time.Now().After(deadline) {
			if n.breakStuck(full) {
				deadline = time.Now().Add(lockWait)
				continue
			}
			return fmt.Errorf("held by another node for over %v", lockWait)
		}
		time.Sleep(time.Duration(rand.Int64N(int64(lockTry / 2))))
	}
}

// lockWaitState is how long a node has waited for one lock, and which
// break of it (a mark in the storage) it saw when it began.
type lockWaitState struct {
	since time.Time
	mark  string
}

// breakStuck gives back a lock this node has waited for, across calls,
// for longer than lockBreakAfter: no holder keeps one of the cluster's
// locks that long (each critical section is a few storage calls, each
// bounded by opTimeout), so its holder is gone and the storage has not
// noticed. That happens with certmagic's file_system storage: the
// goroutine that keeps a lock file fresh only checks that the file
// exists, so one left over from an earlier holder of the same name
// (released less than 5 s before) keeps a new holder's lock fresh for
// ever once that holder dies (found by kill -9 in the cluster tests).
// It reports whether it broke the lock.
//
// Several nodes wait for a dead holder's lock alike, and the first to
// break it takes it at once: a second breaker would delete that live
// lock (a loaded run: two nodes broke a task lock 32 ms apart, ran the
// same critical section together and took over the same work units). So
// breaks go one at a time, under a lock of their own, and each leaves a
// mark in the storage; a node breaks only if the mark is still the one
// it saw when it began to wait, and otherwise waits afresh.
func (n *Node) breakStuck(full string) bool {
	n.mu.Lock()
	w, ok := n.waiting[full]
	n.mu.Unlock()
	if !ok {
		w = lockWaitState{since: time.Now(), mark: n.breakMark(full)}
		n.mu.Lock()
		n.waiting[full] = w
		n.mu.Unlock()
	}
	if !ok || time.Since(w.since) < lockBreakAfter {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	guard := full + ".break"
	if err := n.st.Lock(ctx, guard); err != nil {
		return false // another node is breaking it, or the storage is down
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		n.st.Unlock(ctx, guard)
	}()
	if cur := n.breakMark(full); cur != w.mark {
		// Broken by another node since this one began to wait: whoever
		// holds it now is alive.
		n.mu.Lock()
		n.waiting[full] = lockWaitState{since: time.Now(), mark: cur}
		n.mu.Unlock()
		return false
	}
	mark := n.ID + "/" + strconv.FormatInt(time.Now().UnixNano(), 10)
	if err := n.st.Store(ctx, n.breakMarkKey(full), []byte(mark)); err != nil {
		return false
	}
	err := n.st.Unlock(ctx, full)
	n.log.Warn("broke a cluster lock held for too long: its holder is gone", zap.String("lock", full),
		zap.Duration("waited", time.Since(w.since)), zap.Error(err))
	n.mu.Lock()
	delete(n.waiting, full)
	n.mu.Unlock()
	return err == nil
}

// breakMarkKey is where the last break of the lock full is marked, apart
// from the keys that are listed (tasks, units, heartbeats).
func (n *Node) breakMarkKey(full string) string {
	return path.Join(n.prefix, "lockbreaks", strings.TrimPrefix(full, n.prefix))
}

// breakMark is the lock's last break mark ("" if never broken, or when
// the storage does not answer: the break then waits for the next try).
func (n *Node) breakMark(full string) string {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	b, err := n.st.Load(ctx, n.breakMarkKey(full))
	if err != nil {
		return ""
	}
	return string(b)
}

// lockWait is how long one lock call waits for a held lock, and
// lockBreakAfter how long a lock may be waited for, over several calls,
// before it is broken (variables for tests).
var (
	lockWait       = opTimeout
	lockBreakAfter = 3 * opTimeout
)

// lockTry is how long one Lock call may wait for a held lock.
const lockTry = 50 * time.Millisecond

// unlock gives a lock back. One that cannot be given back (the storage
// failed just then) is tried again until it can: certmagic's file_system
// storage keeps a lock it created fresh for as long as the file exists,
// so a lock left behind by an outage would otherwise never go stale.
func (n *Node) unlock(name, full string) {
	try := func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		err := n.st.Unlock(ctx, full)
		return err == nil || IsNotExist(err)
	}
	if try() {
		return
	}
	n.quiet.Warn("unlocking failed: trying again until the storage answers", zap.String("lock", name))
	go func() {
		for i := 0; i < int(unlockRetries/time.Second); i++ {
			time.Sleep(time.Second)
			if try() {
				n.log.Info("lock given back after a storage failure", zap.String("lock", name))
				return
			}
		}
		n.log.Error("lock not given back: it blocks others until the storage declares it stale", zap.String("lock", name))
	}()
}

// unlockRetries bounds how long a lock's release is retried.
const unlockRetries = 10 * time.Minute

// Locked runs fn holding the cluster-wide lock name. The lock is the
// storage's (certmagic.Locker): a node that dies holding it leaves it
// until the storage declares it stale (file_system: about 10 s), so fn
// must be short. A lock that could not be given back is released as soon
// as the storage answers again (unlock).
func (n *Node) Locked(name string, fn func() error) error {
	start := time.Now()
	full := n.key(name)
	if err := n.lock(full); err != nil {
		return n.storageErr("locking", name, err)
	}
	defer n.unlock(name, full)
	observe("lock_wait", start)
	return fn()
}
