package throttle

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringkms/kms/internal/base"
	"github.com/ringkms/kms/internal/base/basetest"
)

var prefix = []byte("throttle/")

// newSet returns throttles over st whose log fails the test, waited for
// at the end of the test.
func newSet(t *testing.T, st base.Store) *Set {
	t.Helper()
	s := New(st, prefix, [32]byte{1}, func(err error, msg string) { t.Errorf("throttle logged %s: %v", msg, err) })
	t.Cleanup(s.Wait)
	return s
}

// login runs a login attempt of user from addr at now, which fails unless
// ok, and reports whether the throttles let it through.
func login(t *testing.T, s *Set, user, addr string, now time.Time, ok bool) bool {
	t.Helper()
	ctx := context.Background()
	a, _, err := s.BeginLogin(ctx, "u/"+user, addr, now)
	if err != nil {
		t.Fatalf("BeginLogin(%s, %s) = %v", user, addr, err)
	}
	if a == nil {
		return false
	}
	a.End(ctx, now, !ok)
	return true
}

func TestSweep(t *testing.T) {
	st := basetest.NewMemStore()
	s := newSet(t, st)
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	attempt := func(user string, ok bool) bool {
		t.Helper()
		allowed := login(t, s, user, "", now, ok)
		s.Wait()
		return allowed
	}
	counts := func() int {
		n := 0
		err := st.View(context.Background(), func(tx base.Txn) error {
			return tx.Scan(base.ScanOptions{Prefix: prefix, KeysOnly: true}, func(k, _ []byte) (bool, error) {
				n++
				return true, nil
			})
		})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	attempt("once", false) // the first failure sweeps at once: nothing to sweep
	for range 5 {
		attempt("locked", false)
	}
	if got := counts(); got != 2 {
		t.Fatalf("counts = %d, want 2", got)
	}
	now = now.Add(16 * time.Minute)
	attempt("later", false) // sweeps: "once" is idle, "locked" was locked out within a day
	if got := counts(); got != 2 {
		t.Fatalf("counts after the sweep = %d, want 2 (locked, later)", got)
	}
	for range 5 { // the second lockout lasts twice as long: the sweep kept the first
		attempt("locked", false)
	}
	now = now.Add(16 * time.Minute)
	if attempt("locked", true) {
		t.Fatal("the second lockout ended after 16 minutes, want 30")
	}
	now = now.Add(15 * time.Minute)
	if !attempt("locked", true) {
		t.Fatal("the second lockout did not end after 31 minutes")
	}
	// A success deletes the count; the sweep two days on, the others.
	now = now.Add(48 * time.Hour)
	attempt("last", false)
	if got := counts(); got != 1 {
		t.Fatalf("counts after the sweep two days on = %d, want 1 (last)", got)
	}
}

// refusingStore is a Store whose Update fails while refuse is set.
type refusingStore struct {
	base.Store
	refuse atomic.Bool
}

func (s *refusingStore) Update(ctx context.Context, fn func(base.Txn) error) error {
	if s.refuse.Load() {
		return errors.New("the store refuses writes")
	}
	return s.Store.Update(ctx, fn)
}

func TestStoreRefusesCount(t *testing.T) {
	st := basetest.NewMemStore()
	refusing := &refusingStore{Store: st}
	var logged atomic.Int32
	node := New(refusing, prefix, [32]byte{1}, func(error, string) { logged.Add(1) })
	t.Cleanup(node.Wait)
	other := newSet(t, st)
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

	refusing.refuse.Store(true)
	for i := range 5 {
		if !login(t, node, "ada", "", now, false) {
			t.Fatalf("failure #%d refused", i+1)
		}
	}
	if got := logged.Load(); got != 5 {
		t.Errorf("logged %d errors, want one per failure not counted (5)", got)
	}
	if login(t, node, "ada", "", now, true) {
		t.Error("the node let the User in after 5 failures that the store did not take")
	}

	// Failures not counted join the store's count with the next one it
	// takes: 3 refused, then 2 taken, lock the User out on every node.
	for range 3 {
		login(t, node, "bob", "", now, false)
	}
	refusing.refuse.Store(false)
	for range 2 {
		login(t, node, "bob", "", now, false)
	}
	if login(t, other, "bob", "", now, true) {
		t.Error("another node let the User in after 3 failures not counted and 2 counted")
	}
}
