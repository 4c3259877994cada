//go:build darwin || dragonfly || freebsd || netbsd || openbsd

package command

import "golang.org/x/sys/unix"

// The termios requests of the BSDs (those of golang.org/x/term).
const (
	ioctlGetTermios = unix.TIOCGETA
	ioctlSetTermios = unix.TIOCSETA
)
