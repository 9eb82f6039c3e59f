package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/ringkms/kms"
)

func testGetMissing(t *testing.T, s kms.Store) {
	got, err := get(t, s, "missing")
	if !errors.Is(err, kms.ErrNotFound) {
		t.Errorf("Get(%q) = %q, %v; want errors.Is(err, kms.ErrNotFound)", "missing", got, err)
	}
	if got != nil {
		t.Errorf("Get(%q) = %q on error, want nil value", "missing", got)
	}
	wantKind(t, `Get("missing")`, err, kms.KindNotFound)
}

func testSetGetDelete(t *testing.T, s kms.Store) {
	set(t, s, "k", "v1")
	wantValue(t, s, "k", "v1")

	set(t, s, "k", "v2")
	wantValue(t, s, "k", "v2")

	if err := s.Update(t.Context(), func(tx kms.Txn) error {
		return tx.Delete([]byte("k"))
	}); err != nil {
		t.Fatalf("Update(Delete(%q)) = %v, want nil", "k", err)
	}
	wantMissing(t, s, "k")
	if got := scan(t, s, kms.ScanOptions{}); len(got) != 0 {
		t.Errorf("Scan(all) after delete = %q, want none", keysOf(got))
	}

	set(t, s, "k", "v3")
	wantValue(t, s, "k", "v3")
}

func testEmptyValue(t *testing.T, s kms.Store) {
	set(t, s, "empty", "")
	got, err := get(t, s, "empty")
	if err != nil || len(got) != 0 {
		t.Errorf("Get(%q) = %q, %v; want empty value, nil", "empty", got, err)
	}
}

func testDeleteMissing(t *testing.T, s kms.Store) {
	err := s.Update(t.Context(), func(tx kms.Txn) error {
		return tx.Delete([]byte("never-written"))
	})
	if err != nil {
		t.Errorf("Update(Delete(%q)) = %v, want nil", "never-written", err)
	}
	wantMissing(t, s, "never-written")
}

func testGetReturnsCopy(t *testing.T, s kms.Store) {
	set(t, s, "k", "original")

	got, err := get(t, s, "k")
	if err != nil {
		t.Fatalf("Get(%q) = %v, want nil", "k", err)
	}
	for i := range got {
		got[i] = 'X'
	}
	wantValue(t, s, "k", "original")

	// The same inside one transaction, where a backend is most tempted
	// to hand out its own buffer: for a committed key, and for the
	// transaction's own, not yet committed write.
	err = s.Update(t.Context(), func(tx kms.Txn) error {
		if err := tx.Set([]byte("own"), []byte("mine")); err != nil {
			return err
		}
		for _, key := range []string{"k", "own"} {
			want := map[string]string{"k": "original", "own": "mine"}[key]
			for _, step := range []string{"first", "second"} {
				v, err := tx.Get([]byte(key))
				if err != nil {
					return err
				}
				if string(v) != want {
					t.Errorf("%s Get(%q) in Update = %q, want %q", step, key, v, want)
				}
				for i := range v {
					v[i] = 'Y'
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Update = %v, want nil", err)
	}
	wantValue(t, s, "k", "original")
	wantValue(t, s, "own", "mine")
}

func testFailedUpdateWritesNothing(t *testing.T, s kms.Store) {
	set(t, s, "keep", "v", "change", "old")

	err := s.Update(t.Context(), func(tx kms.Txn) error {
		if err := tx.Set([]byte("new"), []byte("v")); err != nil {
			return err
		}
		if err := tx.Set([]byte("change"), []byte("new")); err != nil {
			return err
		}
		if err := tx.Delete([]byte("keep")); err != nil {
			return err
		}
		return errBoom
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("Update(fn fails) = %v, want %v", err, errBoom)
	}
	wantMissing(t, s, "new")
	wantValue(t, s, "change", "old")
	wantValue(t, s, "keep", "v")
}

func testFnErrorUnchanged(t *testing.T, s kms.Store) {
	wrapped := fmt.Errorf("context: %w", errBoom)
	tests := []struct {
		name string
		run  func(context.Context, func(kms.Txn) error) error
	}{
		{"View", s.View},
		{"Update", s.Update},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, want := range []error{errBoom, wrapped, kms.ErrLimit} {
				got := tc.run(t.Context(), func(kms.Txn) error { return want })
				if got != want {
					t.Errorf("%s(fn returns %v) = %v (%T), want the same error value", tc.name, want, got, got)
				}
			}
			// A store error that fn passes back keeps its kind.
			got := tc.run(t.Context(), func(tx kms.Txn) error {
				_, err := tx.Get([]byte("missing"))
				return err
			})
			if !errors.Is(got, kms.ErrNotFound) {
				t.Errorf("%s(fn returns Get error) = %v, want errors.Is(err, kms.ErrNotFound)", tc.name, got)
			}
		})
	}
}

func testViewCannotWrite(t *testing.T, s kms.Store) {
	set(t, s, "existing", "v")
	var setErr, delErr error
	err := s.View(t.Context(), func(tx kms.Txn) error {
		setErr = tx.Set([]byte("k"), []byte("v"))
		delErr = tx.Delete([]byte("existing"))
		return nil
	})
	if err != nil {
		t.Fatalf("View = %v, want nil", err)
	}
	wantKind(t, "Set in View", setErr, kms.KindInvalid)
	wantKind(t, "Delete in View", delErr, kms.KindInvalid)
	if !errors.Is(setErr, kms.ErrInvalid) {
		t.Errorf("Set in View = %v, want errors.Is(err, kms.ErrInvalid)", setErr)
	}
	wantMissing(t, s, "k")
	wantValue(t, s, "existing", "v")
}

func testSnapshotIsolation(t *testing.T, s kms.Store) {
	set(t, s, "k", "v1", "gone", "x")

	err := s.View(t.Context(), func(tx kms.Txn) error {
		if v, err := tx.Get([]byte("k")); err != nil || string(v) != "v1" {
			t.Errorf("Get(%q) before concurrent Update = %q, %v; want %q, nil", "k", v, err, "v1")
		}

		// Commit a concurrent Update while this View is open, and wait
		// until it has returned.
		done := make(chan error)
		go func() {
			done <- s.Update(context.Background(), func(tx kms.Txn) error {
				if err := tx.Set([]byte("k"), []byte("v2")); err != nil {
					return err
				}
				if err := tx.Set([]byte("new"), []byte("n")); err != nil {
					return err
				}
				return tx.Delete([]byte("gone"))
			})
		}()
		if err := <-done; err != nil {
			t.Fatalf("concurrent Update = %v, want nil", err)
		}

		if v, err := tx.Get([]byte("k")); err != nil || string(v) != "v1" {
			t.Errorf("Get(%q) after concurrent Update = %q, %v; want %q, nil (snapshot)", "k", v, err, "v1")
		}
		if v, err := tx.Get([]byte("new")); !errors.Is(err, kms.ErrNotFound) {
			t.Errorf("Get(%q) after concurrent Update = %q, %v; want not_found (snapshot)", "new", v, err)
		}
		if v, err := tx.Get([]byte("gone")); err != nil || string(v) != "x" {
			t.Errorf("Get(%q) after concurrent Update = %q, %v; want %q, nil (snapshot)", "gone", v, err, "x")
		}
		got, err := scanTx(tx, kms.ScanOptions{})
		if err != nil {
			return err
		}
		want := []kv{{"gone", []byte("x")}, {"k", []byte("v1")}}
		if !equalKVs(got, want) {
			t.Errorf("Scan(all) after concurrent Update = %s, want %s (snapshot)", fmtKVs(got), fmtKVs(want))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("View = %v, want nil", err)
	}

	// A new View sees the commit.
	wantValue(t, s, "k", "v2")
	wantValue(t, s, "new", "n")
	wantMissing(t, s, "gone")
}

func testReadOwnWrites(t *testing.T, s kms.Store) {
	set(t, s, "p/a", "1", "p/c", "3", "p/d", "4")

	err := s.Update(t.Context(), func(tx kms.Txn) error {
		steps := []struct {
			name string
			do   func() error
		}{
			{"Set(p/b)", func() error { return tx.Set([]byte("p/b"), []byte("2")) }},
			{"Set(p/c)", func() error { return tx.Set([]byte("p/c"), []byte("33")) }},
			{"Delete(p/d)", func() error { return tx.Delete([]byte("p/d")) }},
		}
		for _, st := range steps {
			if err := st.do(); err != nil {
				return fmt.Errorf("%s: %w", st.name, err)
			}
		}
		for key, want := range map[string]string{"p/a": "1", "p/b": "2", "p/c": "33"} {
			if v, err := tx.Get([]byte(key)); err != nil || string(v) != want {
				t.Errorf("Get(%q) in Update = %q, %v; want %q, nil", key, v, err, want)
			}
		}
		if v, err := tx.Get([]byte("p/d")); !errors.Is(err, kms.ErrNotFound) {
			t.Errorf("Get(%q) after Delete in Update = %q, %v; want not_found", "p/d", v, err)
		}
		want := []kv{{"p/a", []byte("1")}, {"p/b", []byte("2")}, {"p/c", []byte("33")}}
		for _, reverse := range []bool{false, true} {
			opts := kms.ScanOptions{Prefix: []byte("p/"), Reverse: reverse}
			got, err := scanTx(tx, opts)
			if err != nil {
				return err
			}
			w := want
			if reverse {
				w = slices.Clone(want)
				slices.Reverse(w)
			}
			if !equalKVs(got, w) {
				t.Errorf("Scan(%s) in Update = %s, want %s", fmtOpts(opts), fmtKVs(got), fmtKVs(w))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Update = %v, want nil", err)
	}
	wantValue(t, s, "p/b", "2")
	wantValue(t, s, "p/c", "33")
	wantMissing(t, s, "p/d")
}
