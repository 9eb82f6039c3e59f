package schedule

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ringkms/kms/internal/base/basetest"
)

func TestKeyParse(t *testing.T) {
	x := Index{Prefix: []byte("due/")}
	for _, tc := range []struct {
		name string
		at   int64
		a, b string
	}{
		{"zero time", 0, "ring", "key"},
		{"now", time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC).UnixMilli(), "r_1", "k_2"},
		{"empty IDs", 42, "", ""},
		{"largest time", 1<<63 - 1, "a", "b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			at, a, b, ok := x.Parse(x.Key(tc.at, tc.a, tc.b))
			if !ok || at != tc.at || a != tc.a || b != tc.b {
				t.Errorf("Parse(Key(%d, %q, %q)) = %d, %q, %q, %v", tc.at, tc.a, tc.b, at, a, b, ok)
			}
		})
	}
	for _, k := range []string{"due/", "due/1234567", "other/12345678a\x00b", "due/12345678ab"} {
		if _, _, _, ok := x.Parse([]byte(k)); ok {
			t.Errorf("Parse(%q) ok, want not an entry", k)
		}
	}
}

// TestKeyOrder: the store's byte order of the entries is their time order,
// whatever their IDs.
func TestKeyOrder(t *testing.T) {
	x := Index{Prefix: []byte("due/")}
	times := []int64{0, 1, 255, 256, 65535, 1 << 40, time.Now().UnixMilli(), 1<<63 - 1}
	var keys []string
	for i, at := range times {
		keys = append(keys, string(x.Key(at, fmt.Sprint("ring", len(times)-i), "zzz")))
	}
	if !slices.IsSorted(keys) {
		t.Errorf("entries in time order are not in byte order: %q", keys)
	}
}

func TestDue(t *testing.T) {
	x := Index{Prefix: []byte("due/")}
	other := Index{Prefix: []byte("dux/")}
	tx := basetest.MemTxn{}
	for i := range int64(10) {
		tx.Set(x.Key(100*i, fmt.Sprint("r", i), "k"), nil)
		tx.Set(other.Key(0, "r", fmt.Sprint("k", i)), nil)
	}
	for _, tc := range []struct {
		name     string
		now      int64
		limit    int
		wantDue  int
		wantNext int64 // unix ms; -1: zero time
	}{
		{"none due", -1, 100, 0, 0},
		{"some due", 450, 100, 5, 500},
		{"limit stops first", 450, 3, 3, -1},
		{"limit equals due", 450, 5, 5, -1},
		{"all due", 900, 100, 10, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			due, next, err := x.Due(tx, tc.limit, tc.now)
			if err != nil {
				t.Fatal(err)
			}
			if len(due) != tc.wantDue {
				t.Fatalf("Due(%d, %d) gave %d entries, want %d", tc.limit, tc.now, len(due), tc.wantDue)
			}
			for i, k := range due {
				if at, _, _, ok := x.Parse(k); !ok || at != 100*int64(i) {
					t.Errorf("entry %d = %q, want the one due at %d", i, k, 100*i)
				}
			}
			want := time.Time{}
			if tc.wantNext >= 0 {
				want = time.UnixMilli(tc.wantNext)
			}
			if !next.Equal(want) {
				t.Errorf("Due(%d, %d) next = %v, want %v", tc.limit, tc.now, next, want)
			}
		})
	}
}

// TestDueMalformed: an entry that is not well formed is answered as due,
// so that its caller drops it instead of stopping on it each pass.
func TestDueMalformed(t *testing.T) {
	x := Index{Prefix: []byte("due/")}
	tx := basetest.MemTxn{}
	tx.Set([]byte("due/\x00"), nil) // too short to hold a time
	tx.Set(x.Key(1000, "r", "k"), nil)
	due, next, err := x.Due(tx, 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(due) != 1 || string(due[0]) != "due/\x00" || !next.Equal(time.UnixMilli(1000)) {
		t.Errorf("Due = %q, %v; want the malformed entry and next at 1000", due, next)
	}
}
