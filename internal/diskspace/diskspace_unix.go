//go:build linux || darwin || freebsd || netbsd || openbsd

package diskspace

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// Free returns the bytes of the file system holding dir that an
// unprivileged process may still write.
func Free(dir string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return uint64(st.Bavail) * uint64(st.Bsize), nil
}

func isNoSpace(err error) bool {
	return errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT)
}

func fallocate(f *os.File, size int64) error { return fallocateFile(f, size) }
