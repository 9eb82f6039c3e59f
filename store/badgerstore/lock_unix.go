//go:build linux || darwin || freebsd || netbsd || openbsd

package badgerstore

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// inUse reports whether another process holds Badger's lock on dir, so
// that Open can say so in a kms error rather than in Badger's words.
// Badger flocks the directory itself while a database is open (its file
// LOCK only holds the owner's pid, and stays behind after a crash).
func inUse(dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return false
	}
	defer f.Close()
	err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if err == nil {
		unix.Flock(int(f.Fd()), unix.LOCK_UN)
		return false
	}
	return errors.Is(err, unix.EWOULDBLOCK)
}
