//go:build unix

package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestOutputNotRegular: -out names a file that is not a regular one (a
// FIFO here; /dev/null, say): it is refused, even with -force, as the
// rename that writes -out would replace it.
func TestOutputNotRegular(t *testing.T) {
	_, e := newRingServer(t, "files")
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	r := kmsctl(t, e, "data", "encrypt", "-ring", "files", "-out", fifo, "-force").want(t, 1, "encrypt onto a FIFO")
	if !strings.Contains(r.stderr, "-out "+fifo+": not a regular file") {
		t.Errorf("stderr = %q", r.stderr)
	}
	if st, err := os.Lstat(fifo); err != nil || st.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the FIFO after encrypt: %v, %v", st, err)
	}
}
