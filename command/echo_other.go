//go:build !(aix || darwin || dragonfly || freebsd || linux || netbsd || openbsd || solaris || zos)

package command

// echoOff leaves the echo to term.ReadPassword where there are no termios
// (Windows): a console echoes what a read takes as it takes it, so typing
// ahead of the read is not shown before echo goes off.
func echoOff(int) (restore func(), err error) { return func() {}, nil }
