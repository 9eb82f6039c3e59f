//go:build linux || darwin || freebsd || netbsd || openbsd

package diskspace

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

func TestIsNoSpace(t *testing.T) {
	wrapped := &os.PathError{Op: "write", Path: "f", Err: unix.ENOSPC}
	if !IsNoSpace(wrapped) || !IsNoSpace(unix.EDQUOT) {
		t.Error("IsNoSpace refuses ENOSPC or EDQUOT")
	}
	if IsNoSpace(unix.EIO) || IsNoSpace(nil) {
		t.Error("IsNoSpace takes EIO or nil")
	}
}
