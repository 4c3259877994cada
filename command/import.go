package command

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"
)

// importOptions are the flags of `tile-cache import`.
type importOptions struct {
	layer, from, fromServer  string
	gridset, format          string
	kind, table, layout      string
	rowsFromTop, rowsFromBot bool
}

// check reads the flags into the import's query; no password is asked
// for a mistake here.
func (o *importOptions) check() (url.Values, error) {
	q := url.Values{}
	if strings.TrimSpace(o.layer) == "" {
		return nil, usage("--layer is required")
	}
	switch {
	case o.from == "" && o.fromServer == "":
		return nil, usage("--from <file> (an MBTiles or GeoPackage file here) or --from-server <path> (under the server's import_root) is required")
	case o.from != "" && o.fromServer != "":
		return nil, usage("--from and --from-server exclude each other")
	case o.from != "":
		st, err := os.Stat(o.from)
		if err != nil {
			return nil, usage("--from: %v", err)
		}
		if st.IsDir() {
			return nil, usage("--from %s is a directory: a tile tree is imported on the server; copy it under the server's import_root and give --from-server", o.from)
		}
	default:
		q.Set("from", o.fromServer)
	}
	if o.rowsFromTop && o.rowsFromBot {
		return nil, usage("--rows-from-top and --rows-from-bottom exclude each other")
	}
	for k, v := range map[string]string{"gridSetId": o.gridset, "format": o.format, "kind": o.kind, "table": o.table, "layout": o.layout} {
		if v = strings.TrimSpace(v); v != "" {
			q.Set(k, v)
		}
	}
	if o.rowsFromTop {
		q.Set("rowsFromTop", "true")
	} else if o.rowsFromBot {
		q.Set("rowsFromTop", "false")
	}
	return q, nil
}

func importCommand(connect connectFunc) *cobra.Command {
	o := &importOptions{}
	var interval time.Duration
	c := &cobra.Command{
		Use:   "import --layer <name> (--from <file> | --from-server <path>) [--gridset <name>] [--format <mime>] [--table <name>] [--layout tms|xyz|tc|mp|arcgis]",
		Short: "Loads an MBTiles, GeoPackage or tile directory into a layer's cache",
		Long: `Loads tiles made elsewhere into one tile set of a layer, without asking
the upstream: an MBTiles or GeoPackage file uploaded from here (--from),
or a file or TMS/XYZ directory tree already on the server, under its
import_root (--from-server). The server checks every tile first (its
place in the gridset, its size, its format) and refuses the whole source
for one bad tile; the command returns once every tile is stored.
--timeout does not bound an import, which takes as long as the file.`,
		Example: "  caddy tile-cache import --layer topp:states --from states.mbtiles\n" +
			"  caddy tile-cache import --layer osm --from-server mapproxy/osm_EPSG900913 --layout tc",
		Args: runE(noArgs),
	}
	f := c.Flags()
	f.StringVar(&o.layer, "layer", "", "layer name (required)")
	f.StringVar(&o.from, "from", "", "an MBTiles or GeoPackage file to upload")
	f.StringVar(&o.fromServer, "from-server", "", "a file or directory tree under the server's import_root")
	f.StringVar(&o.gridset, "gridset", "", "the layer's gridset the tiles are in (default: its first)")
	f.StringVar(&o.format, "format", "", "the layer's tile format they go to (default: its first)")
	f.StringVar(&o.kind, "kind", "", "mbtiles, gpkg or dir (default: found from the source)")
	f.StringVar(&o.table, "table", "", "a GeoPackage's tile table (default: its only one)")
	f.StringVar(&o.layout, "layout", "", "a directory tree's layout: tms, xyz, tc, mp or arcgis")
	f.BoolVar(&o.rowsFromTop, "rows-from-top", false, "a directory tree counts rows from the top, whatever its layout says")
	f.BoolVar(&o.rowsFromBot, "rows-from-bottom", false, "a directory tree counts rows from the bottom, whatever its layout says")
	f.DurationVar(&interval, "interval", 30*time.Second, "time between upload progress lines when the output is not a terminal")
	c.RunE = runE(func(cmd *cobra.Command, _ []string) error {
		q, err := o.check()
		if err != nil {
			return err
		}
		if interval <= 0 {
			return usage("--interval must be positive")
		}
		cl, err := connect(cmd)
		if err != nil {
			return err
		}
		ctx, stop := interruptible(true)
		defer stop()
		return runImport(ctx, cl, o, q, interval, cmd.OutOrStdout(), cmd.ErrOrStderr())
	})
	return c
}

// importAnswer is the server's account of an import.
type importAnswer struct {
	Layer   string `json:"layer"`
	Gridset string `json:"gridSetId"`
	Format  string `json:"format"`
	Source  string `json:"source"`
	Tiles   int64  `json:"tiles"`
	Bytes   int64  `json:"bytes"`
	Outside int64  `json:"outside"`
	Skipped int64  `json:"skipped"`
	MinZoom int    `json:"minZoom"`
	MaxZoom int    `json:"maxZoom"`
}

// runImport sends the import and prints what the server did.
func runImport(ctx context.Context, c *client, o *importOptions, q url.Values, interval time.Duration, stdout, stderr io.Writer) error {
	path := "/rest/import/" + url.PathEscape(strings.TrimSpace(o.layer)) + "?" + q.Encode()
	// An import lasts as long as the file: no overall time limit (Ctrl-C
	// ends it; what is stored stays, and importing again completes it).
	long := *c
	hc := *c.http
	hc.Timeout = 0
	long.http = &hc
	var body io.Reader
	contentType := ""
	if o.from != "" {
		f, err := os.Open(o.from)
		if err != nil {
			return usage("--from: %v", err)
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return usage("--from: %v", err)
		}
		up := &uploadMeter{r: f, total: st.Size()}
		done := make(chan struct{})
		defer close(done)
		go up.report(done, interval, stderr)
		body, contentType = up, "application/vnd.sqlite3"
	}
	a, err := long.do(ctx, http.MethodPost, path, contentType, body)
	if err != nil {
		if ctx.Err() != nil {
			return fail(ExitInterrupted, "interrupted: the tiles stored so far stay; import the same source again to complete it")
		}
		return err
	}
	var ans importAnswer
	if err := json.Unmarshal(a.body, &ans); err != nil {
		return fail(ExitRefused, "the server's answer is not an import result: %v", err)
	}
	levels := "no tiles"
	if ans.MinZoom >= 0 {
		levels = fmt.Sprintf("levels %d-%d", ans.MinZoom, ans.MaxZoom)
	}
	fmt.Fprintf(stdout, "imported %s (%s) from %s into layer %s, %s, %s, %s\n",
		count(ans.Tiles, "tile"), humanize.IBytes(uint64(ans.Bytes)), ans.Source, ans.Layer, ans.Gridset, ans.Format, levels)
	if ans.Outside > 0 {
		fmt.Fprintf(stdout, "%s outside the layer's area left out\n", count(ans.Outside, "tile"))
	}
	if ans.Skipped > 0 {
		fmt.Fprintf(stdout, "%s of the tree skipped: not tiles of its layout\n", count(ans.Skipped, "file"))
	}
	return nil
}

// count is "1 tile", "2 tiles", "12,345 tiles".
func count(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return humanize.Comma(n) + " " + noun + "s"
}

// uploadMeter counts the bytes of an upload as they are read, for a
// progress line every interval; the server then checks and stores.
type uploadMeter struct {
	r     io.Reader
	total int64
	sent  atomic.Int64
}

func (u *uploadMeter) Read(p []byte) (int, error) {
	n, err := u.r.Read(p)
	u.sent.Add(int64(n))
	return n, err
}

func (u *uploadMeter) report(done <-chan struct{}, interval time.Duration, w io.Writer) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			sent := u.sent.Load()
			if sent >= u.total {
				fmt.Fprintf(w, "uploaded %s; the server is checking and storing the tiles\n", humanize.IBytes(uint64(u.total)))
				return
			}
			fmt.Fprintf(w, "uploading: %s of %s\n", humanize.IBytes(uint64(sent)), humanize.IBytes(uint64(u.total)))
		}
	}
}
