package diskspace

import (
	"os"

	"golang.org/x/sys/unix"
)

func fallocateFile(f *os.File, size int64) error {
	for {
		err := unix.Fallocate(int(f.Fd()), 0, 0, size)
		if err != unix.EINTR {
			return err
		}
	}
}
