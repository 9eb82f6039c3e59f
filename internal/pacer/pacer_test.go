package pacer

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// TestPacer: the first pass runs at once; Wake brings the next; a pass
// due soon brings it without a Wake; a failed pass is logged and retried;
// Stop cancels the pass under way and ends them.
func TestPacer(t *testing.T) {
	var calls atomic.Int32
	var logged atomic.Int32
	dueSoon := make(chan bool, 10)
	p := Start(Config{
		Pass: func(ctx context.Context) (time.Time, error) {
			n := calls.Add(1)
			if n == 3 {
				return time.Time{}, errors.New("boom")
			}
			select {
			case soon := <-dueSoon:
				if soon {
					return time.Now().Add(time.Millisecond), nil
				}
			default:
			}
			return time.Time{}, nil
		},
		Poll: time.Hour, Retry: time.Millisecond, Now: time.Now,
		Log: func(error) { logged.Add(1) },
	})
	defer p.Stop()
	wait := func(n uint64) {
		t.Helper()
		for {
			got, next := p.Passes()
			if got >= n {
				return
			}
			select {
			case <-next:
			case <-time.After(10 * time.Second):
				t.Fatalf("waited for pass %d, have %d", n, got)
			}
		}
	}
	wait(1) // at once
	dueSoon <- true
	p.Wake() // pass 2, which says the next is due soon: pass 3 fails, pass 4 retries
	wait(4)
	if logged.Load() != 1 {
		t.Errorf("logged %d failures, want 1", logged.Load())
	}
	p.Stop()
	p.Stop() // twice is fine
	n := calls.Load()
	p.Wake()
	time.Sleep(10 * time.Millisecond)
	if calls.Load() != n {
		t.Errorf("a pass ran after Stop")
	}
}

// TestStopCancelsThePass: Stop cancels the context of the pass under way
// and waits for it; its error is not logged.
func TestStopCancelsThePass(t *testing.T) {
	started := make(chan struct{})
	var logged atomic.Int32
	p := Start(Config{
		Pass: func(ctx context.Context) (time.Time, error) {
			close(started)
			<-ctx.Done()
			return time.Time{}, ctx.Err()
		},
		Poll: time.Hour, Retry: time.Hour, Now: time.Now,
		Log: func(error) { logged.Add(1) },
	})
	<-started
	p.Stop()
	if logged.Load() != 0 {
		t.Errorf("the cancelled pass's error was logged")
	}
}
