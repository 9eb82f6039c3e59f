package kms_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ringkms/kms"
)

func TestParseLimit(t *testing.T) {
	tests := []struct {
		in   string
		want int
		ok   bool
	}{
		{"", 0, true}, {"1", 1, true}, {"100", 100, true}, {"10000", 10000, true},
		{"10001", 10000, true}, {"99999999999999999999999", 10000, true},
		{"0", 0, false}, {"-1", 0, false}, {"abc", 0, false}, {"1.5", 0, false}, {"-99999999999999999999", 0, false},
	}
	for _, tt := range tests {
		got, err := kms.ParseLimit(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseLimit(%q) = %d, %v; want %d, ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestListKeyRingsPages(t *testing.T) {
	e := newEnv(t)
	want := map[string]bool{}
	for i := 0; i < 23; i++ {
		name := fmt.Sprintf("ring-%02d", i)
		e.ring(t, name)
		want[name] = true
	}
	seen := map[string]bool{}
	pages := 0
	eachPage(t, 5, func(req kms.PageRequest) (*kms.List[*kms.KeyRing], error) {
		return e.svc.ListKeyRings(e.root, req)
	}, func(page *kms.List[*kms.KeyRing]) {
		pages++
		if page.Pagination.Count != len(page.Data) || page.Pagination.Limit != 5 {
			t.Fatalf("page %d: pagination %+v with %d items", pages, page.Pagination, len(page.Data))
		}
		if page.Pagination.HasMore != (page.Pagination.NextCursor != "") {
			t.Fatalf("page %d: hasMore %v with nextCursor %q", pages, page.Pagination.HasMore, page.Pagination.NextCursor)
		}
		for _, r := range page.Data {
			if seen[r.Name] {
				t.Fatalf("ring %s listed twice", r.Name)
			}
			seen[r.Name] = true
		}
	})
	if len(seen) != len(want) || pages != 5 {
		t.Fatalf("listed %d rings in %d pages, want %d in 5", len(seen), pages, len(want))
	}
}

func TestCursorIsSealedAndBound(t *testing.T) {
	e := newEnv(t)
	for i := 0; i < 3; i++ {
		e.ring(t, fmt.Sprintf("r%d", i))
	}
	page, err := e.svc.ListKeyRings(e.root, kms.PageRequest{Limit: 1})
	if err != nil || !page.Pagination.HasMore {
		t.Fatalf("ListKeyRings = %+v, %v", page, err)
	}
	cur := page.Pagination.NextCursor
	for i := 0; i < len(cur); i++ {
		c := []byte(cur)
		c[i] ^= 0x01
		if _, err := e.svc.ListKeyRings(e.root, kms.PageRequest{Cursor: string(c), Limit: 1}); !isInvalid(err) {
			t.Fatalf("ListKeyRings(cursor altered at %d) = %v, want invalid", i, err)
		}
	}
	_, err = e.svc.ListKeys(e.root, kms.RingRef{Name: "r0"}, kms.PageRequest{Cursor: cur})
	wantKind(t, "ListKeys(cursor of ListKeyRings)", err, kms.KindInvalid)
	_, err = e.svc.ListKeyRings(e.root, kms.PageRequest{Limit: -1})
	wantKind(t, "ListKeyRings(limit -1)", err, kms.KindInvalid)
	big, err := e.svc.ListKeyRings(e.root, kms.PageRequest{Limit: 50000})
	if err != nil || big.Pagination.Limit != kms.MaxPageLimit {
		t.Fatalf("ListKeyRings(limit 50000) = %+v, %v; want the limit capped", big.Pagination, err)
	}
}

func isInvalid(err error) bool { return kms.ErrorKind(err) == kms.KindInvalid && err != nil }

// TestPagingWhileWriting pages through a ring's keys while rotations add
// keys: no key is listed twice and every key that existed before paging
// began is listed.
func TestPagingWhileWriting(t *testing.T) {
	e := newEnv(t)
	e.ring(t, "grow")
	before := map[string]bool{}
	for i := 0; i < 30; i++ {
		k, err := e.svc.Rotate(e.root, kms.RotateInput{RingName: "grow"})
		if err != nil {
			t.Fatal(err)
		}
		before[k.ID] = true
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 30; i++ {
			if _, err := e.svc.Rotate(e.root, kms.RotateInput{RingName: "grow"}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	seen := map[string]bool{}
	eachPage(t, 4, func(req kms.PageRequest) (*kms.List[*kms.Key], error) {
		return e.svc.ListKeys(e.root, kms.RingRef{Name: "grow"}, req)
	}, func(page *kms.List[*kms.Key]) {
		for _, k := range page.Data {
			if seen[k.ID] {
				t.Fatalf("key %s listed twice", k.ID)
			}
			seen[k.ID] = true
		}
	})
	wg.Wait()
	for id := range before {
		if !seen[id] {
			t.Errorf("key %s existed before paging and was not listed", id)
		}
	}
}

// TestKeysListInCreationOrder checks that keys made within one millisecond
// still list in the order they were made.
func TestKeysListInCreationOrder(t *testing.T) {
	e, _ := newEnvAt(t, time.UnixMilli(1_800_000_000_000))
	first := e.ring(t, "still")
	made := []string{first.Key.ID}
	for i := 0; i < 40; i++ {
		k, err := e.svc.Rotate(e.root, kms.RotateInput{RingName: "still"})
		if err != nil {
			t.Fatal(err)
		}
		made = append(made, k.ID)
	}
	list, err := e.svc.ListKeys(e.root, kms.RingRef{Name: "still"}, kms.PageRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range list.Data {
		if k.ID != made[i] {
			t.Fatalf("key %d listed is %s, want %s (creation order)", i, k.ID, made[i])
		}
	}
}
