// Package diskspace keeps a store from filling its file system: a Guard
// says whether a write may go ahead, and refuses once the file system has
// less free space than a reserve.
//
// # Why a reserve
//
// Badger writes its write-ahead log, its tables and its value log through
// memory maps of files that it sizes with ftruncate, so their blocks are
// allocated only when a page is first written. On a full file system that
// first write cannot be refused as a write(2) is: the kernel sends SIGBUS,
// and the process dies. So a store must stop writing while the file
// system still has room for what Badger does after the last write it was
// given: flushing its memtables into tables and compacting them. The
// reserve is that room.
//
// # The held part of the reserve
//
// Free space is shared with every other program on the file system. So
// that another program cannot take the room Badger needs, a Guard with a
// ballast file holds a quarter of the reserve (BallastFraction) in that
// file, allocated, while writes go ahead. When free space falls below the
// reserve, the Guard refuses writes and deletes the ballast, giving its
// room to Badger's background work and to the store's next start (which
// itself writes through memory maps). Writes go ahead again once the file
// system has room for the reserve and the ballast both, and the ballast is
// taken back first.
package diskspace

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/ringkms/kms/internal/base"
)

// BallastFraction is the part of the reserve a Guard holds in its ballast
// file: reserve / BallastFraction bytes.
const BallastFraction = 4

// Guard says whether a write to one file system may go ahead. It is safe
// for concurrent use.
type Guard struct {
	dir     string
	reserve uint64
	ballast string // path of the ballast file; "" for none
	size    int64  // of the ballast

	// free returns the free bytes of the file system holding dir (Free;
	// tests replace it).
	free func(dir string) (uint64, error)

	mu   sync.Mutex
	held bool // the ballast file exists with its size
}

// New returns a Guard that refuses writes while the file system holding
// dir has less than reserve bytes free. With ballast set (a file name
// inside dir), it holds part of the reserve in that file (see the package
// documentation); the file is created, or deleted, by Check. A reserve of
// zero or less turns the Guard off: Check always answers nil.
func New(dir string, reserve int64, ballast string) *Guard {
	g := &Guard{dir: dir, free: Free}
	if reserve <= 0 {
		return g
	}
	g.reserve = uint64(reserve)
	if ballast != "" {
		g.ballast = ballast
		g.size = reserve / BallastFraction
		if fi, err := os.Stat(ballast); err == nil && fi.Mode().IsRegular() && fi.Size() == g.size {
			g.held = true
		}
	}
	return g
}

// Reserve returns the reserve in bytes (0 when the Guard is off).
func (g *Guard) Reserve() int64 { return int64(g.reserve) }

// Check returns nil when a write may go ahead now, and otherwise an error
// of kind NoSpace that says so, with the free space and the reserve in its
// Err for the log. It does no I/O but a statfs, except when it deletes
// the ballast (the file system went below the reserve) or takes it back
// (it has room again). When the free space cannot be read, Check lets the
// write go ahead: the write itself then reports what is wrong.
func (g *Guard) Check() error {
	if g.reserve == 0 {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	free, err := g.free(g.dir)
	if err != nil {
		return nil
	}
	if g.held || g.ballast == "" {
		if free >= g.reserve {
			return nil
		}
		g.release()
		return g.full(free)
	}
	// The ballast was given up: take it back once the file system has
	// room for it and the reserve.
	if free < g.reserve+uint64(g.size) {
		return g.full(free)
	}
	if err := g.take(); err != nil {
		return g.full(free)
	}
	return nil
}

// Release deletes the ballast, so that what follows (opening Badger on a
// full file system) has its room. Check takes it back when it can.
func (g *Guard) Release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.release()
}

func (g *Guard) release() {
	if g.ballast == "" {
		return
	}
	if err := os.Remove(g.ballast); err == nil || errors.Is(err, os.ErrNotExist) {
		g.held = false
	}
}

// take creates the ballast file with its size allocated.
func (g *Guard) take() error {
	f, err := os.OpenFile(g.ballast, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	err = allocate(f, g.size)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(g.ballast)
		return err
	}
	g.held = true
	return nil
}

func (g *Guard) full(free uint64) error {
	return &base.Error{Kind: base.KindNoSpace,
		Message: "insufficient storage: the service's disk is full; writes are refused until space is freed",
		Err:     fmt.Errorf("file system of %s has %d bytes free, below the reserve of %d", g.dir, free, g.reserve)}
}

// allocate gives f size bytes of allocated blocks: fallocate where the
// file system has it, else zeros written.
func allocate(f *os.File, size int64) error {
	if err := fallocate(f, size); err == nil {
		return nil
	}
	zeros := make([]byte, 1<<20)
	for off := int64(0); off < size; off += int64(len(zeros)) {
		n := min(int64(len(zeros)), size-off)
		if _, err := f.WriteAt(zeros[:n], off); err != nil {
			return err
		}
	}
	return nil
}

// IsNoSpace reports whether err is the operating system's "no space left
// on device" (or a quota exceeded), however wrapped.
func IsNoSpace(err error) bool { return isNoSpace(err) }
