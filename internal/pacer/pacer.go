// Package pacer runs a pass of background work on a goroutine of its own,
// again when the work says its next is due, when woken, at least every
// Poll, and Retry after a pass that failed: the pace of the Service's key
// destructions at their time.
package pacer

import (
	"context"
	"sync"
	"time"
)

// Pass does one pass of the work and returns when the next is due (zero:
// nothing is scheduled; the next pass comes at Poll or when woken).
type Pass func(ctx context.Context) (next time.Time, err error)

// Config is what a Pacer runs.
type Config struct {
	Pass  Pass
	Poll  time.Duration // the longest wait between two passes
	Retry time.Duration // the wait after a pass that failed
	Now   func() time.Time
	// Log gets the error of a pass that failed (the next pass tries
	// again), unless the Pacer is stopping.
	Log func(err error)
}

// Pacer runs the passes; Stop ends them.
type Pacer struct {
	kick chan struct{} // look again
	done chan struct{} // closed by Stop
	wg   sync.WaitGroup
	stop func()

	mu     sync.Mutex
	passes uint64        // passes finished
	passed chan struct{} // closed and replaced after each pass
}

// Start starts the passes, the first at once.
func Start(cfg Config) *Pacer {
	p := &Pacer{kick: make(chan struct{}, 1), done: make(chan struct{}), passed: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			next, err := cfg.Pass(ctx)
			wait := cfg.Poll
			switch {
			case err != nil:
				if ctx.Err() != nil {
					return
				}
				cfg.Log(err)
				wait = cfg.Retry
			case !next.IsZero():
				wait = min(wait, max(next.Sub(cfg.Now()), 0))
			}
			p.mu.Lock()
			p.passes++
			close(p.passed)
			p.passed = make(chan struct{})
			p.mu.Unlock()
			t := time.NewTimer(wait)
			select {
			case <-p.done:
				t.Stop()
				return
			case <-p.kick:
			case <-t.C:
			}
			t.Stop()
		}
	}()
	var once sync.Once
	p.stop = func() {
		once.Do(func() {
			close(p.done)
			cancel()
		})
		p.wg.Wait()
	}
	return p
}

// Wake asks for a pass now (something was scheduled): the pass under way,
// if any, is followed by another at once.
func (p *Pacer) Wake() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// Stop ends the passes, cancelling the one under way, and waits for it.
// It may be called more than once.
func (p *Pacer) Stop() { p.stop() }

// Passes returns how many passes have finished, and a channel closed when
// the next one finishes.
func (p *Pacer) Passes() (uint64, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.passes, p.passed
}
