// Package workers runs functions on goroutines of their own, a bounded
// number at once, and waits for them.
package workers

import "sync"

// Pool runs functions on goroutines of their own, at most n at once (New),
// and waits for them.
type Pool struct {
	slots chan struct{}
	wg    sync.WaitGroup
}

// New returns a Pool that runs at most n functions at once.
func New(n int) *Pool { return &Pool{slots: make(chan struct{}, n)} }

// TryGo runs f on a goroutine, unless n are busy: then it
// reports false.
func (w *Pool) TryGo(f func()) bool {
	select {
	case w.slots <- struct{}{}:
	default:
		return false
	}
	w.wg.Add(1)
	go func() {
		defer func() {
			<-w.slots
			w.wg.Done()
		}()
		f()
	}()
	return true
}

// Wait waits for the functions under way.
func (w *Pool) Wait() { w.wg.Wait() }
