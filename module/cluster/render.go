package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"go.uber.org/zap"
)

// Render markers make one render per metatile across the cluster the
// usual case, not a guarantee: a node about to ask the upstream for a
// metatile first looks for another node's marker on it, and waits for
// that render instead (then reads the tiles from the shared store); if
// there is none, it writes its own for as long as it renders. Two nodes
// that look in the same instant both render (the check and the write are
// two calls), and a node that cannot reach the storage renders without
// looking. Seeding needs none of this to render each metatile once: its
// work units never overlap.

// marker is a render marker's record.
type marker struct {
	Node string `json:"node"`
	// Until is when the render gives up (the writer's clock, Unix ms):
	// a waiter stops waiting then, whatever the marker says.
	Until int64 `json:"until"`
}

// MarkerKey names a metatile's marker: a hash, since layer names and
// parameter values may hold anything.
func MarkerKey(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return "render/" + hex.EncodeToString(h.Sum(nil)[:16])
}

// RenderingElsewhere reports whether a live node other than this one has
// marked key, and until when (this node's clock) its render may last.
// A storage failure counts as no marker: rendering again is the safe side.
func (n *Node) RenderingElsewhere(key string) (bool, time.Time) {
	if n.Err() != nil {
		return false, time.Time{} // the storage is down: a miss must not wait on it
	}
	start := time.Now()
	defer observe("marker_check", start)
	b, err := n.Load(key)
	if err != nil {
		if !IsNotExist(err) {
			n.quiet.Warn("render marker unreadable: rendering without looking", zap.Error(err))
		}
		return false, time.Time{}
	}
	var m marker
	if json.Unmarshal(b, &m) != nil || m.Node == n.ID {
		return false, time.Time{}
	}
	until := time.UnixMilli(m.Until)
	if !n.Alive(m.Node) || !time.Now().Before(until) {
		// Left by a node that died rendering: nobody removes it but a
		// reader. Deleting a live render's marker would only let one
		// more node render.
		n.Delete(key)
		return false, time.Time{}
	}
	return true, until
}

// WaitRender waits until the marker on key is gone, its node dead or its
// time up, or ctx ends; polling, since storages have no notifications.
func (n *Node) WaitRender(ctx context.Context, key string, until time.Time) {
	t := time.NewTicker(25 * time.Millisecond)
	defer t.Stop()
	stop := time.NewTimer(time.Until(until))
	defer stop.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-stop.C:
			return
		case <-t.C:
		}
		if busy, _ := n.RenderingElsewhere(key); !busy {
			return
		}
	}
}

// MarkRender writes this node's marker on key for at most d and returns
// the function that removes it once the render is stored (or failed).
// The write goes on beside the render rather than before it: the
// upstream's answer takes far longer than a storage write, and the
// render need not wait for the storage's fsync.
func (n *Node) MarkRender(key string, d time.Duration) (done func()) {
	if n.Err() != nil {
		return func() {}
	}
	written := make(chan bool, 1)
	go func() {
		start := time.Now()
		b, _ := json.Marshal(marker{Node: n.ID, Until: time.Now().Add(d).UnixMilli()})
		err := n.Store(key, b)
		observe("marker_write", start)
		if err != nil {
			n.quiet.Warn("render marker not written: rendering unannounced", zap.Error(err))
		}
		written <- err == nil
	}()
	return func() {
		go func() {
			if !<-written {
				return
			}
			start := time.Now()
			if err := n.Delete(key); err != nil {
				n.quiet.Warn("render marker not removed: it expires by itself", zap.Error(err))
			}
			observe("marker_delete", start)
		}()
	}
}
