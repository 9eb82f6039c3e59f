// Package storetest is the conformance suite of kms.Store: every backend
// must pass it.
//
// A backend's test calls Run with a constructor that returns a fresh, empty
// store and registers its own cleanup:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t testing.TB) kms.Store {
//			s, err := mystore.Open(t.TempDir())
//			if err != nil {
//				t.Fatal(err)
//			}
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
//
// The suite checks what kms.Store documents: reads, writes and deletes;
// who owns returned slices; atomicity of failed updates; errors passed
// through unchanged; read-only views; snapshot isolation; reading one's own
// writes; ordered scans by prefix and start, forward and reverse, including
// keys and prefixes of 0xFF bytes; large values and many keys; conflicts
// retried without lost updates; and context cancellation. It never relies
// on timing: concurrent steps are ordered with channels.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/ringkms/kms"
)

// Run runs the conformance suite against the stores open returns. Each
// subtest calls open once and gets a fresh, empty store; open registers the
// store's cleanup with t.Cleanup.
func Run(t *testing.T, open func(t testing.TB) kms.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s kms.Store)
	}{
		{"GetMissing", testGetMissing},
		{"SetGetDelete", testSetGetDelete},
		{"EmptyValue", testEmptyValue},
		{"DeleteMissing", testDeleteMissing},
		{"GetReturnsCopy", testGetReturnsCopy},
		{"FailedUpdateWritesNothing", testFailedUpdateWritesNothing},
		{"FnErrorUnchanged", testFnErrorUnchanged},
		{"ViewCannotWrite", testViewCannotWrite},
		{"SnapshotIsolation", testSnapshotIsolation},
		{"ReadOwnWrites", testReadOwnWrites},
		{"ScanPrefix", testScanPrefix},
		{"ScanRanges", testScanRanges},
		{"ScanRangesOwnWrites", testScanRangesOwnWrites},
		{"ScanStartOutsidePrefix", testScanStartOutsidePrefix},
		{"ScanStopEarly", testScanStopEarly},
		{"ScanFnError", testScanFnError},
		{"ScanKeysOnly", testScanKeysOnly},
		{"LargeValue", testLargeValue},
		{"ManyKeys", testManyKeys},
		{"ConcurrentCounter", testConcurrentCounter},
		{"ConcurrentWriters", testConcurrentWriters},
		{"ScanContextCanceled", testScanContextCanceled},
		{"ContextCanceledBeforeStart", testContextCanceledBeforeStart},
		{"UpdateRetryRerunsFn", testUpdateRetryRerunsFn},
		{"UpdateGivesUpOnConflict", testUpdateGivesUpOnConflict},
		{"Writable", testWritable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			if s == nil {
				t.Fatal("open returned a nil store")
			}
			tc.fn(t, s)
		})
	}
}

// testWritable: a new store, with room on its disk, takes writes, and
// asking writes nothing.
func testWritable(t *testing.T, s kms.Store) {
	ctx := context.Background()
	for range 3 {
		if err := s.Writable(ctx); err != nil {
			t.Fatalf("Writable = %v, want nil", err)
		}
	}
	if got := scan(t, s, kms.ScanOptions{}); len(got) != 0 {
		t.Fatalf("after Writable, the store holds %s, want nothing", fmtKVs(got))
	}
	if n := s.Trail().Len(); n != 0 {
		t.Fatalf("after Writable, Trail().Len() = %d, want 0", n)
	}
}

// errBoom is the custom error the suite's functions return; the store must
// hand it back unchanged.
var errBoom = errors.New("storetest: boom")

// kv is one key and value seen by a scan.
type kv struct {
	key   string
	value []byte
}

// set writes key=value pairs in one Update.
func set(t testing.TB, s kms.Store, pairs ...string) {
	t.Helper()
	if len(pairs)%2 != 0 {
		panic("storetest: set needs key, value pairs")
	}
	err := s.Update(t.Context(), func(tx kms.Txn) error {
		for i := 0; i < len(pairs); i += 2 {
			if err := tx.Set([]byte(pairs[i]), []byte(pairs[i+1])); err != nil {
				return fmt.Errorf("Set(%q): %w", pairs[i], err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Update(set %d keys) = %v, want nil", len(pairs)/2, err)
	}
}

// get reads key in its own View.
func get(t testing.TB, s kms.Store, key string) ([]byte, error) {
	t.Helper()
	var v []byte
	var getErr error
	err := s.View(t.Context(), func(tx kms.Txn) error {
		v, getErr = tx.Get([]byte(key))
		return nil
	})
	if err != nil {
		t.Fatalf("View(Get(%q)) = %v, want nil", key, err)
	}
	return v, getErr
}

// wantValue checks that key holds want.
func wantValue(t testing.TB, s kms.Store, key, want string) {
	t.Helper()
	got, err := get(t, s, key)
	if err != nil || string(got) != want {
		t.Errorf("Get(%q) = %q, %v; want %q, nil", key, got, err, want)
	}
}

// wantMissing checks that key is absent.
func wantMissing(t testing.TB, s kms.Store, key string) {
	t.Helper()
	got, err := get(t, s, key)
	if !errors.Is(err, kms.ErrNotFound) {
		t.Errorf("Get(%q) = %q, %v; want error of kind not_found", key, got, err)
	}
}

// scanTx scans inside tx and returns copies of what it saw.
func scanTx(tx kms.Txn, opts kms.ScanOptions) ([]kv, error) {
	var got []kv
	err := tx.Scan(opts, func(key, value []byte) (bool, error) {
		e := kv{key: string(key)}
		if value != nil {
			e.value = bytes.Clone(value)
		}
		got = append(got, e)
		return true, nil
	})
	return got, err
}

// scan scans in its own View.
func scan(t testing.TB, s kms.Store, opts kms.ScanOptions) []kv {
	t.Helper()
	var got []kv
	err := s.View(t.Context(), func(tx kms.Txn) error {
		var err error
		got, err = scanTx(tx, opts)
		return err
	})
	if err != nil {
		t.Fatalf("Scan(%s) = %v, want nil", fmtOpts(opts), err)
	}
	return got
}

// keysOf returns the keys of a scan.
func keysOf(kvs []kv) []string {
	keys := make([]string, len(kvs))
	for i, e := range kvs {
		keys[i] = e.key
	}
	return keys
}

// fmtOpts renders scan options for failure messages.
func fmtOpts(o kms.ScanOptions) string {
	return fmt.Sprintf("{Prefix: %q, Start: %q, Reverse: %v, KeysOnly: %v}", o.Prefix, o.Start, o.Reverse, o.KeysOnly)
}

// wantKind checks that err is a kms error of the given kind.
func wantKind(t testing.TB, what string, err error, kind kms.Kind) {
	t.Helper()
	var e *kms.Error
	if !errors.As(err, &e) || e.Kind != kind {
		t.Errorf("%s = %v, want a kms error of kind %v", what, err, kind)
	}
}

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

func testScanPrefix(t *testing.T, s kms.Store) {
	keys := []string{"a", "b", "b/", "b/1", "b/10", "b/2", "b/2/x", "b0", "ba", "c"}
	shuffled := slices.Clone(keys)
	rand.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	var pairs []string
	for _, k := range shuffled {
		pairs = append(pairs, k, "v:"+k)
	}
	set(t, s, pairs...)

	tests := []struct {
		prefix string
		want   []string
	}{
		{"", keys},
		{"b/", []string{"b/", "b/1", "b/10", "b/2", "b/2/x"}},
		{"b/2", []string{"b/2", "b/2/x"}},
		{"b", []string{"b", "b/", "b/1", "b/10", "b/2", "b/2/x", "b0", "ba"}},
		{"a", []string{"a"}},
		{"bb", nil},
		{"d", nil},
	}
	for _, tc := range tests {
		opts := kms.ScanOptions{Prefix: []byte(tc.prefix)}
		got := scan(t, s, opts)
		if !slices.Equal(keysOf(got), tc.want) {
			t.Errorf("Scan(%s) = %q, want %q", fmtOpts(opts), keysOf(got), tc.want)
		}
		for _, e := range got {
			if string(e.value) != "v:"+e.key {
				t.Errorf("Scan(%s) value of %q = %q, want %q", fmtOpts(opts), e.key, e.value, "v:"+e.key)
			}
		}
	}
}

// rangeKeys is the data set of the range tests, in byte order. It has
// keys that end in 0x00 and 0xFF, keys made only of 0xFF bytes, and keys
// right after a prefix range ("b0" after "b/", "c" after "b", "b" after
// "a\xff"), which a reverse scan must skip.
var rangeKeys = []string{
	"a",
	"a\x00",
	"a\xff",
	"a\xff\x00",
	"a\xff\xff",
	"b",
	"b/1",
	"b/2",
	"b/3",
	"b0",
	"c",
	"\xff",
	"\xff\x00",
	"\xff\xff",
	"\xff\xff\x01",
}

// rangeTest is one scan of rangeKeys: the keys a forward and a reverse scan
// with Prefix and Start must return.
type rangeTest struct {
	name          string
	prefix, start string
	forward       []string
	reverse       []string
}

var rangeTests = []rangeTest{
	{
		name:    "all",
		forward: rangeKeys,
		reverse: reversed(rangeKeys),
	},
	{
		name:    "prefix followed by its successor key",
		prefix:  "b/",
		forward: []string{"b/1", "b/2", "b/3"},
		reverse: []string{"b/3", "b/2", "b/1"},
	},
	{
		name:    "prefix that is also a key",
		prefix:  "b",
		forward: []string{"b", "b/1", "b/2", "b/3", "b0"},
		reverse: []string{"b0", "b/3", "b/2", "b/1", "b"},
	},
	{
		name:    "prefix with keys ending in 0xFF",
		prefix:  "a",
		forward: []string{"a", "a\x00", "a\xff", "a\xff\x00", "a\xff\xff"},
		reverse: []string{"a\xff\xff", "a\xff\x00", "a\xff", "a\x00", "a"},
	},
	{
		name:    "prefix ending in 0xFF",
		prefix:  "a\xff",
		forward: []string{"a\xff", "a\xff\x00", "a\xff\xff"},
		reverse: []string{"a\xff\xff", "a\xff\x00", "a\xff"},
	},
	{
		name:    "prefix ending in two 0xFF",
		prefix:  "a\xff\xff",
		forward: []string{"a\xff\xff"},
		reverse: []string{"a\xff\xff"},
	},
	{
		name:    "prefix of one 0xFF",
		prefix:  "\xff",
		forward: []string{"\xff", "\xff\x00", "\xff\xff", "\xff\xff\x01"},
		reverse: []string{"\xff\xff\x01", "\xff\xff", "\xff\x00", "\xff"},
	},
	{
		name:    "prefix of two 0xFF",
		prefix:  "\xff\xff",
		forward: []string{"\xff\xff", "\xff\xff\x01"},
		reverse: []string{"\xff\xff\x01", "\xff\xff"},
	},
	{
		name:   "prefix of three 0xFF matches nothing",
		prefix: "\xff\xff\xff",
	},
	{
		name:   "prefix after every key",
		prefix: "z",
	},
	{
		name:   "prefix between keys",
		prefix: "b1",
	},
	{
		name:    "start on a key",
		prefix:  "b/",
		start:   "b/2",
		forward: []string{"b/2", "b/3"},
		reverse: []string{"b/2", "b/1"},
	},
	{
		name:    "start between keys",
		prefix:  "b/",
		start:   "b/25",
		forward: []string{"b/3"},
		reverse: []string{"b/2", "b/1"},
	},
	{
		name:    "start beyond the range",
		prefix:  "b/",
		start:   "b/9",
		reverse: []string{"b/3", "b/2", "b/1"},
	},
	{
		name:    "start equal to the prefix",
		prefix:  "b/",
		start:   "b/",
		forward: []string{"b/1", "b/2", "b/3"},
	},
	{
		name:    "start equal to a prefix that is a key",
		prefix:  "b",
		start:   "b",
		forward: []string{"b", "b/1", "b/2", "b/3", "b0"},
		reverse: []string{"b"},
	},
	{
		name:    "start on the last key of the range",
		prefix:  "b",
		start:   "b0",
		forward: []string{"b0"},
		reverse: []string{"b0", "b/3", "b/2", "b/1", "b"},
	},
	{
		name:    "start without prefix",
		start:   "b0",
		forward: []string{"b0", "c", "\xff", "\xff\x00", "\xff\xff", "\xff\xff\x01"},
		reverse: []string{"b0", "b/3", "b/2", "b/1", "b", "a\xff\xff", "a\xff\x00", "a\xff", "a\x00", "a"},
	},
	{
		name:    "start of 0xFF bytes after every key",
		start:   "\xff\xff\xff",
		reverse: reversed(rangeKeys),
	},
	{
		name:    "start before every key",
		start:   "\x00",
		forward: rangeKeys,
	},
	{
		name:    "start with 0xFF under a 0xFF prefix",
		prefix:  "\xff",
		start:   "\xff\xff",
		forward: []string{"\xff\xff", "\xff\xff\x01"},
		reverse: []string{"\xff\xff", "\xff\x00", "\xff"},
	},
	{
		name:    "start past a prefix ending in 0xFF",
		prefix:  "a\xff",
		start:   "a\xff\xff\xff",
		reverse: []string{"a\xff\xff", "a\xff\x00", "a\xff"},
	},
}

func reversed(s []string) []string {
	r := slices.Clone(s)
	slices.Reverse(r)
	return r
}

// runRangeTests runs every rangeTest, both directions, with and without
// values, through scanIn.
func runRangeTests(t *testing.T, scanIn func(t *testing.T, opts kms.ScanOptions) []kv) {
	t.Helper()
	for _, tc := range rangeTests {
		t.Run(tc.name, func(t *testing.T) {
			for _, reverse := range []bool{false, true} {
				want := tc.forward
				if reverse {
					want = tc.reverse
				}
				for _, keysOnly := range []bool{false, true} {
					opts := kms.ScanOptions{
						Prefix:   []byte(tc.prefix),
						Start:    []byte(tc.start),
						Reverse:  reverse,
						KeysOnly: keysOnly,
					}
					got := scanIn(t, opts)
					if !slices.Equal(keysOf(got), want) {
						t.Errorf("Scan(%s) = %q, want %q", fmtOpts(opts), keysOf(got), want)
						continue
					}
					for _, e := range got {
						wantV := []byte("v:" + e.key)
						if keysOnly {
							wantV = nil
						}
						if !bytes.Equal(e.value, wantV) || (keysOnly && e.value != nil) {
							t.Errorf("Scan(%s) value of %q = %q, want %q", fmtOpts(opts), e.key, e.value, wantV)
						}
					}
				}
			}
		})
	}
}

func testScanRanges(t *testing.T, s kms.Store) {
	var pairs []string
	for _, k := range rangeKeys {
		pairs = append(pairs, k, "v:"+k)
	}
	set(t, s, pairs...)
	runRangeTests(t, func(t *testing.T, opts kms.ScanOptions) []kv {
		return scan(t, s, opts)
	})
}

// testScanRangesOwnWrites runs the range tests inside an Update where half
// of the keys are committed and the other half are the Update's own
// writes, so that a backend merging its pending writes into scans gets
// the order right in both directions.
func testScanRangesOwnWrites(t *testing.T, s kms.Store) {
	var committed []string
	for i, k := range rangeKeys {
		if i%2 == 0 {
			committed = append(committed, k, "v:"+k)
		} else {
			// Committed with a stale value the Update overwrites, or
			// deleted and rewritten, so that both cases are merged.
			committed = append(committed, k, "stale")
		}
	}
	committed = append(committed, "b/15", "deleted in the update")
	set(t, s, committed...)

	err := s.Update(t.Context(), func(tx kms.Txn) error {
		for i, k := range rangeKeys {
			if i%2 == 0 {
				continue
			}
			if i%4 == 1 {
				if err := tx.Delete([]byte(k)); err != nil {
					return err
				}
			}
			if err := tx.Set([]byte(k), []byte("v:"+k)); err != nil {
				return err
			}
		}
		if err := tx.Delete([]byte("b/15")); err != nil {
			return err
		}
		runRangeTests(t, func(t *testing.T, opts kms.ScanOptions) []kv {
			got, err := scanTx(tx, opts)
			if err != nil {
				t.Fatalf("Scan(%s) in Update = %v, want nil", fmtOpts(opts), err)
			}
			return got
		})
		return errBoom // roll back; the scans are the test
	})
	if !errors.Is(err, errBoom) {
		t.Fatalf("Update = %v, want %v", err, errBoom)
	}
}

func testScanStartOutsidePrefix(t *testing.T, s kms.Store) {
	set(t, s, "a/1", "v", "b/1", "v")
	for _, reverse := range []bool{false, true} {
		opts := kms.ScanOptions{Prefix: []byte("b/"), Start: []byte("a/1"), Reverse: reverse}
		called := false
		err := s.View(t.Context(), func(tx kms.Txn) error {
			return tx.Scan(opts, func(key, value []byte) (bool, error) {
				called = true
				return true, nil
			})
		})
		wantKind(t, fmt.Sprintf("Scan(%s)", fmtOpts(opts)), err, kms.KindInvalid)
		if called {
			t.Errorf("Scan(%s) called fn, want no call", fmtOpts(opts))
		}
	}
}

func testScanStopEarly(t *testing.T, s kms.Store) {
	set(t, s, "k1", "v", "k2", "v", "k3", "v", "k4", "v")
	for _, reverse := range []bool{false, true} {
		opts := kms.ScanOptions{Reverse: reverse}
		var seen []string
		err := s.View(t.Context(), func(tx kms.Txn) error {
			return tx.Scan(opts, func(key, value []byte) (bool, error) {
				seen = append(seen, string(key))
				return len(seen) < 2, nil
			})
		})
		want := []string{"k1", "k2"}
		if reverse {
			want = []string{"k4", "k3"}
		}
		if err != nil || !slices.Equal(seen, want) {
			t.Errorf("Scan(%s) stopping after 2 = saw %q, %v; want %q, nil", fmtOpts(opts), seen, err, want)
		}
	}
}

func testScanFnError(t *testing.T, s kms.Store) {
	set(t, s, "k1", "v", "k2", "v", "k3", "v", "k4", "v")
	for _, keysOnly := range []bool{false, true} {
		opts := kms.ScanOptions{KeysOnly: keysOnly}
		var seen int
		var scanErr error
		err := s.View(t.Context(), func(tx kms.Txn) error {
			scanErr = tx.Scan(opts, func(key, value []byte) (bool, error) {
				seen++
				if seen == 3 {
					return true, errBoom
				}
				return true, nil
			})
			return scanErr
		})
		if scanErr != errBoom || seen != 3 {
			t.Errorf("Scan(%s) with fn failing at item 3 = %v after %d items; want %v after 3", fmtOpts(opts), scanErr, seen, errBoom)
		}
		if err != errBoom {
			t.Errorf("View(fn returns Scan error) = %v, want %v", err, errBoom)
		}
	}
}

func testScanKeysOnly(t *testing.T, s kms.Store) {
	set(t, s, "k1", "v1", "k2", "", "k3", "v3")
	got := scan(t, s, kms.ScanOptions{KeysOnly: true})
	if !slices.Equal(keysOf(got), []string{"k1", "k2", "k3"}) {
		t.Fatalf("Scan(KeysOnly) = %q, want %q", keysOf(got), []string{"k1", "k2", "k3"})
	}
	for _, e := range got {
		if e.value != nil {
			t.Errorf("Scan(KeysOnly) value of %q = %q, want nil", e.key, e.value)
		}
	}
	// Without KeysOnly, an empty value is empty but not nil.
	got = scan(t, s, kms.ScanOptions{Prefix: []byte("k2")})
	if len(got) != 1 || got[0].value == nil || len(got[0].value) != 0 {
		t.Errorf("Scan(%q) = %s, want one empty, non-nil value", "k2", fmtKVs(got))
	}
}

func testLargeValue(t *testing.T, s kms.Store) {
	// Just under 1 MiB: Badger's in-memory mode holds nothing larger.
	const size = 1<<20 - 1
	big := make([]byte, size)
	for i := range big {
		big[i] = byte(i*7 + i>>11)
	}
	err := s.Update(t.Context(), func(tx kms.Txn) error {
		return tx.Set([]byte("big"), big)
	})
	if err != nil {
		t.Fatalf("Update(Set(%q, %d bytes)) = %v, want nil", "big", size, err)
	}
	got, err := get(t, s, "big")
	if err != nil || !bytes.Equal(got, big) {
		t.Errorf("Get(%q) = %d bytes, %v; want the %d bytes written, nil", "big", len(got), err, size)
	}
	kvs := scan(t, s, kms.ScanOptions{})
	if len(kvs) != 1 || !bytes.Equal(kvs[0].value, big) {
		t.Errorf("Scan(all) = %d items, want %q with the %d bytes written", len(kvs), "big", size)
	}
}

func testManyKeys(t *testing.T, s kms.Store) {
	const n, batch = 10000, 500
	order := rand.Perm(n)
	for i := 0; i < n; i += batch {
		err := s.Update(t.Context(), func(tx kms.Txn) error {
			for _, j := range order[i : i+batch] {
				k := fmt.Sprintf("key/%06d", j)
				if err := tx.Set([]byte(k), []byte(k)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("Update(batch %d) = %v, want nil", i/batch, err)
		}
	}
	for _, reverse := range []bool{false, true} {
		opts := kms.ScanOptions{Prefix: []byte("key/"), Reverse: reverse}
		i := 0
		err := s.View(t.Context(), func(tx kms.Txn) error {
			return tx.Scan(opts, func(key, value []byte) (bool, error) {
				j := i
				if reverse {
					j = n - 1 - i
				}
				want := fmt.Sprintf("key/%06d", j)
				if string(key) != want || string(value) != want {
					return false, fmt.Errorf("item %d = %q: %q, want %q: %q", i, key, value, want, want)
				}
				i++
				return true, nil
			})
		})
		if err != nil || i != n {
			t.Errorf("Scan(%s) = %v after %d items, want nil after %d", fmtOpts(opts), err, i, n)
		}
	}
}

// increment adds one to the decimal counter under key, reading it in the
// same transaction, and counts its runs.
func increment(ctx context.Context, s kms.Store, key string, runs *int) error {
	return s.Update(ctx, func(tx kms.Txn) error {
		*runs++
		var n int
		v, err := tx.Get([]byte(key))
		switch {
		case errors.Is(err, kms.ErrNotFound):
		case err != nil:
			return err
		default:
			if _, err := fmt.Sscan(string(v), &n); err != nil {
				return fmt.Errorf("counter %q: %w", v, err)
			}
		}
		return tx.Set([]byte(key), []byte(fmt.Sprint(n+1)))
	})
}

func testConcurrentCounter(t *testing.T, s kms.Store) {
	const workers, perWorker = 4, 25
	var wg sync.WaitGroup
	var mu sync.Mutex
	totalRuns := 0
	start := make(chan struct{})
	for w := range workers {
		wg.Go(func() {
			<-start
			runs := 0
			for i := range perWorker {
				if err := increment(t.Context(), s, "counter", &runs); err != nil {
					t.Errorf("worker %d: increment %d = %v, want nil", w, i, err)
					return
				}
			}
			mu.Lock()
			totalRuns += runs
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	wantValue(t, s, "counter", fmt.Sprint(workers*perWorker))
	if totalRuns < workers*perWorker {
		t.Errorf("increment fns ran %d times, want at least %d", totalRuns, workers*perWorker)
	}
	t.Logf("%d increments took %d runs of fn", workers*perWorker, totalRuns)
}

func testConcurrentWriters(t *testing.T, s kms.Store) {
	const workers, perWorker = 4, 50
	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := range workers {
		wg.Go(func() {
			<-start
			for i := range perWorker {
				k := fmt.Sprintf("w%d/%03d", w, i)
				err := s.Update(t.Context(), func(tx kms.Txn) error {
					return tx.Set([]byte(k), []byte(k))
				})
				if err != nil {
					t.Errorf("Update(Set(%q)) = %v, want nil", k, err)
					return
				}
			}
		})
	}
	close(start)
	wg.Wait()
	got := scan(t, s, kms.ScanOptions{})
	if len(got) != workers*perWorker {
		t.Fatalf("Scan(all) = %d items, want %d", len(got), workers*perWorker)
	}
	i := 0
	for w := range workers {
		for j := range perWorker {
			want := fmt.Sprintf("w%d/%03d", w, j)
			if got[i].key != want || string(got[i].value) != want {
				t.Errorf("Scan(all) item %d = %q: %q, want %q: %q", i, got[i].key, got[i].value, want, want)
			}
			i++
		}
	}
}

func testScanContextCanceled(t *testing.T, s kms.Store) {
	const n, cancelAt = 1000, 10
	err := s.Update(t.Context(), func(tx kms.Txn) error {
		for i := range n {
			if err := tx.Set(fmt.Appendf(nil, "k%04d", i), []byte("v")); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Update(set %d keys) = %v, want nil", n, err)
	}

	for _, view := range []bool{true, false} {
		name := "Update"
		run := s.Update
		if view {
			name, run = "View", s.View
		}
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			seen := 0
			var scanErr error
			err := run(ctx, func(tx kms.Txn) error {
				scanErr = tx.Scan(kms.ScanOptions{}, func(key, value []byte) (bool, error) {
					seen++
					if seen == cancelAt {
						cancel()
					}
					return true, nil
				})
				return scanErr
			})
			if !errors.Is(scanErr, context.Canceled) || seen >= n {
				t.Errorf("Scan canceled at item %d = %v after %d items; want context.Canceled before %d", cancelAt, scanErr, seen, n)
			}
			if !errors.Is(err, context.Canceled) {
				t.Errorf("%s(fn returns Scan error) = %v, want context.Canceled", name, err)
			}
		})
	}
}

func testContextCanceledBeforeStart(t *testing.T, s kms.Store) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := s.Update(ctx, func(tx kms.Txn) error {
		return tx.Set([]byte("k"), []byte("v"))
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Update(canceled ctx) = %v, want context.Canceled", err)
	}
	wantMissing(t, s, "k")

	err = s.View(ctx, func(tx kms.Txn) error { return nil })
	if !errors.Is(err, context.Canceled) {
		t.Errorf("View(canceled ctx) = %v, want context.Canceled", err)
	}
}

// interfere commits, from another goroutine, a blind write of key while
// the caller's transaction is open, and waits for it.
func interfere(t testing.TB, s kms.Store, key, value string) {
	t.Helper()
	done := make(chan error)
	go func() {
		done <- s.Update(context.Background(), func(tx kms.Txn) error {
			return tx.Set([]byte(key), []byte(value))
		})
	}()
	if err := <-done; err != nil {
		t.Errorf("interfering Update(Set(%q)) = %v, want nil", key, err)
	}
}

func testUpdateRetryRerunsFn(t *testing.T, s kms.Store) {
	set(t, s, "counter", "0")
	runs := 0
	err := s.Update(t.Context(), func(tx kms.Txn) error {
		runs++
		v, err := tx.Get([]byte("counter"))
		if err != nil {
			return err
		}
		var n int
		if _, err := fmt.Sscan(string(v), &n); err != nil {
			return err
		}
		if runs == 1 {
			// Another transaction changes what this one read before it
			// commits: a serialisable store must not commit this run.
			interfere(t, s, "counter", "10")
		}
		if err := tx.Set([]byte("side"), []byte(fmt.Sprint(runs))); err != nil {
			return err
		}
		return tx.Set([]byte("counter"), []byte(fmt.Sprint(n+1)))
	})
	if err != nil {
		t.Fatalf("Update = %v, want nil", err)
	}
	if runs < 2 {
		t.Errorf("Update ran fn %d times, want at least 2 (the first run conflicted)", runs)
	}
	// The first run's writes were thrown away; only the last run's count.
	wantValue(t, s, "counter", "11")
	wantValue(t, s, "side", fmt.Sprint(runs))
}

func testUpdateGivesUpOnConflict(t *testing.T, s kms.Store) {
	const limit = 1000
	set(t, s, "hot", "0")
	runs := 0
	err := s.Update(t.Context(), func(tx kms.Txn) error {
		runs++
		if runs > limit {
			return fmt.Errorf("fn ran more than %d times: %w", limit, errBoom)
		}
		if _, err := tx.Get([]byte("hot")); err != nil {
			return err
		}
		interfere(t, s, "hot", fmt.Sprint(runs))
		return tx.Set([]byte("mine"), []byte("v"))
	})
	if errors.Is(err, errBoom) {
		t.Fatalf("Update never gave up: %v", err)
	}
	if !errors.Is(err, kms.ErrConflict) {
		t.Errorf("Update(every commit conflicts) = %v, want errors.Is(err, kms.ErrConflict)", err)
	}
	wantKind(t, "Update(every commit conflicts)", err, kms.KindConflict)
	if runs < 2 {
		t.Errorf("Update ran fn %d times before giving up, want at least 2", runs)
	}
	wantMissing(t, s, "mine")
	t.Logf("Update gave up after %d runs", runs)
}

// equalKVs reports whether two scans saw the same keys and values.
func equalKVs(a, b []kv) bool {
	return slices.EqualFunc(a, b, func(x, y kv) bool {
		return x.key == y.key && bytes.Equal(x.value, y.value)
	})
}

// fmtKVs renders a scan for failure messages.
func fmtKVs(kvs []kv) string {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, e := range kvs {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%q: %q", e.key, e.value)
	}
	b.WriteByte(']')
	return b.String()
}
