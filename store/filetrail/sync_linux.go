package filetrail

import (
	"os"

	"golang.org/x/sys/unix"
)

// fdatasync flushes f's data, and the metadata needed to read it back
// (its size), to stable storage: it is fsync without the timestamps.
func fdatasync(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	if cerr := rc.Control(func(fd uintptr) {
		for {
			if err = unix.Fdatasync(int(fd)); err != unix.EINTR {
				return
			}
		}
	}); cerr != nil {
		return cerr
	}
	if err != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
	}
	return nil
}
