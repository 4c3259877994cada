package command

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"
)

// exportOptions are export's own flags, beside the seed flags that say
// the area.
type exportOptions struct {
	to         string
	cachedOnly bool
	task       int64 // an export already submitted: follow it and download its file
}

// kind is the file format --to asks for, by its extension.
func (x *exportOptions) kind() (string, error) {
	switch strings.ToLower(filepath.Ext(x.to)) {
	case ".mbtiles":
		return "mbtiles", nil
	case ".gpkg":
		return "gpkg", nil
	case "":
		if x.to == "" {
			return "", usage("--to is required: the file to write, area.mbtiles or area.gpkg")
		}
	}
	return "", usage("--to %s: the name must end in .mbtiles or .gpkg, which says the format", x.to)
}

func exportCommand(connect connectFunc) *cobra.Command {
	o := &seedOptions{}
	x := &exportOptions{}
	w := &waitOptions{}
	c := &cobra.Command{
		Use:   "export --layer <name> (--levels <z0-z1> [--bounds minx,miny,maxx,maxy] [--geometry <file>] | --tiles <file>) --to <file.mbtiles|file.gpkg> [--cached-only] [--wait]",
		Short: "Writes an area of a layer into an MBTiles or GeoPackage file",
		Long: `Submits an export task: the server seeds what the area lacks (unless
--cached-only), then writes the area's tiles into an MBTiles or a
GeoPackage file, as --to's extension says. With --wait, follows the task
and then downloads the file to --to; without, prints the task's id and
where its file will be. --task <id> --to <file> follows an export already
submitted and downloads its file, resuming a download cut short.`,
		Example: "  caddy tile-cache export --layer osm --gridset EPSG:900913 --levels 0-14 \\\n" +
			"      --bounds 600000,5900000,700000,6000000 --to town.mbtiles --wait",
		Args: runE(noArgs),
	}
	o.addFlags(c, "export")
	o.stdin = os.Stdin
	c.Flags().StringVar(&x.to, "to", "", "the file to write: .mbtiles or .gpkg (required)")
	c.Flags().BoolVar(&x.cachedOnly, "cached-only", false, "write what is cached, without seeding the rest first")
	c.Flags().Int64Var(&x.task, "task", 0, "no new task: follow this export and download its file (resumes a download cut short)")
	addWaitFlags(c, w, true)
	c.RunE = runE(func(cmd *cobra.Command, _ []string) error {
		o.given = cmd.Flags().Changed
		kind, err := x.kind()
		if err != nil {
			return err
		}
		var req seedRequest
		if x.task != 0 {
			if x.task < 0 {
				return usage("--task %d is not a task id", x.task)
			}
			for _, f := range []string{"layer", "levels", "tiles", "bounds", "geometry", "cached-only"} {
				if o.given(f) {
					return usage("--task follows an export already submitted: --%s does not go with it", f)
				}
			}
			w.wait = true
			req.ExportFormat = kind
		} else {
			if req, err = o.request("export"); err != nil {
				return err
			}
			req.ExportFormat, req.CachedOnly = kind, x.cachedOnly
		}
		cl, err := connect(cmd)
		if err != nil {
			return err
		}
		ctx, stop := interruptible(w.wait)
		defer stop()
		return runExport(ctx, cl, o, req, x, w, cmd.OutOrStdout(), cmd.ErrOrStderr())
	})
	return c
}

// runExport submits the export, and with --wait follows it and downloads
// its file.
func runExport(ctx context.Context, c *client, o *seedOptions, req seedRequest, x *exportOptions, w *waitOptions, stdout, stderr io.Writer) error {
	id, err := x.task, error(nil)
	switch {
	case id != 0:
	case o.tiles != "":
		id, err = c.submitList(ctx, o, req)
	default:
		id, err = c.submit(ctx, req)
	}
	if err != nil && ctx.Err() != nil {
		return fail(ExitInterrupted, "interrupted before the server answered: the task may have been submitted (caddy tile-cache tasks)")
	}
	if err != nil {
		return err
	}
	file := fmt.Sprintf("task-%d.%s", id, req.ExportFormat)
	if !w.wait {
		fmt.Fprintf(stdout, "task %d submitted: export of %s; when it is DONE, its file is %s/rest/exports/%s\n", id, req.Name, c.base, file)
		return nil
	}
	ended := follow(ctx, c, id, w, stdout, stderr)
	if codeOf(ended) != 0 && codeOf(ended) != ExitFailedTiles {
		return ended // aborted, interrupted, unreachable: no file
	}
	n, err := c.download(ctx, "/rest/exports/"+file, x.to)
	if err != nil {
		if ctx.Err() != nil {
			return fail(ExitInterrupted, "interrupted: %s.partial keeps what was downloaded; caddy tile-cache export --task %d --to %s resumes it", x.to, id, x.to)
		}
		return err
	}
	fmt.Fprintf(stdout, "%s written: %s\n", x.to, humanize.IBytes(uint64(n)))
	return ended // done, or done with failed tiles (missing from the file): exit 2
}

// download copies a file of the REST interface to dst, through
// dst.partial: a download cut short resumes from where it stopped
// (a Range request), and dst appears only once complete.
func (c *client) download(ctx context.Context, path, dst string) (int64, error) {
	partial := dst + ".partial"
	f, err := os.OpenFile(partial, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return 0, usage("--to: %v", err)
	}
	defer f.Close()
	have, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return 0, usage("--to: %v", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return 0, usage("%v", err)
	}
	if c.hasAuth {
		req.SetBasicAuth(c.user, c.pass)
	}
	req.Header.Set("User-Agent", "caddy-tile-cache-cli")
	if have > 0 {
		req.Header.Set("Range", "bytes="+strconv.FormatInt(have, 10)+"-")
	}
	hc := *c.http
	hc.Timeout = 0 // a file takes as long as it takes; Ctrl-C ends it
	resp, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		return 0, fail(ExitUnreachable, "%s unreachable: %s", hostOf(c.base), netReason(err))
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusPartialContent:
	case http.StatusOK, http.StatusRequestedRangeNotSatisfiable:
		// The whole file (a server that ignores Range, or a .partial
		// longer than the file, from another export): start again.
		if resp.StatusCode == http.StatusRequestedRangeNotSatisfiable {
			resp.Body.Close()
			f.Close()
			os.Remove(partial)
			return c.download(ctx, path, dst)
		}
		if err := f.Truncate(0); err != nil {
			return 0, err
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return 0, err
		}
		have = 0
	default:
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return 0, c.statusError(answer{status: resp.StatusCode, header: resp.Header, body: b})
	}
	n, err := io.Copy(f, resp.Body)
	if err != nil {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		return 0, fail(ExitUnreachable, "%s: the download stopped after %s: %s (export --task resumes it)", hostOf(c.base), humanize.IBytes(uint64(have+n)), netReason(err))
	}
	if err := f.Sync(); err != nil {
		return 0, err
	}
	if err := f.Close(); err != nil {
		return 0, err
	}
	if err := os.Rename(partial, dst); err != nil {
		return 0, usage("--to: %v", err)
	}
	return have + n, nil
}
