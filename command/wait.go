package command

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
)

// waitOptions say how a task is followed to its end.
type waitOptions struct {
	wait bool
	// interval between progress lines when the output is not a terminal.
	interval time.Duration
	// terminal: draw a bar, redrawn in place, width columns wide.
	terminal bool
	width    func() int
}

// patience is how long following a task rides out a server that does not
// answer or answers 429/5xx: a Caddy restart or a reload takes seconds,
// and the task goes on (or resumes) meanwhile.
const patience = time.Minute

// barPoll is how often the bar is brought up to date.
const barPoll = 500 * time.Millisecond

// follow polls the task's resource until the task ends, showing progress,
// and returns the outcome as an exit status: nil for DONE without failed
// tiles.
func follow(ctx context.Context, c *client, id int64, o *waitOptions, stdout, stderr io.Writer) error {
	poll := barPoll
	if !o.terminal {
		poll = min(o.interval, time.Second)
	}
	meter := &rateMeter{window: 10 * time.Second}
	var (
		last      taskInfo
		seen      bool  // a first answer came
		lastState int64 = -2
		lastLine  time.Time
		failing   time.Time // since when the server has not answered
		drawn     bool      // a bar is on the screen: what follows starts a new line
	)
	show := func(now time.Time, note string) {
		rate := meter.rate(last.TilesPerSec)
		if last.finished() {
			rate = last.TilesPerSec // the average over the whole task, for the record
		}
		if o.terminal {
			fmt.Fprint(stdout, "\r"+barLine(last, rate, o.width(), note)+"\x1b[K")
			drawn = true
			return
		}
		if last.Status != lastState || now.Sub(lastLine) >= o.interval || last.finished() {
			fmt.Fprintln(stdout, plainLine(now, last, rate))
			lastLine, lastState = now, last.Status
		}
	}
	endBar := func() {
		if drawn {
			fmt.Fprintln(stdout)
			drawn = false
		}
	}
	for {
		t, err := c.task(ctx, id)
		now := time.Now()
		if ctx.Err() != nil {
			endBar()
			return fail(ExitInterrupted, "stopped following task %d; it goes on on the server: follow it again with `caddy tile-cache wait %d`, end it with `caddy tile-cache kill %d`", id, id, id)
		}
		if err != nil {
			if !seen || !transient(err) {
				endBar()
				return err
			}
			if failing.IsZero() {
				failing = now
			}
			if now.Sub(failing) > patience {
				endBar()
				return err
			}
			if o.terminal {
				show(now, "(no answer, retrying)")
			} else if now.Sub(lastLine) >= o.interval {
				fmt.Fprintf(stdout, "%s task %d: %v; retrying for up to %s\n", now.Format(time.RFC3339), id, err, patience)
				lastLine = now
			}
		} else {
			if !seen {
				fmt.Fprintln(stdout, headLine(t))
			}
			failing, last, seen = time.Time{}, t, true
			meter.add(now, t.Processed)
			show(now, "")
			if t.finished() {
				endBar()
				return outcome(t, stdout, stderr)
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(poll):
		}
	}
}

// transient says whether an error may go away by itself: no answer, or
// 429/5xx.
func transient(err error) bool {
	c := codeOf(err)
	return c == ExitUnreachable || c == ExitUnavailable
}

// outcome writes the task's end in one line and returns its exit status:
// DONE on stdout; failed tiles and ABORTED on stderr, as errors.
func outcome(t taskInfo, stdout, stderr io.Writer) error {
	kind := strings.ToLower(t.Type)
	switch {
	case t.Status == statusAborted:
		why := t.Reason
		if why == "" {
			why = "reason unknown"
		}
		fmt.Fprintf(stderr, "tile-cache: task %d (%s of %s) ABORTED after %d of %d tiles: %s\n", t.ID, kind, t.Layer, t.Processed, t.Total, oneLineOf(why))
		return &exitError{code: ExitAborted}
	case t.FailedTiles > 0:
		last := ""
		if t.LastError != "" {
			last = "; last error: " + oneLineOf(t.LastError)
		}
		fmt.Fprintf(stderr, "tile-cache: task %d (%s of %s) DONE with %d failed tiles of %d%s\n", t.ID, kind, t.Layer, t.FailedTiles, t.Total, last)
		return &exitError{code: ExitFailedTiles}
	}
	fmt.Fprintf(stdout, "task %d (%s of %s) DONE: %d tiles, %s\n", t.ID, kind, t.Layer, t.Total, fmtRate(t.TilesPerSec))
	return nil
}

func oneLineOf(s string) string { return strings.Join(strings.Fields(s), " ") }
