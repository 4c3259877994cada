package command

import (
	"io"
	"os"
	"os/signal"
	"syscall"

	"golang.org/x/term"
)

// askPassword asks for the password on the terminal fd. Echo goes off
// before the prompt is written, not after as term.ReadPassword alone
// would: what is typed or pasted as soon as the prompt shows (or before
// it, once the command runs) is not shown on the screen, however late
// the process gets to the read. The terminal is put back as it was when
// the line is read, when reading fails, and when a signal (Ctrl-C) ends
// the command at the prompt.
func askPassword(fd int, prompt string, stderr io.Writer) (string, error) {
	restore, err := echoOff(fd)
	if err != nil {
		return "", usage("reading the password: %v", err)
	}
	defer restoreOnSignal(restore)()
	defer restore()
	io.WriteString(stderr, prompt)
	b, err := term.ReadPassword(fd) // echo is already off: it only reads the line
	io.WriteString(stderr, "\n")    // the Enter was not echoed either
	if err != nil {
		return "", usage("reading the password: %v", err)
	}
	return string(b), nil
}

// restoreOnSignal runs restore when a signal that ends the process comes,
// then lets the signal end it as it would have; the returned function
// stops watching.
func restoreOnSignal(restore func()) (stop func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-sigs:
			restore()
			signal.Reset(sig)
			if p, err := os.FindProcess(os.Getpid()); err == nil && p.Signal(sig) == nil {
				select {} // the signal ends the process
			}
			os.Exit(ExitInterrupted) // where a process cannot signal itself
		case <-done:
		}
	}()
	return func() {
		signal.Stop(sigs)
		close(done)
	}
}
