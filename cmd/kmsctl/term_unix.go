//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package main

import (
	"context"
	"os"

	"golang.org/x/sys/unix"
)

// isTerminal reports whether fd is a terminal.
func isTerminal(fd uintptr) bool {
	_, err := unix.IoctlGetTermios(int(fd), ioctlGetTermios)
	return err == nil
}

// readHidden reads a line from the terminal f with its echo off, and
// turns the echo back on when the line is read or ctx is done (an
// interrupt), whichever comes first.
func readHidden(ctx context.Context, f *os.File) ([]byte, error) {
	fd := int(f.Fd())
	old, err := unix.IoctlGetTermios(fd, ioctlGetTermios)
	if err != nil {
		return nil, err
	}
	quiet := *old
	quiet.Lflag &^= unix.ECHO
	quiet.Lflag |= unix.ICANON | unix.ISIG
	quiet.Iflag |= unix.ICRNL
	if err := unix.IoctlSetTermios(fd, ioctlSetTermios, &quiet); err != nil {
		return nil, err
	}
	defer unix.IoctlSetTermios(fd, ioctlSetTermios, old)
	type line struct {
		b   []byte
		err error
	}
	done := make(chan line, 1)
	go func() {
		b, err := readLine(f)
		done <- line{b, err}
	}()
	select {
	case l := <-done:
		return l.b, l.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
