//go:build !linux

package diskspace

import (
	"errors"
	"os"
)

func fallocateFile(*os.File, int64) error { return errors.ErrUnsupported }
