package filetrail

import (
	"io"
	"os"
	"sync"
)

// Appending to a file changes its size, and fdatasync must then commit the
// file system's journal as well as write the data: on ext4 that is most of
// the cost of a small Append. So a goroutine keeps the newest segment
// filled with zeros, written and synced, some way ahead of its last frame
// (as PostgreSQL fills its WAL segments before use). An Append then
// overwrites blocks that exist, and its fdatasync writes the data alone.
//
// Zeros after the last frame are not a torn tail: no frame starts with 16
// zero bytes, for seqs start at 1. Open treats a newest segment that ends
// in zeros, and only zeros, as clean, and a segment is cut to its last
// frame before it is sealed, so sealed segments never hold any.

const (
	// DefaultPreallocate is Options.Preallocate when it is zero.
	DefaultPreallocate = 4 << 20

	// fillChunk is the most the filler writes, and then syncs, at once.
	fillChunk = 1 << 20
)

var zeroChunk [fillChunk]byte

// filler writes zeros ahead of the newest segment's last frame. Append
// tells it where its batch ends before writing the batch (claim); the
// filler writes only after the furthest byte claimed, and never while a
// segment is cut or sealed (hold).
type filler struct {
	ahead int64                // how far after the last frame to fill
	limit int64                // fill no segment past this size: where it is sealed
	sync  func(*os.File) error // fdatasync

	mu     sync.Mutex
	idle   sync.Cond // signalled when busy turns false
	seg    *segment  // the segment to fill; nil: none
	end    int64     // where seg's frames end, as last claimed
	filled int64     // seg holds frames or zeros up to here
	busy   bool      // zeros are being written after filled
	failed bool      // writing zeros to seg failed: no more tries on it

	wake chan struct{} // a request to fill, buffered
	stop chan struct{} // closed by close
	done chan struct{} // closed when the goroutine has returned
}

// newFiller starts a filler that fills nothing until it is given a
// segment (release). ahead <= 0 makes a filler that never writes.
func newFiller(ahead, limit int64, sync func(*os.File) error) *filler {
	f := &filler{ahead: ahead, limit: limit, sync: sync,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	f.idle.L = &f.mu
	if ahead <= 0 {
		close(f.done)
		return f
	}
	go f.run()
	return f
}

// claim records that Append is about to write seg up to end. The filler
// writes only after end from now on; if it is writing there at the moment,
// claim waits for it, so that no zero lands on a frame.
func (f *filler) claim(seg *segment, end int64) {
	f.mu.Lock()
	if f.seg == seg {
		for f.busy && end > f.filled {
			f.idle.Wait()
		}
		f.end = end
		f.filled = max(f.filled, end)
	}
	short := f.seg != nil && !f.failed && f.filled-end < f.ahead/2 && f.filled < f.limit
	f.mu.Unlock()
	if short {
		f.kick()
	}
}

// hold stops all filling, waiting for zeros being written, until release;
// the caller may then cut or seal the segment being filled.
func (f *filler) hold() {
	f.mu.Lock()
	for f.busy {
		f.idle.Wait()
	}
	f.seg = nil
	f.mu.Unlock()
}

// release makes seg, whose frames end at end and which holds frames or
// zeros up to filled, the segment to fill. Filling starts at the next
// claim: a trail that is only read is never written.
func (f *filler) release(seg *segment, end, filled int64) {
	f.mu.Lock()
	f.seg, f.end, f.filled, f.failed = seg, end, max(end, filled), false
	f.mu.Unlock()
}

// kick asks the goroutine to fill, unless it has been asked already.
func (f *filler) kick() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// close stops the goroutine and waits for it.
func (f *filler) close() {
	select {
	case <-f.stop:
	default:
		close(f.stop)
	}
	<-f.done
}

func (f *filler) run() {
	defer close(f.done)
	for {
		select {
		case <-f.stop:
			return
		case <-f.wake:
		}
		for f.fillOne() {
			select {
			case <-f.stop:
				return
			default:
			}
		}
	}
}

// fillOne writes and syncs one chunk of zeros, if the segment needs one,
// and reports whether it did.
func (f *filler) fillOne() bool {
	f.mu.Lock()
	seg, off := f.seg, f.filled
	target := min(f.end+f.ahead, f.limit)
	if seg == nil || f.failed || off >= target {
		f.mu.Unlock()
		return false
	}
	n := min(fillChunk, target-off)
	f.busy = true
	f.mu.Unlock()

	_, err := seg.f.WriteAt(zeroChunk[:n], off)
	if err == nil {
		// Sync here, so that the Append that first writes over these
		// zeros does not pay for the size change.
		err = f.sync(seg.f)
	}

	f.mu.Lock()
	f.busy = false
	if f.seg == seg {
		if err != nil {
			// Out of space, most likely. Appends extend the file as
			// they would without a filler; zeros written in part are
			// harmless, for Open takes them for what they are.
			f.failed = true
		} else {
			f.filled = max(f.filled, off+n)
		}
	}
	f.idle.Broadcast()
	f.mu.Unlock()
	return err == nil
}

// zeroTail reports whether f holds only zero bytes from off to size.
func zeroTail(f *os.File, off, size int64) (bool, error) {
	if off >= size {
		return true, nil
	}
	buf := make([]byte, min(size-off, 64<<10))
	for off < size {
		n, err := f.ReadAt(buf[:min(int64(len(buf)), size-off)], off)
		for _, b := range buf[:n] {
			if b != 0 {
				return false, nil
			}
		}
		off += int64(n)
		if err == io.EOF {
			return true, nil // shorter than Stat said: nothing after
		}
		if err != nil {
			return false, err
		}
	}
	return true, nil
}
