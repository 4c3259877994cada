package seeder

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/tilecache/caddy-tilecache/module/cluster"
)

// The task registry of a clustered cache lives in Caddy's storage, under
// the cluster's area, so that every node lists, kills and works on every
// node's tasks:
//
//	seq                        the last task id handed out (lock "seq")
//	tasks/<id>/task            an active task: its spec, counts and ledger (lock "tasks/<id>")
//	tasks/<id>/done/<unit>     a finished work unit's counts, written by its node
//	tasks/<id>/data            a polygon task's geometry or a tile list task's list, written once
//	history/<id>               a finished task, until `history` newer ones push it out
//
// A task is split into work units, ranges of PerUnit metatiles in the
// iterator's order. The ledger in the task record says which units were
// handed out (Next), which were given back (Free) and who holds the rest
// (Held); a node changes it only under the task's lock. A unit's counts
// join the task's when its node reports it done while still holding it:
// the report and the release are one write, so no unit counts twice, and
// a unit taken over from a dead node counts from its own done record (if
// the dead node finished it) or is done again (if not), never both.

// maxUnits bounds the work units of a task: a unit is then at least a
// thousandth of the task, so the ledger stays small, while a task of a
// few hundred metatiles is still shared metatile by metatile.
const maxUnits = 1000

// record is a clustered task as the registry keeps it.
type record struct {
	saved
	ID        int64  `json:"id"`
	Node      string `json:"node"` // where it was submitted
	Metatiles int64  `json:"metatiles"`
	PerUnit   int64  `json:"perUnit"`
	Units     int64  `json:"units"`
	// Next: units before it have been handed out.
	Next int64 `json:"next"`
	// Free are units handed out and given back unfinished (a node that
	// stopped, or died), handed out again first.
	Free []int64 `json:"free,omitempty"`
	// Held maps the units being worked on to their nodes.
	Held map[int64]string `json:"held,omitempty"`
	// Write is an export's write phase, set by the claim that reports its
	// last unit (sharedexport.go).
	Write *writePhase `json:"write,omitempty"`
}

// doneUnit is a finished work unit's counts.
type doneUnit struct {
	Unit      int64  `json:"unit"`
	Processed int64  `json:"processed"`
	Failed    int64  `json:"failed"`
	Node      string `json:"node"`
}

// registry is a clustered engine's view of the shared tasks.
type registry struct {
	n       *cluster.Node
	log     *zap.Logger
	history func() int // how many finished tasks to keep
}

// errGone: the task is no longer active (finished or killed, here or on
// another node).
var errGone = errors.New("the task is no longer active")

func taskKey(id int64) string       { return "tasks/" + strconv.FormatInt(id, 10) + "/task" }
func taskLock(id int64) string      { return "tasks/" + strconv.FormatInt(id, 10) }
func doneKey(id, unit int64) string { return fmt.Sprintf("tasks/%d/done/%d", id, unit) }
func historyKey(id int64) string    { return "history/" + strconv.FormatInt(id, 10) }
func dataKey(id int64) string       { return "tasks/" + strconv.FormatInt(id, 10) + "/data" }
func (r *record) active() bool      { return r.State == Pending || r.State == Running }
func (r *record) summary() Summary  { return Summary{r.ID, r.Layer, r.Type, r.State} }
func unmarshalRecord(b []byte) (*record, error) {
	rec := new(record)
	if err := json.Unmarshal(b, rec); err != nil {
		return nil, fmt.Errorf("%w: unreadable task record: %v", cluster.ErrStorage, err)
	}
	if rec.Held == nil {
		rec.Held = map[int64]string{}
	}
	return rec, nil
}

// nextID hands out the next task id of the cluster, above floor (ids this
// engine handed out before it was clustered).
func (r *registry) nextID(floor int64) (int64, error) {
	var id int64
	err := r.n.Locked("seq", func() error {
		b, err := r.n.Load("seq")
		if err != nil && !cluster.IsNotExist(err) {
			return err
		}
		if len(b) > 0 {
			if id, err = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err != nil {
				return fmt.Errorf("%w: the task id sequence is unreadable: %v", cluster.ErrStorage, err)
			}
		}
		id = max(id, floor) + 1
		return r.n.Store("seq", []byte(strconv.FormatInt(id, 10)))
	})
	return id, err
}

// submit stores a new task.
func (r *registry) submit(rec *record) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return r.n.Store(taskKey(rec.ID), b)
}

// active returns the active tasks, by id.
func (r *registry) active() ([]*record, error) {
	start := time.Now()
	defer cluster.Observe("registry_read", start)
	return r.records("tasks", "/task")
}

// sweep removes the folder of a task that has retired (it is in the
// history) but whose folder a late done record brought back.
func (r *registry) sweep(key string) {
	id, err := strconv.ParseInt(path.Base(key), 10, 64)
	if err != nil {
		return
	}
	if _, err := r.n.Load(historyKey(id)); err == nil {
		r.n.Delete(taskLock(id))
	}
}

// finished returns the finished tasks kept in the history, by id.
func (r *registry) finished() ([]*record, error) { return r.records("history", "") }

// records loads the records under dir (each key + suffix), by id; one
// that goes while they are read (a task retired meanwhile) is skipped, and
// so is a key that names no task: a storage's temporary file caught
// before its rename (certmagic's file_system storage names them with
// digits, like task ids), whose record is another key's. A listing that
// fails is an error, never an empty registry: the callers would take
// every task for finished.
func (r *registry) records(dir, suffix string) ([]*record, error) {
	keys, err := r.n.List(dir)
	if err != nil {
		return nil, err
	}
	recs := make([]*record, 0, len(keys))
	for _, k := range keys {
		id, err := strconv.ParseInt(path.Base(k), 10, 64)
		if err != nil {
			continue
		}
		b, err := r.n.Load(k + suffix)
		if cluster.IsNotExist(err) {
			if dir == "tasks" {
				r.sweep(k) // a retired task's leftovers; not a task being submitted
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		rec, err := unmarshalRecord(b)
		if err != nil {
			return nil, err
		}
		if rec.ID != id {
			continue
		}
		recs = append(recs, rec)
	}
	slices.SortFunc(recs, func(a, b *record) int { return int(a.ID - b.ID) })
	return recs, nil
}

// lookup finds a task, active or finished; ErrNoTask if neither.
func (r *registry) lookup(id int64) (*record, error) {
	b, err := r.n.Load(taskKey(id))
	if cluster.IsNotExist(err) {
		b, err = r.n.Load(historyKey(id))
	}
	if cluster.IsNotExist(err) {
		return nil, ErrNoTask
	}
	if err != nil {
		return nil, err
	}
	return unmarshalRecord(b)
}

// update changes an active task under its lock; a task fn finishes (DONE
// or ABORTED) moves to the history. errGone if it is not active.
func (r *registry) update(id int64, fn func(rec *record) error) (*record, error) {
	var rec *record
	retired := false
	err := r.n.Locked(taskLock(id), func() error {
		b, err := r.n.Load(taskKey(id))
		if cluster.IsNotExist(err) {
			return errGone
		}
		if err != nil {
			return err
		}
		if rec, err = unmarshalRecord(b); err != nil {
			return err
		}
		if err := fn(rec); err != nil {
			return err
		}
		if !rec.active() {
			retired = true
			return r.retire(rec)
		}
		b, err = json.Marshal(rec)
		if err != nil {
			return err
		}
		return r.n.Store(taskKey(id), b)
	})
	if err != nil {
		return nil, err
	}
	if retired {
		r.evict()
	}
	return rec, nil
}

// retire moves a finished task to the history; its lock is held.
func (r *registry) retire(rec *record) error {
	rec.Free, rec.Held = nil, nil
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if err := r.n.Store(historyKey(rec.ID), b); err != nil {
		return err
	}
	// Deleting the record ends the task for every node; its folder (the
	// units' done records) may still be written to by workers that have
	// not heard yet, so it goes on a best-effort basis (again by active).
	if err := r.n.Delete(taskKey(rec.ID)); err != nil {
		return err
	}
	r.log.Info("task finished", zap.Int64("id", rec.ID), zap.Stringer("state", rec.State),
		zap.Int64("processed", rec.Processed), zap.Int64("total", rec.Total), zap.Int64("failed_tiles", rec.FailedTiles))
	r.n.Delete(taskLock(rec.ID))
	return nil
}

// evict forgets the oldest finished tasks beyond the history's size. Two
// nodes evicting at once delete the same records: no harm.
// The records are read, not only listed: a temporary file's name in the
// listing must not count as a finished task and push a real one out.
func (r *registry) evict() {
	recs, err := r.finished()
	if err != nil {
		return
	}
	for len(recs) > r.history() {
		r.n.Delete(historyKey(recs[0].ID))
		if recs[0].Export != nil {
			r.n.Delete(exportKey(recs[0].ID)) // an export's file goes with its task
		}
		recs = recs[1:]
	}
}

// end finishes an active task as ABORTED with reason; ErrFinished (with
// its summary) if it has finished already, ErrNoTask if it is unknown.
func (r *registry) end(id int64, reason string) (Summary, error) {
	rec, err := r.update(id, func(rec *record) error {
		rec.State, rec.Reason, rec.Finished = Aborted, reason, time.Now()
		return nil
	})
	if errors.Is(err, errGone) {
		old, lerr := r.lookup(id)
		if lerr != nil {
			return Summary{}, lerr
		}
		return old.summary(), ErrFinished
	}
	if err != nil {
		return Summary{}, err
	}
	return rec.summary(), nil
}

// report is what a node tells the ledger: the units it finished, the
// failed attempts and the last error since its last report.
type report struct {
	done     []doneUnit
	failures int64
	lastErr  string
}

// claim reports, then hands this node up to want more units: units given
// back first, then units of dead nodes, then new ones. The task finishes
// (DONE, or ABORTED past its failure limit) in the write that reports its
// last unit.
func (r *registry) claim(id int64, want int, rep report) ([]int64, *record, error) {
	start := time.Now()
	defer cluster.Observe("claim", start)
	me := r.n.ID
	var got []int64
	rec, err := r.update(id, func(rec *record) error {
		r.fold(rec, rep)
		if rec.Failures > rec.Retry.MaxFailures {
			rec.State, rec.Finished = Aborted, time.Now()
			rec.Reason = fmt.Sprintf("%v: %d failed attempts, last: %s", errTooManyFailures, rec.Failures, rec.LastError)
			return nil
		}
		for u, node := range rec.Held {
			if node == me || r.n.Alive(node) {
				continue
			}
			// A dead node's unit: counted if it finished it, else free.
			b, err := r.n.Load(doneKey(id, u))
			if err != nil && !cluster.IsNotExist(err) {
				return err
			}
			var d doneUnit
			if err == nil && json.Unmarshal(b, &d) == nil {
				rec.Processed += d.Processed
				rec.FailedTiles += d.Failed
			} else {
				rec.Free = append(rec.Free, u)
				r.log.Info("taking over a work unit of a silent node", zap.Int64("task", id), zap.Int64("unit", u), zap.String("from", node))
			}
			delete(rec.Held, u)
		}
		slices.Sort(rec.Free)
		// No node takes more than its part of what is left: near the end
		// the last units spread over every live node.
		left := rec.Units - rec.Next + int64(len(rec.Free))
		live := int64(len(r.n.Peers()))
		want = min(want, int(max(1, (left+live-1)/live)))
		for len(got) < want && len(rec.Free) > 0 {
			got = append(got, rec.Free[0])
			rec.Free = rec.Free[1:]
		}
		for len(got) < want && rec.Next < rec.Units {
			got = append(got, rec.Next)
			rec.Next++
		}
		for _, u := range got {
			rec.Held[u] = me
		}
		if len(got) > 0 && rec.State == Pending {
			rec.State, rec.Started = Running, time.Now()
		}
		if rec.Next >= rec.Units && len(rec.Free) == 0 && len(rec.Held) == 0 {
			if rec.Started.IsZero() {
				rec.Started = time.Now()
			}
			if rec.Export != nil {
				// Seeded: one node now writes the file, and the task is
				// DONE when the file is in the storage (sharedexport.go).
				if rec.Write == nil {
					rec.State, rec.Write = Running, &writePhase{}
				}
				return nil
			}
			rec.State, rec.Finished = Done, time.Now()
		}
		return nil
	})
	return got, rec, err
}

// giveBack reports, and frees the units this node holds but will not
// finish (it stops): others take them at once instead of after the lease.
func (r *registry) giveBack(id int64, units []int64, rep report) error {
	me := r.n.ID
	_, err := r.update(id, func(rec *record) error {
		r.fold(rec, rep)
		for _, u := range units {
			if rec.Held[u] == me {
				delete(rec.Held, u)
				rec.Free = append(rec.Free, u)
			}
		}
		return nil
	})
	if errors.Is(err, errGone) {
		return nil
	}
	return err
}

// fold adds a node's report to the record. A unit counts only while its
// node still holds it: one taken over meanwhile is counted by its new node.
func (r *registry) fold(rec *record, rep report) {
	for _, d := range rep.done {
		if rec.Held[d.Unit] == r.n.ID {
			delete(rec.Held, d.Unit)
			rec.Processed += d.Processed
			rec.FailedTiles += d.Failed
		}
	}
	rec.Failures += rep.failures
	if rep.lastErr != "" {
		rec.LastError = rep.lastErr
	}
}

// row is the record's [processed, total, remaining, id, status].
func (r *record) row() [5]int64 {
	p := min(r.Processed, r.Total)
	return [5]int64{p, r.Total, r.Total - p, r.ID, int64(r.State)}
}

// info is the record as a task resource.
func (r *record) info() Info {
	in := Info{
		ID: r.ID, Layer: r.Layer, Type: r.Type.String(), State: r.State.String(), Status: int64(r.State),
		Gridset: r.Gridset, Format: r.Format, Parameters: r.Params,
		ZoomStart: r.ZoomStart, ZoomStop: r.ZoomStop,
		Bounds:  [4]float64{r.Bounds.MinX, r.Bounds.MinY, r.Bounds.MaxX, r.Bounds.MaxY},
		Threads: r.Threads, FailedTiles: r.FailedTiles, Failures: r.Failures,
		LastError: r.LastError, Reason: r.Reason, Created: r.Created,
	}
	row := r.row()
	in.Processed, in.Total, in.Remaining = row[0], row[1], row[2]
	if in.Parameters == nil {
		in.Parameters = [][2]string{}
	}
	if !r.Started.IsZero() {
		s := r.Started
		in.Started = &s
		end := time.Now()
		if !r.Finished.IsZero() {
			end = r.Finished
		}
		if el := end.Sub(s).Seconds(); el > 0 {
			in.TilesPerSec = float64(row[0]) / el
		}
	}
	if !r.Finished.IsZero() {
		f := r.Finished
		in.Finished = &f
	}
	return in
}
