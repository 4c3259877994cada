//go:build aix || linux || solaris || zos

package command

import "golang.org/x/sys/unix"

// The termios requests of Linux and the System V heirs (those of
// golang.org/x/term).
const (
	ioctlGetTermios = unix.TCGETS
	ioctlSetTermios = unix.TCSETS
)
