package journal_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ringkms/kms/internal/base"
	"github.com/ringkms/kms/internal/journal"
)

// bounded is a store that says its writes answer within stallBound.
type bounded struct{ base.Store }

const stallBound = 100 * time.Millisecond

func (bounded) Bound() time.Duration { return stallBound }

// stall submits to j the job "stalled", whose mutation waits, as a
// commit waits for a silent database, until release is called, and
// returns once the mutation runs: the job's outcome comes on stalled.
func stall(j *journal.Journal[*rec]) (stalled <-chan error, release func()) {
	running, released := make(chan struct{}), make(chan struct{})
	out := make(chan error, 1)
	go func() {
		out <- j.Submit(&journal.Job[*rec]{Rec: &rec{Action: "stalled"}, Mutate: func(w base.Txn) error {
			close(running)
			<-released
			return w.Set([]byte("stalled"), []byte("1"))
		}})
	}()
	<-running
	return out, sync.OnceFunc(func() { close(released) })
}

// wantUnwritten waits for the answer of the call what on ch, which must
// come within 10 stallBounds, Unavailable, and say that nothing of the
// call was written.
func wantUnwritten(t *testing.T, ch <-chan error, what string) {
	t.Helper()
	select {
	case err := <-ch:
		if !errors.Is(err, base.ErrUnavailable) || !strings.Contains(base.ErrorMessage(err), "nothing of this call was written") {
			t.Errorf("%s = %v, want Unavailable saying nothing was written", what, err)
		}
	case <-time.After(10 * stallBound):
		t.Fatalf("%s still waits after %v", what, 10*stallBound)
	}
}

// TestStall: while a batch takes longer than the store's bound (its
// mutation waits here, as a commit waits for a silent database), the jobs
// behind it are answered Unavailable, those queued before and those
// submitted after, and Health says so; the stalled job itself waits for
// its outcome. Once the batch ends, the journal writes again.
func TestStall(t *testing.T) {
	st := openStore(t)
	j := start(t, bounded{st})
	defer j.Close()
	stalled, release := stall(j)
	// Queued before the stall shows: the watcher answers it.
	queued := make(chan error, 1)
	go func() {
		queued <- j.Submit(&journal.Job[*rec]{Rec: &rec{Action: "queued"}, Mutate: func(w base.Txn) error { return w.Set([]byte("queued"), nil) }})
	}()
	wantUnwritten(t, queued, "Submit queued behind a stalled batch")
	if err := j.Health(); !errors.Is(err, base.ErrUnavailable) {
		t.Errorf("Health() while stalled = %v, want Unavailable", err)
	}
	if err := j.Submit(&journal.Job[*rec]{Rec: &rec{Action: "after"}}); !errors.Is(err, base.ErrUnavailable) {
		t.Errorf("Submit while stalled = %v, want Unavailable", err)
	}
	select {
	case err := <-stalled:
		t.Fatalf("the stalled job was answered %v before its batch ended", err)
	default:
	}

	release()
	if err := <-stalled; err != nil {
		t.Fatalf("the stalled job once its batch ends = %v, want nil", err)
	}
	if err := j.Health(); err != nil {
		t.Errorf("Health() after the stall = %v", err)
	}
	if err := j.Submit(&journal.Job[*rec]{Rec: &rec{Action: "later"}}); err != nil {
		t.Errorf("Submit after the stall = %v", err)
	}
	if get(t, st, "stalled") != "1" || get(t, st, "queued") != "" {
		t.Errorf("after the stall the store holds stalled=%q queued=%q; want the stalled job's write alone", get(t, st, "stalled"), get(t, st, "queued"))
	}
	// The stalled job's record and the later one's: those answered
	// Unavailable left none.
	if n := st.Trail().Len(); n != 2 {
		t.Errorf("the trail holds %d records, want 2", n)
	}
}

// TestLockStall: a caller waiting for a Lock whose holder waits in a
// stalled batch gives up with the stall's error, as a job queued behind
// that batch is answered, and one that comes while the writer is stalled
// gives up at once; the holder keeps the lock, and once the batch ends
// the lock is taken as a mutex is.
func TestLockStall(t *testing.T) {
	st := openStore(t)
	j := start(t, bounded{st})
	defer j.Close()
	l := journal.NewLock()
	if err := j.Lock(l); err != nil {
		t.Fatalf("Lock of a free lock = %v", err)
	}
	stalled, let := stall(j) // the holder's write meets a silent store
	defer let()              // before Close, which waits for the stalled job
	waiting := make(chan error, 1)
	go func() { waiting <- j.Lock(l) }()
	wantUnwritten(t, waiting, "Lock held by a stalled write")
	if err := j.Lock(l); !errors.Is(err, base.ErrUnavailable) {
		t.Errorf("Lock while the writer is stalled = %v, want Unavailable at once", err)
	}
	let()
	if err := <-stalled; err != nil {
		t.Fatalf("the stalled job once its batch ends = %v, want nil", err)
	}
	taken := make(chan error, 1)
	go func() { taken <- j.Lock(l) }()
	select {
	case err := <-taken:
		t.Fatalf("Lock held by another = %v before it was let go", err)
	case <-time.After(2 * stallBound):
	}
	l.Unlock()
	if err := <-taken; err != nil {
		t.Fatalf("Lock once let go = %v, want nil", err)
	}
	l.Unlock()
}
