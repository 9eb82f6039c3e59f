//go:build !linux

package main

import "errors"

// socketOwner returns the process ID of the process that listens on the
// Unix socket at path; Linux alone tells it (SO_PEERCRED).
func socketOwner(path string) (int, error) {
	return 0, errors.New("the owner of a Unix socket is known on Linux only")
}
