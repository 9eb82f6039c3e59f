package pgstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/pgtest"
)

// TestExclusive: while an Exclusive Store is open, a second Store on the
// same database, Exclusive or not, is refused (Conflict); while a Store
// that is not Exclusive is open (a kmsd node), an Exclusive one is; each
// opens once the other is closed.
func TestExclusive(t *testing.T) {
	u := pgtest.URL(t)
	refused := func(what string, opts Options, want string) {
		t.Helper()
		st, err := Open(context.Background(), u, opts)
		if err == nil {
			st.Close()
			t.Fatalf("%s = nil error, want Conflict", what)
		}
		if kms.ErrorKind(err) != kms.KindConflict || !strings.Contains(err.Error(), want) {
			t.Fatalf("%s = %v, want Conflict saying %q", what, err, want)
		}
	}
	first := openStore(t, u, Options{Exclusive: true})
	refused("a second Exclusive Open", Options{Exclusive: true}, "another process has this database open")
	refused("Open beside an Exclusive Store", Options{}, "kmsd rekey or migrate holds this database")
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	node := openStore(t, u, Options{})
	openStore(t, u, Options{}).Close() // Stores that are not Exclusive share the database
	refused("Exclusive Open beside a Store", Options{Exclusive: true}, "another process has this database open")
	if err := node.Close(); err != nil {
		t.Fatal(err)
	}
	openStore(t, u, Options{Exclusive: true}).Close()
}

// TestOpenWaitsForALockLetGo: a Store opens when the lock another
// process held is let go within holdGrace (a session whose connection was
// closed under it keeps its locks until the server sees it end), and one
// Exclusive Open waits the same way for a Store that is closing.
func TestOpenWaitsForALockLetGo(t *testing.T) {
	u := pgtest.URL(t)
	ctx := context.Background()
	other, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(ctx)
	if _, err := other.Exec(ctx, "SELECT pg_advisory_lock($1)", int64(exclusiveLock)); err != nil {
		t.Fatal(err)
	}
	unlocked := make(chan struct{})
	go func() {
		defer close(unlocked)
		time.Sleep(holdGrace / 4)
		other.Exec(ctx, "SELECT pg_advisory_unlock_all()")
	}()
	st := openStore(t, u, Options{}) // fails at once without the grace
	<-unlocked                       // other is the goroutine's until then
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		time.Sleep(holdGrace / 4)
		st.Close()
	}()
	openStore(t, u, Options{Exclusive: true}).Close()
	<-closed
}

// TestDisplaced: a Store whose Watch connection is lost while an
// Exclusive Store takes the database (kmsd rekey run while the node was
// cut off) refuses every write from then on, even after the Exclusive
// Store is closed, while a Store that took the lock back at once goes on.
func TestDisplaced(t *testing.T) {
	u := pgtest.URL(t)
	s := openStore(t, u, Options{})
	stop := s.Watch([][]byte{[]byte("w/")}, func([][]byte) {})
	defer stop()
	setKey(t, s, "k", "v")
	c := sqlConn(t, u)
	// Cut the Store's Watch connection, which holds its share of the
	// lock, and take the lock exclusively before it is back.
	deadline := time.Now().Add(10 * time.Second)
	for {
		exec(t, c, "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND mode = 'ShareLock' AND pid <> pg_backend_pid()")
		var got bool
		if err := c.QueryRow(t.Context(), "SELECT pg_try_advisory_lock($1)", int64(exclusiveLock)).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the Store's shared lock was never let go")
		}
	}
	// The Watch connects again, finds the lock taken and displaces the
	// Store.
	for !s.hold.displaced.Load() {
		if time.Now().After(deadline) {
			t.Fatal("the Store was not displaced")
		}
		time.Sleep(10 * time.Millisecond)
	}
	exec(t, c, "SELECT pg_advisory_unlock($1)", int64(exclusiveLock))
	err := s.Update(t.Context(), func(tx kms.Txn) error { return tx.Set([]byte("k"), []byte("w")) })
	wantKind(t, "Update of a displaced Store", err, kms.KindUnavailable)
	if !strings.Contains(err.Error(), "restart kmsd") {
		t.Errorf("Update of a displaced Store = %v, want a message saying to restart kmsd", err)
	}
	wantKind(t, "Writable of a displaced Store", s.Writable(t.Context()), kms.KindUnavailable)
	wantKind(t, "Append of a displaced Store", s.Trail().Append([][]byte{[]byte("r")}), kms.KindUnavailable)
	if got, err := getKey(t, s, "k"); err != nil || string(got) != "v" {
		t.Errorf("k = %q, %v after the refused Update; want v", got, err)
	}
}
