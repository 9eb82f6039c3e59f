//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package main

import (
	"context"
	"errors"
	"os"
)

// isTerminal reports false: kmsctl tells terminals apart on Unix only,
// and elsewhere reads a password as a line of standard input.
func isTerminal(fd uintptr) bool { return false }

// readHidden is not available here: isTerminal never holds.
func readHidden(ctx context.Context, f *os.File) ([]byte, error) {
	return nil, errors.New("reading a password without echo is not supported on this system")
}
