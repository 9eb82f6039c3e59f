//go:build !linux

package filetrail

import "os"

// fdatasync is f.Sync outside Linux, where the package does not call
// fdatasync(2); see sync_linux.go.
func fdatasync(f *os.File) error { return f.Sync() }
