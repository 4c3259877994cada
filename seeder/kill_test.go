package seeder

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/tilecache/caddy-tilecache/module/tilecache"
)

// heldUpstream holds every GetMap: each one is announced on arrived and
// answered (not with an image) only when the test sends on release (or
// its client gives up), so that a seed's worker has a metatile in hand
// when the test kills its task. A killed task's worker leaves the fetch at
// once, but the fetch stays on the wire for whoever else asks for the
// metatile: release ends it.
func heldUpstream(t *testing.T) (srv *httptest.Server, arrived, release chan struct{}) {
	arrived, release = make(chan struct{}, 64), make(chan struct{}, 64)
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-release:
			// Not an image, but not unavailability either (that would
			// open the upstream's breaker and hold the next rounds back).
			http.Error(w, "held, then let go", http.StatusOK)
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() }) // every GetMap still held is let go
	return srv, arrived, release
}

// openKillFixture opens a cache on dir and an engine attached to it. The
// returned stop lets both go, once: the test may call it to restart on the
// same store, and a cleanup calls it in any case, so that a failure part
// way through does not leave the store open for the package's later tests.
func openKillFixture(t *testing.T, name, upstream, dir string) (e *Engine, c *tilecache.Cache, stop func() error) {
	t.Helper()
	c, err := tilecache.NewCache(name, tilecache.Config{
		Upstream: upstream + "/wms",
		Storage:  dir,
		Timeout:  caddy.Duration(time.Hour), // the kill, not the timeout, ends a held GetMap
		Layers:   []tilecache.LayerConfig{{Name: "test:a", Gridsets: []string{"EPSG:4326"}}},
	}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	e, err = Acquire(name, Config{Workers: 1, History: 100, CheckpointInterval: time.Hour}, zap.NewNop())
	if err != nil {
		c.Release()
		t.Fatal(err)
	}
	e.Attach(c)
	var once sync.Once
	var stopErr error
	stop = func() error {
		once.Do(func() {
			// The engine first: its workers write task records to the store.
			stopErr = errors.Join(e.Release(), c.Release())
		})
		return stopErr
	}
	t.Cleanup(func() { stop() })
	return e, c, stop
}

// storedState is the state of task id as its record in the store says.
func storedState(t *testing.T, c *tilecache.Cache, id int64) State {
	t.Helper()
	state, found := State(99), false
	err := c.Store().Tasks(func(tid int64, b []byte) error {
		if tid == id {
			var r saved
			if err := json.Unmarshal(b, &r); err != nil {
				return err
			}
			state, found = r.State, true
		}
		return nil
	})
	if err != nil || !found {
		t.Fatalf("task %d's record: found %v, %v", id, found, err)
	}
	return state
}

// A kill's answer means the task never runs again: when Kill or KillTask
// returns, the store already says ABORTED, although the task's worker is
// still in its metatile (the upstream holds every GetMap). Saved as running
// until the worker was done, a crash at that moment, or a stop that closed
// the store first, brought the killed seed back after the restart (a
// loaded run of TestQuotaSurvivesKills: "a killed seed runs again after a
// restart"). Reading the record right after the answer, with the worker
// still busy, sees the old behaviour in nearly every round. After the
// engine and the store are let go and opened again, nothing resumes.
func TestKilledTasksStayKilled(t *testing.T) {
	up, arrived, release := heldUpstream(t)
	dir := t.TempDir()
	name := fmt.Sprintf("kill%d", time.Now().UnixNano())
	e, c, stop := openKillFixture(t, name, up.URL, dir)

	var ids []int64
	for round := range 20 {
		// One metatile of level 6 each (4 tiles of 2.8125°): no round's
		// fetch is another's, even while the last one is still being let
		// go.
		threads, z := 1, 6
		west := -180 + 11.25*float64(round)
		spec, err := e.Resolve("test:a", Request{GridsetID: "EPSG:4326", ZoomStart: &z, ZoomStop: &z, Type: "seed",
			ThreadCount: &threads, Bounds: []float64{west + 1, -89, west + 2, -88}})
		if err != nil {
			t.Fatal(err)
		}
		task, err := e.Submit(spec)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, task.ID)
		select {
		case <-arrived: // the worker's GetMap is on the wire, held
		case <-time.After(5 * time.Minute):
			t.Fatalf("round %d: the seed asked the upstream for nothing", round)
		}
		if round%2 == 0 {
			killed, _, err := e.Kill("", KillAll)
			if err != nil || len(killed) != 1 || killed[0].ID != task.ID {
				t.Fatalf("round %d: Kill: %v, %v", round, killed, err)
			}
		} else if _, err := e.KillTask(task.ID); err != nil {
			t.Fatalf("round %d: KillTask: %v", round, err)
		}
		if s := storedState(t, c, task.ID); s != Aborted {
			t.Fatalf("round %d: right after the kill the store says task %d is %v, want ABORTED", round, task.ID, s)
		}
		waitEnded(t, e, task.ID)
		release <- struct{}{}
	}

	// A stop and a start on the same store: nothing comes back to run.
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	e2, _, _ := openKillFixture(t, name+"-again", up.URL, dir)
	if l, err := e2.List(""); err != nil || len(l) != 0 {
		t.Fatalf("after the restart the tasks listed: %v, %v", l, err)
	}
	for _, id := range ids {
		if in, ok, err := e2.Info(id); err != nil || !ok || in.State != "ABORTED" {
			t.Fatalf("after the restart task %d: %+v, found %v, %v", id, in, ok, err)
		}
	}
}

// waitEnded waits for the killed task's workers to let it go (its state
// ABORTED in the engine); bounded only so that a hang ends the test.
func waitEnded(t *testing.T, e *Engine, id int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		e.mu.Lock()
		task := e.byID[id]
		done := task != nil && task.state == Aborted
		e.mu.Unlock()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %d still not ended", id)
		}
		time.Sleep(time.Millisecond)
	}
}
