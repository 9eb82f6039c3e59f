package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ringkms/kms"
)

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
