//go:build linux || darwin || freebsd || netbsd || openbsd

package badgerstore

import (
	"errors"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// inUse reports whether another process holds Badger's lock on dir (the
// file LOCK, which Badger flocks while a database is open), so that Open
// can say so in a kms error rather than in Badger's words.
func inUse(dir string) bool {
	f, err := os.Open(filepath.Join(dir, "LOCK"))
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
