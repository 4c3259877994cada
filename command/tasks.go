package command

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"text/tabwriter"
)

// listing is GET rest/seed.json or rest/seed/<layer>.json:
// [processed, total, remaining, id, status] per pending or running task.
func (c *client) listing(ctx context.Context, layer string) ([][5]int64, []byte, error) {
	path := "/rest/seed.json"
	if layer != "" {
		path = "/rest/seed/" + layerPath(layer) + ".json"
	}
	a, err := c.do(ctx, http.MethodGet, path, "", nil)
	if err != nil {
		return nil, nil, err
	}
	var l struct {
		Rows *[][5]int64 `json:"long-array-array"`
	}
	if err := json.Unmarshal(a.body, &l); err != nil || l.Rows == nil {
		return nil, nil, fail(ExitRefused, "the task listing is not a long-array-array: is --url where tile_cache_admin is mounted?")
	}
	return *l.Rows, a.body, nil
}

var stateNames = map[int64]string{statusAborted: "ABORTED", statusPending: "PENDING", statusRunning: "RUNNING", statusDone: "DONE"}

// runTasks prints the pending and running tasks as a table. The listing
// has numbers only; each task's own resource adds its layer, type, levels
// and rate (a task that ends meanwhile keeps its numbers).
func runTasks(ctx context.Context, c *client, layer string, raw bool, stdout io.Writer) error {
	rows, body, err := c.listing(ctx, layer)
	if err != nil {
		return err
	}
	if raw {
		_, err := stdout.Write(body)
		return err
	}
	if len(rows) == 0 {
		scope := ""
		if layer != "" {
			scope = " of layer " + layer
		}
		fmt.Fprintf(stdout, "no pending or running tasks%s\n", scope)
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tLAYER\tTYPE\tSTATE\tLEVELS\tTILES\t%\tFAILED\tRATE\tLEFT")
	for _, r := range rows {
		processed, total, remaining, id, status := r[0], r[1], r[2], r[3], r[4]
		layer, typ, levels, failed, rate, left := "?", "?", "?", "?", "", ""
		state := stateNames[status]
		if t, err := c.task(ctx, id); err == nil {
			layer, typ, levels = t.Layer, t.Type, fmt.Sprintf("%d-%d", t.ZoomStart, t.ZoomStop)
			failed = fmt.Sprint(t.FailedTiles)
			if status == statusRunning {
				rate, left = fmtRate(t.TilesPerSec), clock(timeLeft(remaining, t.TilesPerSec))
			}
		} else if codeOf(err) == ExitUnreachable {
			return err
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%d/%d\t%.1f%%\t%s\t%s\t%s\n", id, layer, typ, state, levels, processed, total,
			percent(processed, total), failed, rate, left)
	}
	return tw.Flush()
}

// killOptions: one task by id, or every task in a state, optionally of one layer.
type killOptions struct {
	all, running, pending bool
	layer                 string
}

// check reads what to kill: a task id, or which tasks for kill_all.
func (o *killOptions) check(args []string) (id int64, which string, err error) {
	var set []string
	for _, w := range []struct {
		name string
		on   bool
	}{{"all", o.all}, {"running", o.running}, {"pending", o.pending}} {
		if w.on {
			set = append(set, w.name)
		}
	}
	switch {
	case len(args) > 1:
		return 0, "", usage("kill takes one task id")
	case len(args) == 1 && (len(set) > 0 || o.layer != ""):
		return 0, "", usage("give a task id, or --all, --running or --pending (with --layer), not both")
	case len(args) == 1:
		id, err := parseID(args[0])
		return id, "", err
	case len(set) == 0:
		return 0, "", usage("what to kill: a task id, --all, --running or --pending")
	case len(set) > 1:
		return 0, "", usage("give one of --all, --running, --pending")
	}
	return 0, set[0], nil
}

// runKill ends tasks: DELETE rest/tasks/<id> for one, or POST
// rest/seed[/<layer>] with kill_all, GeoWebCache's way.
func runKill(ctx context.Context, c *client, id int64, which, layer string, stdout io.Writer) error {
	if id > 0 {
		if _, err := c.do(ctx, http.MethodDelete, fmt.Sprintf("/rest/tasks/%d", id), "", nil); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "task %d killed\n", id)
		return nil
	}
	path := "/rest/seed"
	if layer != "" {
		path += "/" + layerPath(layer)
	}
	form := url.Values{"kill_all": {which}}.Encode()
	a, err := c.do(ctx, http.MethodPost, path, "application/x-www-form-urlencoded", strings.NewReader(form))
	if err != nil {
		return err
	}
	killed, ok := killedTasks(string(a.body))
	what := func(n int) string {
		s := which + " task"
		if which == "all" {
			s = "running and pending task"
		}
		if n != 1 {
			s += "s"
		}
		if layer != "" {
			s += " of layer " + layer
		}
		return s
	}
	switch {
	case !ok: // another server's page: it said 200, no more
		fmt.Fprintf(stdout, "%s terminated\n", what(2))
	case len(killed) == 0:
		fmt.Fprintf(stdout, "no %s to terminate\n", what(0))
	default:
		fmt.Fprintf(stdout, "terminated %d %s:\n", len(killed), what(len(killed)))
		for _, k := range killed {
			fmt.Fprintln(stdout, "  "+k)
		}
	}
	return nil
}

var (
	killedSection = regexp.MustCompile(`(?s)<h2>Terminated tasks</h2>\s*<ul>(.*?)</ul>`)
	killedItem    = regexp.MustCompile(`<li>\[(\d+): (.*), (SEED|RESEED|TRUNCATE), (\w+)\]</li>`)
)

// killedTasks reads the terminated tasks from the kill page this cache
// answers; ok is false for a page of another shape (GeoWebCache's own).
func killedTasks(page string) ([]string, bool) {
	m := killedSection.FindStringSubmatch(page)
	if m == nil {
		return nil, false
	}
	var out []string
	for _, it := range killedItem.FindAllStringSubmatch(m[1], -1) {
		out = append(out, fmt.Sprintf("task %s: %s of %s", it[1], it[3], html.UnescapeString(it[2])))
	}
	return out, true
}

// runMassTruncate clears every tile of a layer: all gridsets, formats and
// parameter sets. The server answers once it is done.
func runMassTruncate(ctx context.Context, c *client, layer string, stdout io.Writer) error {
	layer = strings.TrimSpace(layer)
	if layer == "" {
		return usage("--layer is required")
	}
	var b strings.Builder
	b.WriteString("<truncateLayer><layerName>")
	xml.EscapeText(&b, []byte(layer))
	b.WriteString("</layerName></truncateLayer>")
	if _, err := c.do(ctx, http.MethodPost, "/rest/masstruncate", "text/xml", strings.NewReader(b.String())); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "layer %s truncated: every gridset, format and parameter set\n", layer)
	return nil
}

func parseID(s string) (int64, error) {
	var id int64
	if _, err := fmt.Sscan(s, &id); err != nil || id <= 0 || fmt.Sprint(id) != strings.TrimSpace(s) {
		return 0, usage("%q is not a task id (a positive number, as `caddy tile-cache tasks` shows)", s)
	}
	return id, nil
}
