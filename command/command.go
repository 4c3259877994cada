// Package command adds `caddy tile-cache` to every Caddy built with the
// plugin: seed, reseed, truncate, wait, tasks, kill, masstruncate, import and export,
// a client of a running cache's REST interface (tile_cache_admin, behind
// basic_auth). The flags, environment variables and exit statuses are in
// docs/command-line.md.
package command

import (
	"context"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "tile-cache",
		Usage: "<seed|reseed|truncate|wait|tasks|kill|masstruncate|import|export> --url <mount point> [--user <name>] ...",
		Short: "Seeds, truncates and lists the tasks of a running tile cache",
		Long: `
Talks to the REST interface of a running tile cache (the tile_cache_admin
handler, GeoWebCache's seed/truncate interface) at --url, the address it
is mounted at (e.g. https://tiles.example.com/geowebcache).

Credentials: --user (or TILECACHE_USER) and the password from
TILECACHE_PASSWORD or --password-file, never from the command line;
asked for when run on a terminal without either.

Exit status: 0 done, 1 usage, 2 task done with failed tiles, 3 task
aborted or killed, 4 server unreachable, 5 server refused (4xx),
6 server unavailable (429, 5xx), 130 interrupted while waiting.`,
		CobraFunc: build,
	})
}

// build adds the subcommands and the flags they share.
func build(cmd *cobra.Command) {
	cmd.SuggestionsMinimumDistance = 2 // cobra's default, which SuggestionsFor alone does not apply
	// Cobra shows the help for an unknown subcommand of a command that does
	// not run: `caddy tile-cache sed` would exit 0. It is an error.
	cmd.RunE = runE(func(c *cobra.Command, args []string) error {
		if len(args) > 0 {
			return unknownCommand(c, args[0])
		}
		return c.Help()
	})
	// A flag cobra cannot parse is a usage error like any other: one
	// `tile-cache:` line, not cobra's "Error: …". The subcommands inherit
	// this. Flags after a mistyped subcommand (`sed --layer L`) are parsed
	// as tile-cache's own, and fail: the word before them is the mistake.
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		if c == cmd && c.Flags().NArg() > 0 {
			err = unknownCommand(c, c.Flags().Arg(0))
		}
		return finish(c, nil, err)
	})
	conn := &connOptions{}
	pf := cmd.PersistentFlags()
	pf.String("url", "", "where tile_cache_admin is mounted, e.g. https://host/geowebcache (env "+envURL+")")
	pf.String("user", "", "Basic auth user (env "+envUser+"); the password comes from "+envPassword+" or --password-file")
	pf.String("password-file", "", "file whose first line is the password (env "+envPasswordFile+")")
	pf.StringArray("ca-cert", nil, "PEM file of a CA to trust besides the system's and Caddy's local CA (env "+envCACert+")")
	pf.Duration("timeout", time.Minute, "time limit of each request")

	// connect reads the shared flags, falling back to the environment.
	connect := func(c *cobra.Command) (*client, error) {
		f := c.Flags()
		str := func(flag, env string) (string, bool) {
			if f.Changed(flag) {
				v, _ := f.GetString(flag)
				return v, true
			}
			return os.Getenv(env), false
		}
		conn.url, conn.urlFromFlag = str("url", envURL)
		conn.user, _ = str("user", envUser)
		conn.passwordFile, _ = str("password-file", envPasswordFile)
		conn.caCerts, _ = f.GetStringArray("ca-cert")
		if len(conn.caCerts) == 0 && os.Getenv(envCACert) != "" {
			conn.caCerts = []string{os.Getenv(envCACert)}
		}
		conn.timeout, _ = f.GetDuration("timeout")
		if conn.timeout <= 0 {
			return nil, usage("--timeout must be positive")
		}
		if fd := int(os.Stdin.Fd()); term.IsTerminal(fd) {
			conn.readPassword = func() (string, error) {
				return askPassword(fd, "Password for "+conn.user+": ", os.Stderr)
			}
		}
		return newClient(conn)
	}

	for _, typ := range []string{"seed", "reseed", "truncate"} {
		cmd.AddCommand(seedCommand(typ, connect))
	}
	cmd.AddCommand(waitCommand(connect), tasksCommand(connect), killCommand(connect), massTruncateCommand(connect),
		importCommand(connect), exportCommand(connect))
}

type connectFunc func(*cobra.Command) (*client, error)

// unknownCommand is a word where a subcommand should be, with cobra's
// guess at the one meant.
func unknownCommand(c *cobra.Command, word string) error {
	guess := ""
	if s := c.SuggestionsFor(word); len(s) > 0 {
		guess = " (did you mean " + s[0] + "?)"
	}
	return usage("unknown command %q%s: one of seed, reseed, truncate, wait, tasks, kill, masstruncate, import, export", word, guess)
}

// noArgs refuses a word where only flags are expected, as every other
// usage error (cobra's own check would print "Error: …").
func noArgs(c *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usage("%s takes flags only, no arguments: %q", c.Name(), args[0])
	}
	return nil
}

// oneTaskID refuses anything but the one word wait takes.
func oneTaskID(c *cobra.Command, args []string) error {
	if len(args) != 1 {
		return usage("%s takes one task id (caddy tile-cache tasks lists them), %d given", c.Name(), len(args))
	}
	return nil
}

var seedShort = map[string]string{
	"seed":     "Renders the tiles of a layer that are not cached yet",
	"reseed":   "Renders the tiles of a layer again, cached or not",
	"truncate": "Deletes the cached tiles of a layer in a range",
}

func seedCommand(typ string, connect connectFunc) *cobra.Command {
	o := &seedOptions{}
	w := &waitOptions{}
	c := &cobra.Command{
		Use:   typ + " --layer <name> (--levels <z0-z1> [--bounds minx,miny,maxx,maxy] [--geometry <file>] | --tiles <file>) [--gridset <name> | --srs <code>] [--format <mime>] [--param NAME=VALUE]... [--threads <n>] [--wait]",
		Short: seedShort[typ],
		Long: seedShort[typ] + `.

Submits a ` + typ + ` task to the cache's REST interface and prints its id;
with --wait, follows it to its end: a progress bar on a terminal, a line
every --interval otherwise. The exit status then says how the task
ended: 0 done, 2 done with failed tiles, 3 aborted or killed.`,
		Example: "  caddy tile-cache " + typ + " --url https://tiles.example.com/geowebcache --user admin \\\n" +
			"      --layer topp:states --gridset EPSG:4326 --levels 0-8 --wait",
		Args: runE(noArgs),
	}
	o.addFlags(c, typ)
	o.stdin = os.Stdin
	addWaitFlags(c, w, true)
	c.RunE = runE(func(cmd *cobra.Command, _ []string) error {
		o.given = cmd.Flags().Changed
		if _, err := o.request(typ); err != nil { // flags first: no password prompt for a typo
			return err
		}
		cl, err := connect(cmd)
		if err != nil {
			return err
		}
		ctx, stop := interruptible(w.wait)
		defer stop()
		return runSeed(ctx, cl, typ, o, w, cmd.OutOrStdout(), cmd.ErrOrStderr())
	})
	return c
}

// addWaitFlags adds --wait (unless the command always waits) and --interval.
func addWaitFlags(c *cobra.Command, w *waitOptions, optional bool) {
	if optional {
		c.Flags().BoolVar(&w.wait, "wait", false, "follow the task to its end; the exit status says how it ended")
	} else {
		w.wait = true
	}
	c.Flags().DurationVar(&w.interval, "interval", 30*time.Second, "time between progress lines when the output is not a terminal")
	fd := int(os.Stdout.Fd())
	// TERM=dumb (an editor's shell, some CI logs) cannot redraw a line.
	w.terminal = term.IsTerminal(fd) && os.Getenv("TERM") != "dumb"
	w.width = func() int {
		if wd, _, err := term.GetSize(fd); err == nil && wd > 0 {
			return wd - 1 // the last column would wrap on some terminals
		}
		return 79
	}
	c.PreRunE = runE(func(*cobra.Command, []string) error {
		if w.interval <= 0 {
			return usage("--interval must be positive")
		}
		return nil
	})
}

// interruptible is the context of a command: with --wait, Ctrl-C (or a
// SIGTERM) stops following the task, which goes on on the server.
func interruptible(wait bool) (context.Context, context.CancelFunc) {
	if !wait {
		return context.WithCancel(context.Background())
	}
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

func waitCommand(connect connectFunc) *cobra.Command {
	w := &waitOptions{}
	c := &cobra.Command{
		Use:   "wait <task id>",
		Short: "Follows a task to its end",
		Long: `Follows a task already submitted to its end, as --wait does: a
progress bar on a terminal, a line every --interval otherwise; the exit
status says how the task ended (0 done, 2 done with failed tiles, 3
aborted or killed).`,
		Example: "  caddy tile-cache wait 12",
		Args:    runE(oneTaskID),
	}
	addWaitFlags(c, w, false)
	c.RunE = runE(func(cmd *cobra.Command, args []string) error {
		id, err := parseID(args[0])
		if err != nil {
			return err
		}
		cl, err := connect(cmd)
		if err != nil {
			return err
		}
		ctx, stop := interruptible(true)
		defer stop()
		return follow(ctx, cl, id, w, cmd.OutOrStdout(), cmd.ErrOrStderr())
	})
	return c
}

func tasksCommand(connect connectFunc) *cobra.Command {
	var layer string
	var raw bool
	c := &cobra.Command{
		Use:     "tasks [--layer <name>] [--json]",
		Short:   "Lists the pending and running tasks",
		Example: "  caddy tile-cache tasks\n  caddy tile-cache tasks --layer topp:states",
		Args:    runE(noArgs),
	}
	c.Flags().StringVar(&layer, "layer", "", "only the tasks of this layer")
	c.Flags().BoolVar(&raw, "json", false, "print the server's listing as it is ({\"long-array-array\":[...]})")
	c.RunE = runE(func(cmd *cobra.Command, _ []string) error {
		cl, err := connect(cmd)
		if err != nil {
			return err
		}
		return runTasks(context.Background(), cl, strings.TrimSpace(layer), raw, cmd.OutOrStdout())
	})
	return c
}

func killCommand(connect connectFunc) *cobra.Command {
	o := &killOptions{}
	c := &cobra.Command{
		Use:   "kill (<task id> | --all | --running | --pending [--layer <name>])",
		Short: "Ends a task, or every running and/or pending task",
		Long: `Ends one task by its id, or every task that is running (--running),
waiting for a worker (--pending), or both (--all), of all layers or of
--layer. A task killed ends ABORTED: whoever waits for it exits 3.`,
		Example: "  caddy tile-cache kill 12\n  caddy tile-cache kill --pending --layer topp:states",
		Args:    cobra.ArbitraryArgs, // checked with the flags, by killOptions.check
	}
	f := c.Flags()
	f.BoolVar(&o.all, "all", false, "every running and pending task")
	f.BoolVar(&o.running, "running", false, "every running task")
	f.BoolVar(&o.pending, "pending", false, "every pending task")
	f.StringVar(&o.layer, "layer", "", "only the tasks of this layer")
	c.RunE = runE(func(cmd *cobra.Command, args []string) error {
		// The arguments first: no password prompt for a typo.
		id, which, err := o.check(args)
		if err != nil {
			return err
		}
		cl, err := connect(cmd)
		if err != nil {
			return err
		}
		return runKill(context.Background(), cl, id, which, strings.TrimSpace(o.layer), cmd.OutOrStdout())
	})
	return c
}

func massTruncateCommand(connect connectFunc) *cobra.Command {
	var layer string
	c := &cobra.Command{
		Use:   "masstruncate --layer <name>",
		Short: "Deletes every cached tile of a layer",
		Long: `Deletes every cached tile of a layer: all gridsets, formats and
parameter sets. The command returns once the server has done it.`,
		Example: "  caddy tile-cache masstruncate --layer topp:states",
		Args:    runE(noArgs),
	}
	c.Flags().StringVar(&layer, "layer", "", "layer name (required)")
	c.RunE = runE(func(cmd *cobra.Command, _ []string) error {
		if strings.TrimSpace(layer) == "" {
			return usage("--layer is required")
		}
		cl, err := connect(cmd)
		if err != nil {
			return err
		}
		return runMassTruncate(context.Background(), cl, layer, cmd.OutOrStdout())
	})
	return c
}
