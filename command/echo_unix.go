//go:build aix || darwin || dragonfly || freebsd || linux || netbsd || openbsd || solaris || zos

package command

import "golang.org/x/sys/unix"

// echoOff puts the terminal fd in the mode term.ReadPassword reads in
// (lines, signals, no echo) and returns what puts it back as it was.
func echoOff(fd int) (restore func(), err error) {
	was, err := unix.IoctlGetTermios(fd, ioctlGetTermios)
	if err != nil {
		return nil, err
	}
	quiet := *was
	quiet.Lflag &^= unix.ECHO
	quiet.Lflag |= unix.ICANON | unix.ISIG
	quiet.Iflag |= unix.ICRNL
	if err := unix.IoctlSetTermios(fd, ioctlSetTermios, &quiet); err != nil {
		return nil, err
	}
	return func() { unix.IoctlSetTermios(fd, ioctlSetTermios, was) }, nil
}
