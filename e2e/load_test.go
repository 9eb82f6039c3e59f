package e2e

import (
	"sync"
	"sync/atomic"
)

// loop is goroutines of a load, each of which makes calls over and over
// until the load is halted.
type loop struct {
	halted atomic.Bool
	wg     sync.WaitGroup
}

// run starts a goroutine that calls step(n), for n = 0, 1, ..., until the
// loop is halted or step returns false.
func (l *loop) run(step func(n int) bool) {
	l.wg.Go(func() {
		for n := 0; !l.halted.Load() && step(n); n++ {
		}
	})
}

// halt stops the goroutines, once the calls under way are answered.
func (l *loop) halt() {
	l.halted.Store(true)
	l.wg.Wait()
}

// each runs fn(i) for every i in [0, n) with a few concurrent callers.
func each(n int, fn func(i int)) { eachBy(8, n, func(_, i int) { fn(i) }) }

// eachBy runs fn(w, i) for every i in [0, n), spread over callers w in
// [0, workers) that run concurrently.
func eachBy(workers, n int, fn func(w, i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				fn(w, int(i))
			}
		})
	}
	wg.Wait()
}
