package pgstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/pgtest"
)

// failTrigger makes the database answer a write of kms_kv under one of the
// keys below, or of kms_trail with one of these records, with the error
// PostgreSQL gives for a full disk (53100) or a row too large (54000). It
// uses PL/pgSQL, which the Store itself does not.
func failTrigger(t testing.TB, dbURL string) {
	t.Helper()
	c := sqlConn(t, dbURL)
	exec(t, c, `CREATE FUNCTION kms_test_fail() RETURNS trigger LANGUAGE plpgsql AS $$
		DECLARE b BYTEA;
		BEGIN
			IF TG_TABLE_NAME = 'kms_kv' THEN b := NEW.key; ELSE b := NEW.rec; END IF;
			IF b = 'disk full' THEN RAISE EXCEPTION 'could not extend file: No space left on device' USING ERRCODE = '53100'; END IF;
			IF b = 'too large' THEN RAISE EXCEPTION 'row is too big' USING ERRCODE = '54000'; END IF;
			RETURN NEW;
		END $$`)
	exec(t, c, "CREATE TRIGGER kms_test_fail BEFORE INSERT OR UPDATE ON kms_kv FOR EACH ROW EXECUTE FUNCTION kms_test_fail()")
	exec(t, c, "CREATE TRIGGER kms_test_fail BEFORE INSERT OR UPDATE ON kms_trail FOR EACH ROW EXECUTE FUNCTION kms_test_fail()")
}

// TestDatabaseErrors: a full disk is NoSpace (and Writable says so), a row
// too large is TooLarge; nothing is written, and the Store writes again
// once the cause is gone.
func TestDatabaseErrors(t *testing.T) {
	dbURL := pgtest.URL(t)
	s := openStore(t, dbURL, Options{})
	failTrigger(t, dbURL)

	update := func(key string) error {
		return s.Update(t.Context(), func(tx kms.Txn) error {
			if err := tx.Set([]byte("other"), []byte("v")); err != nil {
				return err
			}
			return tx.Set([]byte(key), []byte("v"))
		})
	}
	wantKind(t, "Update on a full disk", update("disk full"), kms.KindNoSpace)
	wantKind(t, "Writable after a write met a full disk", s.Writable(t.Context()), kms.KindNoSpace)
	wantKind(t, "Append on a full disk", s.Trail().Append([][]byte{[]byte("ok"), []byte("disk full")}), kms.KindNoSpace)
	wantKind(t, "Update of a row too large", update("too large"), kms.KindTooLarge)
	wantKind(t, "UpdateNoSync of a row too large", s.UpdateNoSync(t.Context(), func(tx kms.Txn) error {
		return tx.Set([]byte("too large"), nil)
	}), kms.KindTooLarge)
	wantKind(t, "Append of a record too large", s.Trail().Append([][]byte{[]byte("too large")}), kms.KindTooLarge)
	if _, err := getKey(t, s, "other"); !errors.Is(err, kms.ErrNotFound) {
		t.Errorf("Get(other) after failed Updates = %v, want not found", err)
	}
	if n := s.Trail().Len(); n != 0 {
		t.Errorf("Trail().Len() after failed Appends = %d, want 0", n)
	}

	time.Sleep(noSpaceHold)
	if err := s.Writable(t.Context()); err != nil {
		t.Errorf("Writable %v after the write that met a full disk = %v, want nil (the next write tries)", noSpaceHold, err)
	}
	if err := update("fine"); err != nil {
		t.Errorf("Update = %v, want nil", err)
	}
}

// TestSizeLimits: keys up to MaxKeySize and values up to MaxValueSize are
// kept; longer ones are TooLarge before anything is sent; empty keys are
// Invalid.
func TestSizeLimits(t *testing.T) {
	s := openStore(t, pgtest.URL(t), Options{})
	key := make([]byte, MaxKeySize) // random, so that no compression helps
	rand.Read(key)
	val := make([]byte, MaxValueSize)
	rand.Read(val[:1<<20])
	err := s.Update(t.Context(), func(tx kms.Txn) error { return tx.Set(key, val) })
	if err != nil {
		t.Fatalf("Update(Set(a %d-byte key, a %d-byte value)) = %v, want nil", len(key), len(val), err)
	}
	if v, err := getKey(t, s, string(key)); err != nil || !bytes.Equal(v, val) {
		t.Errorf("Get(the %d-byte key) = %d bytes, %v; want the %d written", len(key), len(v), err, len(val))
	}

	tests := []struct {
		name string
		fn   func(tx kms.Txn) error
		kind kms.Kind
	}{
		{"Set(key too large)", func(tx kms.Txn) error { return tx.Set(make([]byte, MaxKeySize+1), nil) }, kms.KindTooLarge},
		{"Delete(key too large)", func(tx kms.Txn) error { return tx.Delete(make([]byte, MaxKeySize+1)) }, kms.KindTooLarge},
		{"Set(value too large)", func(tx kms.Txn) error { return tx.Set([]byte("k"), make([]byte, MaxValueSize+1)) }, kms.KindTooLarge},
		{"Set(empty key)", func(tx kms.Txn) error { return tx.Set(nil, []byte("v")) }, kms.KindInvalid},
		{"Delete(empty key)", func(tx kms.Txn) error { return tx.Delete([]byte{}) }, kms.KindInvalid},
		{"Get(empty key)", func(tx kms.Txn) error { _, err := tx.Get(nil); return err }, kms.KindInvalid},
	}
	for _, tc := range tests {
		var opErr error
		err := s.Update(t.Context(), func(tx kms.Txn) error {
			opErr = tc.fn(tx)
			return nil
		})
		if err != nil {
			t.Errorf("Update(%s) = %v, want nil", tc.name, err)
		}
		wantKind(t, tc.name, opErr, tc.kind)
	}
	if _, err := getKey(t, s, string(make([]byte, MaxKeySize+1))); !errors.Is(err, kms.ErrNotFound) {
		t.Errorf("Get(key too large) = %v, want not found", err)
	}
	wantKind(t, "Append(record too large)", s.Trail().Append([][]byte{make([]byte, MaxRecordSize+1)}), kms.KindTooLarge)
}

// TestViewSnapshotAtStart: a View's snapshot is the store as it was when
// View began, even if fn has read nothing before another transaction
// commits (the kms journal reads, after its Update, what a View opened
// before it saw, to undo the Update).
func TestViewSnapshotAtStart(t *testing.T) {
	s := openStore(t, pgtest.URL(t), Options{})
	setKey(t, s, "k", "before")
	err := s.View(t.Context(), func(tx kms.Txn) error {
		setKey(t, s, "k", "after")
		setKey(t, s, "new", "v")
		if v, err := tx.Get([]byte("k")); err != nil || string(v) != "before" {
			t.Errorf("Get(k) in a View begun before an Update = %q, %v; want %q, nil", v, err, "before")
		}
		if _, err := tx.Get([]byte("new")); !errors.Is(err, kms.ErrNotFound) {
			t.Errorf("Get(new) in a View begun before an Update = %v, want not found", err)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("View = %v, want nil", err)
	}
}

// TestBlindWriteHoldsNoLock: an Update that only writes takes no lock
// before its commit, so a concurrent Update of the same key commits
// meanwhile without waiting; and a blind write does not conflict (as with
// Badger): the later commit wins, at the first run.
func TestBlindWriteHoldsNoLock(t *testing.T) {
	s := openStore(t, pgtest.URL(t), Options{})
	setKey(t, s, "k", "0")
	runs := 0
	err := s.Update(t.Context(), func(tx kms.Txn) error {
		runs++
		if err := tx.Set([]byte("k"), []byte("mine")); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		done := make(chan error)
		go func() {
			done <- s.Update(ctx, func(tx kms.Txn) error { return tx.Set([]byte("k"), []byte("theirs")) })
		}()
		if err := <-done; err != nil {
			t.Errorf("concurrent Update of a key another Update has set = %v, want nil", err)
		}
		return nil
	})
	if err != nil || runs != 1 {
		t.Errorf("Update = %v after %d runs, want nil after 1", err, runs)
	}
	if v, err := getKey(t, s, "k"); err != nil || string(v) != "mine" {
		t.Errorf("Get(k) = %q, %v; want %q, nil", v, err, "mine")
	}
}

// TestTxnAfterEnd: a Txn kept past its function fails, Invalid.
func TestTxnAfterEnd(t *testing.T) {
	s := openStore(t, pgtest.URL(t), Options{})
	var kept kms.Txn
	if err := s.Update(t.Context(), func(tx kms.Txn) error { kept = tx; return tx.Set([]byte("k"), []byte("v")) }); err != nil {
		t.Fatal(err)
	}
	_, err := kept.Get([]byte("k"))
	wantKind(t, "Get after Update returned", err, kms.KindInvalid)
	wantKind(t, "Set after Update returned", kept.Set([]byte("k"), []byte("v")), kms.KindInvalid)
	wantKind(t, "Scan after Update returned", kept.Scan(kms.ScanOptions{}, func(k, v []byte) (bool, error) { return true, nil }), kms.KindInvalid)
}

// TestScanPages: scans cross page boundaries, whether a page ends at 256
// rows or at its byte budget, in both directions, while fn reads and
// writes in the same transaction.
func TestScanPages(t *testing.T) {
	s := openStore(t, pgtest.URL(t), Options{})
	const n = 700
	big := bytes.Repeat([]byte("x"), 100<<10) // ten of these fill a page's budget
	err := s.Update(t.Context(), func(tx kms.Txn) error {
		for i := range n {
			v := []byte(fmt.Sprint(i))
			if i%20 == 7 {
				v = append(v, big...)
			}
			if err := tx.Set(fmt.Appendf(nil, "p/%04d", i), v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Update = %v, want nil", err)
	}
	for _, reverse := range []bool{false, true} {
		var keys []string
		err := s.Update(t.Context(), func(tx kms.Txn) error {
			keys = keys[:0]
			return tx.Scan(kms.ScanOptions{Prefix: []byte("p/"), Reverse: reverse}, func(k, v []byte) (bool, error) {
				i := len(keys)
				if reverse {
					i = n - 1 - i
				}
				if want := fmt.Sprintf("p/%04d", i); string(k) != want || !bytes.HasPrefix(v, []byte(fmt.Sprint(i))) {
					return false, fmt.Errorf("item %d = %q, want %q", len(keys), k, want)
				}
				keys = append(keys, string(k))
				// The transaction is usable in fn: a read, and a
				// write outside the range.
				if _, err := tx.Get(k); err != nil {
					return false, err
				}
				return true, tx.Set([]byte("seen/"+string(k)), nil)
			})
		})
		if err != nil || len(keys) != n {
			t.Errorf("Scan(reverse %v) = %v after %d keys, want nil after %d", reverse, err, len(keys), n)
		}
	}
}

// TestPrefetch: a Get after Prefetch answers what the database held
// (a value, or NotFound), and the transaction's own writes win over what
// was prefetched, before and after.
func TestPrefetch(t *testing.T) {
	s := openStore(t, pgtest.URL(t), Options{})
	setKey(t, s, "a", "va")
	setKey(t, s, "b", "vb")
	err := s.Update(t.Context(), func(tx kms.Txn) error {
		if err := tx.Set([]byte("c"), []byte("mine")); err != nil {
			return err
		}
		p, ok := tx.(kms.Prefetcher)
		if !ok {
			t.Fatal("the Txn of an Update is not a kms.Prefetcher")
		}
		if err := p.Prefetch([][]byte{[]byte("a"), []byte("b"), []byte("missing"), []byte("a"), []byte("c"), {}}); err != nil {
			return err
		}
		if err := tx.Set([]byte("b"), []byte("new")); err != nil {
			return err
		}
		for key, want := range map[string]string{"a": "va", "b": "new", "c": "mine"} {
			v, err := tx.Get([]byte(key))
			if err != nil || string(v) != want {
				t.Errorf("Get(%q) after Prefetch = %q, %v; want %q", key, v, err, want)
			}
		}
		if _, err := tx.Get([]byte("missing")); !errors.Is(err, kms.ErrNotFound) {
			t.Errorf("Get(missing) after Prefetch = %v, want NotFound", err)
		}
		// A copy: changing it changes nothing.
		v, _ := tx.Get([]byte("a"))
		v[0] = 'X'
		if v, _ := tx.Get([]byte("a")); string(v) != "va" {
			t.Errorf("Get(a) after changing an earlier answer = %q, want va", v)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Update = %v", err)
	}
	err = s.View(t.Context(), func(tx kms.Txn) error {
		if err := tx.(kms.Prefetcher).Prefetch([][]byte{[]byte("b"), []byte("c")}); err != nil {
			return err
		}
		for key, want := range map[string]string{"b": "new", "c": "mine"} {
			if v, err := tx.Get([]byte(key)); err != nil || string(v) != want {
				t.Errorf("View: Get(%q) after Prefetch = %q, %v; want %q", key, v, err, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("View = %v", err)
	}
}

// TestPrefetchTakesAppendLock: AppendIn calls that begin with a Prefetch
// (which then also takes the append lock, in the same round trip) run one
// after another on a snapshot taken after the lock, from two Stores on one
// database as from two processes: each sees the commit of the one before,
// so none conflicts and reruns, and the counter they share and the trail
// end in step.
func TestPrefetchTakesAppendLock(t *testing.T) {
	dbURL := pgtest.URL(t)
	stores := []*Store{openStore(t, dbURL, Options{}), openStore(t, dbURL, Options{})}
	const workers, appends = 4, 10
	var (
		runs atomic.Int64
		wg   sync.WaitGroup
	)
	key := []byte("counter")
	for _, s := range stores {
		for range workers {
			wg.Go(func() {
				for range appends {
					err := s.Trail().(kms.SharedTrail).AppendIn(t.Context(), func(tx kms.Txn) (uint64, [][]byte, error) {
						runs.Add(1)
						if err := tx.(kms.Prefetcher).Prefetch([][]byte{key}); err != nil {
							return 0, nil, err
						}
						n, err := bumpCounter(tx, key, nil)
						if err != nil {
							return 0, nil, err
						}
						return uint64(n), [][]byte{[]byte("rec " + strconv.Itoa(n))}, nil
					})
					if err != nil {
						t.Errorf("AppendIn = %v", err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	const total = 2 * workers * appends
	if v, err := getKey(t, stores[0], "counter"); err != nil || string(v) != strconv.Itoa(total) {
		t.Errorf("counter = %q, %v; want %d", v, err, total)
	}
	if n := runs.Load(); n != total {
		t.Errorf("the functions of %d AppendIn calls ran %d times, want once each: appenders conflicted", total, n)
	}
	seq := uint64(0)
	err := stores[1].Trail().Scan(1, func(s uint64, rec []byte) (bool, error) {
		seq++
		if s != seq || string(rec) != "rec "+strconv.FormatUint(s, 10) {
			t.Errorf("record %d = %q, want seq %d, %q", s, rec, seq, "rec "+strconv.FormatUint(seq, 10))
		}
		return true, nil
	})
	if err != nil || seq != total {
		t.Errorf("Scan = %v over %d records, want nil over %d", err, seq, total)
	}
}
