package pgstore

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/netproxy"
	"github.com/ringkms/kms/internal/pgtest"
)

// appendCounter appends one record numbered after the counter it keeps
// in the store, as the kms journal numbers its records; hold, if not nil,
// runs inside the transaction, after its first read.
func appendCounter(t *testing.T, s *Store, hold func()) (uint64, error) {
	key := []byte("counter")
	var got uint64
	err := s.Trail().(kms.SharedTrail).AppendIn(t.Context(), func(tx kms.Txn) (uint64, [][]byte, error) {
		n, err := bumpCounter(tx, key, hold)
		if err != nil {
			return 0, nil, err
		}
		got = uint64(n)
		return got, [][]byte{[]byte("rec " + strconv.Itoa(n))}, nil
	})
	return got, err
}

// bumpCounter adds one to the counter at key in tx (0 when absent) and
// returns its new value; hold, if not nil, runs after the read.
func bumpCounter(tx kms.Txn, key []byte, hold func()) (int, error) {
	n := 0
	v, err := tx.Get(key)
	switch {
	case err == nil:
		if n, err = strconv.Atoi(string(v)); err != nil {
			return 0, err
		}
	case !errors.Is(err, kms.ErrNotFound):
		return 0, err
	}
	if hold != nil {
		hold()
	}
	n++
	return n, tx.Set(key, []byte(strconv.Itoa(n)))
}

// TestSilentHolderLetsGo: a Store whose connection goes silent (its
// packets held, the connection left open, as with a frozen host or a
// partition) while it holds the append lock in a transaction does not
// hold up another Store: the server ends the silent session after half
// the timeout, letting the lock go, and the other Store's AppendIn
// proceeds well within the timeout. The silent Store's own AppendIn, whose
// COMMIT went out into the silence, waits for its outcome, which it learns
// once the traffic passes (nothing was written); its Writable answers
// Unavailable while its traffic is held, and it serves again by itself
// once the traffic passes.
func TestSilentHolderLetsGo(t *testing.T) {
	const timeout = DefaultQueryTimeout
	dbURL := pgtest.URL(t)
	a := openStore(t, dbURL, Options{})
	p, heldURL := pgtest.Proxy(t, dbURL)
	b := openStore(t, heldURL, Options{})
	if _, err := appendCounter(t, b, nil); err != nil {
		t.Fatalf("AppendIn through the proxy = %v", err)
	}

	bDone := make(chan error, 1)
	var heldAt time.Time
	go func() {
		_, err := appendCounter(t, b, func() {
			heldAt = time.Now()
			p.SetMode(netproxy.Hold) // the commit never reaches the server
		})
		bDone <- err
	}()
	for p.Mode() != netproxy.Hold {
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	n, err := appendCounter(t, a, nil)
	took := time.Since(start)
	if err != nil || took > timeout {
		t.Fatalf("AppendIn of another Store while the append lock's holder is silent = %v after %s, want nil within %s", err, took, timeout)
	}
	if n != 2 {
		t.Errorf("AppendIn of another Store numbered its record %d, want 2 (the silent one's never committed)", n)
	}
	t.Logf("another Store appended %s after the hold", took)

	// The silent Store's COMMIT went out into the silence: its outcome
	// cannot be known while the traffic is held, and the call waits
	// (commit.go); its Writable answers Unavailable meanwhile.
	time.Sleep(timeout)
	select {
	case err := <-bDone:
		t.Fatalf("AppendIn of the silent Store = %v %s after the hold, while its commit's outcome cannot be known", err, time.Since(heldAt))
	default:
	}
	if err := b.Writable(t.Context()); kms.ErrorKind(err) != kms.KindUnavailable {
		t.Errorf("Writable of the silent Store = %v, want kind Unavailable", err)
	}

	p.SetMode(netproxy.Pass)
	// The server ended the silent session long ago, rolling its
	// transaction back: the call learns that nothing was written.
	select {
	case err := <-bDone:
		if kms.ErrorKind(err) != kms.KindUnavailable || !strings.Contains(kms.ErrorMessage(err), "nothing was written") {
			t.Errorf("AppendIn of the silent Store once the traffic passes = %v, want kind Unavailable saying nothing was written", err)
		}
		t.Logf("the silent Store's AppendIn answered %s after the hold", time.Since(heldAt))
	case <-time.After(timeout + 10*time.Second):
		t.Fatalf("AppendIn of the silent Store still waits %s after the traffic passes again", timeout+10*time.Second)
	}
	waitNil(t, timeout+10*time.Second, "AppendIn once the traffic passes again", func() (err error) {
		n, err = appendCounter(t, b, nil)
		return err
	})
	if n != 3 {
		t.Errorf("AppendIn once the traffic passes again numbered its record %d, want 3", n)
	}
	// A failed answer of Writable is kept for 250 ms.
	waitNil(t, timeout+10*time.Second, "Writable once the traffic passes again", func() error { return b.Writable(t.Context()) })
}

// TestSilentReadsFailAtOnce: once a round trip of a Store met its timeout
// on a silent connection, its Views fail at once with kind Unavailable,
// as its Updates do, rather than each wait out the timeout again (a call
// that reads three times would wait three times the timeout); once the
// traffic passes again, they read again.
func TestSilentReadsFailAtOnce(t *testing.T) {
	const timeout = 2 * time.Second
	p, heldURL := pgtest.Proxy(t, pgtest.URL(t))
	s := openStore(t, heldURL, Options{QueryTimeout: timeout})
	read := func() (time.Duration, error) {
		start := time.Now()
		err := s.View(t.Context(), func(tx kms.Txn) error {
			if _, err := tx.Get([]byte("k")); !errors.Is(err, kms.ErrNotFound) {
				return err
			}
			return nil
		})
		return time.Since(start), err
	}
	if _, err := read(); err != nil {
		t.Fatalf("View = %v", err)
	}
	p.SetMode(netproxy.Hold)
	took, err := read()
	if kms.ErrorKind(err) != kms.KindUnavailable {
		t.Fatalf("View on a silent connection = %v, want kind Unavailable", err)
	}
	t.Logf("the View that met the silence failed after %s", took)
	for range 3 {
		if took, err := read(); kms.ErrorKind(err) != kms.KindUnavailable || took > timeout/4 {
			t.Errorf("the next View = %v after %s, want kind Unavailable at once (within %s)", err, took, timeout/4)
		}
	}
	p.SetMode(netproxy.Pass)
	waitNil(t, timeout+10*time.Second, "View once the traffic passes again", func() error {
		_, err := read()
		return err
	})
}
