package command

import (
	"errors"
	"fmt"
	"io"
	"strings"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"
)

// The exit statuses of every subcommand (docs/command-line.md has the
// table). A cron job or script tells the outcomes apart by them: what a
// retry may fix (4, 6) from what it will not (1, 5), and a task that
// ended badly (2, 3) from a command that failed.
const (
	ExitOK          = 0   // done; with --wait: the task ended DONE with no failed tile
	ExitUsage       = 1   // bad flags or arguments, an unreadable password or CA file
	ExitFailedTiles = 2   // --wait: the task ended DONE but some tiles failed
	ExitAborted     = 3   // --wait: the task was ABORTED (killed, or too many failures)
	ExitUnreachable = 4   // no answer: connection, DNS, TLS or timeout
	ExitRefused     = 5   // the server refused: 4xx (400, 401, 403, 404, 409…), or not the REST interface
	ExitUnavailable = 6   // the server cannot now: 429, 503 or another 5xx; try again later
	ExitInterrupted = 130 // --wait: interrupted (Ctrl-C); the task goes on
)

// exitError is an error that says which status the command exits with.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func fail(code int, format string, a ...any) error {
	return &exitError{code: code, msg: fmt.Sprintf(format, a...)}
}

// usage is a mistake on the command line.
func usage(format string, a ...any) error { return fail(ExitUsage, format, a...) }

// codeOf is the exit status an error of a subcommand stands for.
func codeOf(err error) int {
	if err == nil {
		return ExitOK
	}
	var e *exitError
	if errors.As(err, &e) {
		return e.code
	}
	return ExitUsage
}

// report writes err as the one line on stderr that a person or a cron
// mail reads: no stack, no log prefix, no second line from the server.
func report(stderr io.Writer, err error) {
	msg := strings.Join(strings.Fields(err.Error()), " ")
	fmt.Fprintln(stderr, "tile-cache: "+msg)
}

// runE adapts a subcommand to cobra: the error becomes one line on stderr
// and the exit status its code. The same signature serves cobra's Args
// and PreRunE, so that a mistake cobra itself would report (an argument
// too many, a bad --interval) reads as every other.
func runE(run func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		return finish(cmd, args, run(cmd, args))
	}
}

// finish reports err, if any, and hands cobra what makes Caddy's Main exit
// with its code. Main exits with a status above 1 only for an error from
// caddycmd.WrapCommandFuncForCobra, so the status goes through it; its own
// logging of the error is bypassed (the line is already written) by handing
// it a nil error. Cobra's own "Error: …" line and usage are silenced.
func finish(cmd *cobra.Command, args []string, err error) error {
	if err == nil {
		return nil
	}
	cmd.SilenceErrors = true
	cmd.SilenceUsage = true
	var e *exitError
	if !errors.As(err, &e) || e.msg != "" {
		report(cmd.ErrOrStderr(), err)
	}
	code := codeOf(err)
	if code <= 1 {
		return err // Main exits 1 for any other error
	}
	return caddycmd.WrapCommandFuncForCobra(func(caddycmd.Flags) (int, error) { return code, nil })(cmd, args)
}
