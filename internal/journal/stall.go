package journal

import (
	"fmt"
	"time"

	"github.com/ringkms/kms/internal/base"
)

// A stalled writer: when the store answers its writes within a bound
// (Config.StallAfter, from a base.Bounded store), a batch that has taken
// longer has met a store that went silent, or one that is settling a
// commit whose answer was lost (the database out of reach). The jobs of
// that batch wait for its outcome: answering them before it is known
// would be a guess. The jobs behind it are another matter: they were not
// run, so they can be told so at once. While the batch is stalled, Submit
// answers Unavailable without queueing, a watcher answers the jobs queued
// before the stall was seen the same way, and Health reports it.

// stallCheck is how often, as a fraction of the bound, the watcher looks.
const stallCheck = 10

// busy marks the start of a batch's commit; idle its end.
func (j *Journal[R]) busy() { j.busySince.Store(time.Now().UnixNano()) }
func (j *Journal[R]) idle() { j.busySince.Store(0) }

// A Lock is a mutex that the callers of writes take in turn before they
// submit them (the rotations of one ring, the reservations of one
// counter): its holder may wait in the journal, for as long as a batch
// whose commit met a silent store waits for its outcome. Journal.Lock
// takes it, or gives up with the stall's error once the writer counts as
// stalled, so that a caller waiting for the lock is answered as one
// waiting in the queue is, rather than held until the network is back.
// NewLock makes one.
type Lock struct{ ch chan struct{} }

// NewLock returns a Lock that nobody holds.
func NewLock() *Lock { return &Lock{ch: make(chan struct{}, 1)} }

// Take takes l, however long it waits: for a caller with no journal to
// give up with (Journal.Lock is the one that gives up).
func (l *Lock) Take() { l.ch <- struct{}{} }

// Unlock lets go of l, which the caller holds.
func (l *Lock) Unlock() { <-l.ch }

// Lock takes l and returns nil (the caller then holds it, until Unlock),
// or returns the error of a stalled writer, without l, when the writer
// counts as stalled before l is free.
func (j *Journal[R]) Lock(l *Lock) error {
	select {
	case l.ch <- struct{}{}:
		return nil
	default:
	}
	for {
		// Loaded before the stall is looked at: a stall that begins
		// after the look closes this very channel.
		stalled := *j.stalled.Load()
		if e := j.stall(); e != nil {
			return e
		}
		select {
		case l.ch <- struct{}{}:
			return nil
		case <-stalled:
		}
	}
}

// stallSeen wakes the callers waiting in Lock: the writer counts as
// stalled. The next waiters wait on a new channel.
func (j *Journal[R]) stallSeen() {
	old := j.stalled.Load()
	next := make(chan struct{})
	if j.stalled.CompareAndSwap(old, &next) {
		close(*old)
	}
}

// stall returns the error of a stalled writer, or nil.
func (j *Journal[R]) stall() *base.Error {
	bound := j.cfg.StallAfter
	if bound <= 0 {
		return nil
	}
	since := j.busySince.Load()
	if since == 0 {
		return nil
	}
	took := time.Since(time.Unix(0, since))
	if took <= bound {
		return nil
	}
	return &base.Error{Kind: base.KindUnavailable,
		Message: fmt.Sprintf("service unavailable: the store has not answered a batch of writes for %v (the database does not answer); nothing of this call was written", took.Round(time.Millisecond))}
}

// watchStalls answers, with the stall's error, the jobs that wait in the
// queue while the writer is stalled, until quit is closed.
func (j *Journal[R]) watchStalls(quit <-chan struct{}) {
	tick := time.NewTicker(j.cfg.StallAfter / stallCheck)
	defer tick.Stop()
	for {
		select {
		case <-quit:
			return
		case <-tick.C:
		}
		if j.stall() != nil {
			j.stallSeen()
		}
	drain:
		for e := j.stall(); e != nil; e = j.stall() {
			select {
			case jb, ok := <-j.jobs:
				if !ok {
					return
				}
				reply([]*Job[R]{jb}, e)
			default:
				break drain
			}
		}
	}
}
