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
