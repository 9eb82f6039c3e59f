package kms_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/kmstest"
)

// searchAll pages through SearchActivity with limit and returns every
// record, in order, checking the pagination object of each page.
func searchAll(t *testing.T, svc *kms.Service, ctx context.Context, f kms.ActivityFilter, limit int) []*kms.Activity {
	t.Helper()
	var out []*kms.Activity
	req := kms.PageRequest{Limit: limit}
	for {
		l, err := svc.SearchActivity(ctx, f, req)
		if err != nil {
			t.Fatalf("SearchActivity(%+v, page %d) = %v", f, len(out)/limit+1, err)
		}
		pg := l.Pagination
		if pg.Count != len(l.Data) || pg.Count > limit || pg.Limit != limit ||
			pg.HasMore != (pg.NextCursor != "") || pg.HasMore && pg.Count != limit {
			t.Fatalf("SearchActivity(%+v): pagination %+v with %d records", f, pg, len(l.Data))
		}
		out = append(out, l.Data...)
		if !pg.HasMore {
			return out
		}
		req.Cursor = pg.NextCursor
	}
}

// wantRecords computes, from the raw trail recs, the IDs of the records
// that a search should have returned: those that match, among the first
// head records, the trail as it was at the search's first page.
func wantRecords(recs []kms.Activity, head uint64, match func(a kms.Activity) bool) []string {
	ids := []string{}
	for _, a := range recs {
		if a.Seq <= head && match(a) {
			ids = append(ids, a.ID)
		}
	}
	return ids
}

func ids(acts []*kms.Activity) []string {
	out := make([]string, len(acts))
	for i, a := range acts {
		out[i] = a.ID
	}
	return out
}

// filterMatch is the meaning of an ActivityFilter, written independently
// of the Service, for the expected sets. uids maps Account uids to IDs.
func filterMatch(f kms.ActivityFilter, uids map[string]string) func(kms.Activity) bool {
	return func(a kms.Activity) bool {
		if f.AccountUID != "" {
			id, ok := uids[f.AccountUID]
			if !ok || a.AccountID != id {
				return false
			}
		}
		if f.AccountID != "" && a.AccountID != f.AccountID ||
			f.Action != "" && a.Action != f.Action ||
			f.Ring != "" && a.Ring != strings.ToLower(f.Ring) ||
			f.KeyID != "" && a.KeyID != f.KeyID ||
			f.Start != nil && a.CreatedAt < *f.Start ||
			f.End != nil && a.CreatedAt > *f.End ||
			f.Valid != nil && a.Valid != *f.Valid {
			return false
		}
		for name, want := range f.Props {
			got, ok := a.Props[name]
			if !ok {
				return false
			}
			g, _ := json.Marshal(got)
			w, _ := json.Marshal(want)
			if string(g) != string(w) {
				return false
			}
		}
		return true
	}
}

func ptr[T any](v T) *T { return &v }

// activityTrail is a trail with two Accounts, two rings, granted and denied
// operations of several API keys, and a searcher that sees every Account.
type activityTrail struct {
	*env
	st                   kms.Store
	encA, encB, weak     string          // API key IDs
	searcher             context.Context // activity.read and accounts.all
	acctB                string
	alphaID, alphaKeyID  string
	uids                 map[string]string
	tenantB, tenantBNone context.Context // Account B with activity.read; without it
}

func newActivityTrail(t *testing.T) *activityTrail {
	t.Helper()
	st := kmstest.MemoryStore(t)
	e := newEnvOn(t, st, kms.Options{MasterKey: kms.GenerateMasterKey()})
	tr := &activityTrail{env: e, st: st}
	alpha := e.ring(t, "alpha")
	e.ring(t, "beta")
	tr.alphaID = alpha.Ring.ID
	b := e.account(t, "tenant-b")
	tr.acctB = b.ID
	tr.uids = map[string]string{"root": e.acct, "tenant-b": b.ID}
	keyOf := func(acct string, flags kms.Flags) (context.Context, string) {
		t.Helper()
		ctx := e.asIn(t, acct, flags)
		return ctx, kms.PrincipalFrom(ctx).ID
	}
	encA, encAID := keyOf(e.acct, kms.Flags{"keyring.alpha.encrypt": true, "keyring.alpha.decrypt": true})
	encB, encBID := keyOf(b.ID, kms.Flags{"keyring.beta.encrypt": true, "keyring.*.read": true})
	weak, weakID := keyOf(e.acct, kms.Flags{"keyring.alpha.read": true})
	tr.encA, tr.encB, tr.weak = encAID, encBID, weakID
	tr.searcher, _ = keyOf(e.acct, kms.Flags{kms.FlagActivityRead: true, kms.FlagAllAccounts: true})
	tr.tenantB, _ = keyOf(b.ID, kms.Flags{kms.FlagActivityRead: true})
	tr.tenantBNone, _ = keyOf(b.ID, kms.Flags{"keyring.beta.read": true})

	for i := range 5 {
		res, err := e.svc.Encrypt(encA, kms.EncryptInput{RingName: "alpha"})
		if err != nil {
			t.Fatal(err)
		}
		tr.alphaKeyID = res.Key.ID
		if i < 3 {
			if _, err := e.svc.Decrypt(encA, kms.DecryptInput{Hash: res.Hash, Header: res.Header}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range 4 {
		if _, err := e.svc.Encrypt(encB, kms.EncryptInput{RingName: "beta"}); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		_, err := e.svc.Encrypt(encB, kms.EncryptInput{RingName: "alpha"})
		wantKind(t, "Encrypt(alpha) by Account B", err, kms.KindPermissionDenied)
	}
	for range 3 {
		_, err := e.svc.Rotate(weak, kms.RotateInput{RingName: "alpha"})
		wantKind(t, "Rotate without flag", err, kms.KindPermissionDenied)
	}
	for range 2 {
		if _, err := e.svc.GetKeyRing(weak, kms.RingRef{Name: "alpha"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.svc.GetKeyRing(encB, kms.RingRef{Name: "Beta"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Rotate(e.root, kms.RotateInput{RingName: "beta"}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int64{1000, 1_000_000} {
		cfg := &kms.KeyRingConfig{}
		cfg.Algos.AES256.MaxEncryptCount = n
		if _, err := e.svc.SetConfig(e.root, kms.RingRef{Name: "beta"}, cfg); err != nil {
			t.Fatal(err)
		}
	}
	return tr
}

func TestSearchActivityFilters(t *testing.T) {
	tr := newActivityTrail(t)
	recs := records(t, tr.st)
	mid1, mid2 := recs[len(recs)/3].CreatedAt, recs[2*len(recs)/3].CreatedAt
	cases := []struct {
		name string
		f    kms.ActivityFilter
		min  int // at least this many records match, so that the case says something
	}{
		// These match the searches' own records too, which the trail
		// gathers as the test goes on: they come first.
		{"none", kms.ActivityFilter{}, 30},
		{"accountUid of root", kms.ActivityFilter{AccountUID: "root"}, 20},
		{"valid true", kms.ActivityFilter{Valid: ptr(true)}, 25},
		{"props result ok", kms.ActivityFilter{Props: map[string]any{"result": "ok"}}, 25},

		{"keyid", kms.ActivityFilter{KeyID: tr.encA}, 8},
		{"ring, any case", kms.ActivityFilter{Ring: "ALPHA"}, 15},
		{"accountId", kms.ActivityFilter{AccountID: tr.acctB}, 7},
		{"accountUid", kms.ActivityFilter{AccountUID: "tenant-b"}, 7},
		{"action", kms.ActivityFilter{Action: "encrypt"}, 9},
		{"valid false", kms.ActivityFilter{Valid: ptr(false)}, 5},
		{"time", kms.ActivityFilter{Start: &mid1, End: &mid2}, 1},
		{"props string", kms.ActivityFilter{Props: map[string]any{"ringId": tr.alphaID}}, 10},
		{"props flag", kms.ActivityFilter{Props: map[string]any{"flag": "keyring.alpha.rotate"}}, 3},
		{"props action", kms.ActivityFilter{Props: map[string]any{"action": "decrypt"}}, 3},
		{"props ring", kms.ActivityFilter{Props: map[string]any{"ring": "beta"}}, 5},
		{"props number", kms.ActivityFilter{Props: map[string]any{"maxEncryptCount": 1e6}}, 1},
		{"props two", kms.ActivityFilter{Props: map[string]any{"ringId": tr.alphaID, "keyId": tr.alphaKeyID}}, 8},
		{"keyid and valid", kms.ActivityFilter{KeyID: tr.encB, Valid: ptr(false)}, 2},
		{"keyid and props", kms.ActivityFilter{KeyID: tr.weak, Props: map[string]any{"flag": "keyring.alpha.rotate"}}, 3},
		{"keyid, ring, action", kms.ActivityFilter{KeyID: tr.encB, Ring: "alpha", Action: "encrypt"}, 2},
		{"ring and account", kms.ActivityFilter{Ring: "beta", AccountUID: "tenant-b", Valid: ptr(true)}, 5},
		{"account and action", kms.ActivityFilter{AccountID: tr.acct, Action: "keyring.rotate", Valid: ptr(false)}, 3},
		{"action and props", kms.ActivityFilter{Action: "encrypt", Props: map[string]any{"ringId": tr.alphaID}}, 5},
		{"props and valid", kms.ActivityFilter{Props: map[string]any{"flag": "keyring.alpha.encrypt"}, Valid: ptr(false)}, 2},
		{"ring and time", kms.ActivityFilter{Ring: "alpha", Start: &mid1}, 1},
		{"valid and time", kms.ActivityFilter{Valid: ptr(true), End: &mid2}, 1},
		{"end at the largest time", kms.ActivityFilter{KeyID: tr.encA, End: ptr(int64(math.MaxInt64))}, 8},
		{"unknown accountUid", kms.ActivityFilter{AccountUID: "nope"}, 0},
		{"accountUid and another accountId", kms.ActivityFilter{AccountUID: "tenant-b", AccountID: tr.acct}, 0},
		{"props action not a string", kms.ActivityFilter{Props: map[string]any{"action": 7}}, 0},
		{"nothing matches", kms.ActivityFilter{KeyID: tr.encA, Action: "keyring.rotate"}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// Each search is by its own API key, so that its records
			// (which some filters match) are told apart.
			limits := []int{2, 5, 1000}
			got := make([][]string, len(limits))
			heads := make([]uint64, len(limits))
			for i, limit := range limits {
				ctx := tr.as(t, kms.Flags{kms.FlagActivityRead: true, kms.FlagAllAccounts: true})
				heads[i] = lastSeq(t, tr.st)
				got[i] = ids(searchAll(t, tr.svc, ctx, c.f, limit))
			}
			recs := records(t, tr.st)
			for i, limit := range limits {
				want := wantRecords(recs, heads[i], filterMatch(c.f, tr.uids))
				if !slices.Equal(got[i], want) {
					t.Fatalf("SearchActivity(%+v, limit %d) = %d records %v,\nwant %d records %v", c.f, limit, len(got[i]), got[i], len(want), want)
				}
				if len(want) < c.min {
					t.Fatalf("SearchActivity(%+v) = %d records; the trail was meant to hold at least %d", c.f, len(want), c.min)
				}
			}
		})
	}
}

// TestSearchActivityIndexChoice checks which index serves a search, as the
// search's own record says, against the documented order of preference.
func TestSearchActivityIndexChoice(t *testing.T) {
	tr := newActivityTrail(t)
	searcherID := kms.PrincipalFrom(tr.searcher).ID
	all := kms.ActivityFilter{KeyID: tr.encB, Ring: "alpha", AccountID: tr.acctB, Action: "encrypt",
		Props: map[string]any{"flag": "keyring.alpha.encrypt"}, Valid: ptr(false), Start: ptr(int64(0))}
	cases := []struct {
		name string
		f    kms.ActivityFilter
		want string
	}{
		{"every filter", all, "keyid"},
		{"ring before account", kms.ActivityFilter{Ring: "alpha", AccountID: tr.acctB, Action: "encrypt"}, "ring"},
		{"props ring", kms.ActivityFilter{AccountID: tr.acctB, Props: map[string]any{"ring": "alpha"}}, "ring"},
		{"account before action", kms.ActivityFilter{AccountUID: "tenant-b", Action: "encrypt", Valid: ptr(false)}, "account"},
		{"action before props", kms.ActivityFilter{Action: "encrypt", Props: map[string]any{"ringId": tr.alphaID}}, "action"},
		{"props action", kms.ActivityFilter{Props: map[string]any{"action": "encrypt", "ringId": tr.alphaID}}, "action"},
		{"props before valid", kms.ActivityFilter{Props: map[string]any{"flag": "keyring.alpha.encrypt"}, Valid: ptr(false)}, "props"},
		{"props result ok has no index", kms.ActivityFilter{Props: map[string]any{"result": "ok"}, Valid: ptr(false)}, "valid"},
		{"valid false", kms.ActivityFilter{Valid: ptr(false), End: ptr(int64(math.MaxInt64))}, "valid"},
		{"valid true has no index", kms.ActivityFilter{Valid: ptr(true)}, "trail"},
		{"time", kms.ActivityFilter{Start: ptr(int64(0))}, "trail"},
		{"none", kms.ActivityFilter{}, "trail"},
		{"nothing can match", kms.ActivityFilter{AccountUID: "nope"}, "none"},
	}
	for _, c := range cases {
		if _, err := tr.svc.SearchActivity(tr.searcher, c.f, kms.PageRequest{Limit: 1}); err != nil {
			t.Fatalf("%s: SearchActivity(%+v) = %v", c.name, c.f, err)
		}
		recs := records(t, tr.st)
		last := recs[len(recs)-1]
		if last.Action != "activity.search" || last.KeyID != searcherID || last.Props["index"] != c.want {
			t.Errorf("%s: SearchActivity(%+v) recorded %s by %s with props %v, want index %q", c.name, c.f, last.Action, last.KeyID, last.Props, c.want)
		}
	}
	if _, err := tr.svc.VerifyActivityChain(t.Context()); err != nil {
		t.Fatalf("VerifyActivityChain = %v", err)
	}
}

func TestSearchActivityTimeRange(t *testing.T) {
	const t0 = int64(1_700_000_000_000)
	clock := kmstest.ClockAt(time.UnixMilli(t0))
	st := kmstest.MemoryStore(t)
	e := newEnvOn(t, st, kms.Options{MasterKey: kms.GenerateMasterKey(), Now: clock.Now})
	e.ring(t, "timed")
	searcher := e.as(t, kms.Flags{kms.FlagActivityRead: true, kms.FlagAllAccounts: true})
	reader := e.as(t, kms.Flags{"keyring.timed.read": true})
	readerID := kms.PrincipalFrom(reader).ID
	// Several records in one millisecond, gaps, and a clock that goes back
	// (the trail's time does not).
	for _, step := range []struct{ at, n int64 }{{10, 3}, {11, 2}, {13, 1}, {20, 2}, {5, 1}, {21, 1}} {
		clock.Set(time.UnixMilli(t0 + step.at))
		for range step.n {
			if _, err := e.svc.GetKeyRing(reader, kms.RingRef{Name: "timed"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	clock.Set(time.UnixMilli(t0 + 1000)) // the searches' own records
	at := func(d int64) *int64 { return ptr(t0 + d) }
	cases := []struct {
		name       string
		start, end *int64
		n          int // records of reader in range
	}{
		{"one millisecond", at(10), at(10), 3},
		{"two", at(10), at(11), 5},
		{"start inside a gap", at(12), at(13), 1},
		{"both in a gap", at(12), at(12), 0},
		{"end inside a gap", at(11), at(19), 3},
		{"clock went back", at(20), at(20), 3},
		{"start only", at(13), nil, 5},
		{"end only", nil, at(11), 5},
		{"before the trail", ptr(int64(0)), ptr(t0 - 1), 0},
		{"before the epoch", ptr(int64(-5)), at(10), 3},
		{"after the trail", at(2000), nil, 0},
		{"everything", ptr(int64(math.MinInt64)), ptr(int64(math.MaxInt64)), 10},
		{"start equals end at the last record", at(21), at(21), 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, f := range []kms.ActivityFilter{
				{Start: c.start, End: c.end},
				{Start: c.start, End: c.end, KeyID: readerID},
				{Start: c.start, End: c.end, Action: "keyring.read", Ring: "timed"},
				{Start: c.start, End: c.end, Valid: ptr(true)},
			} {
				head := lastSeq(t, st)
				got := ids(searchAll(t, e.svc, searcher, f, 2))
				want := wantRecords(records(t, st), head, filterMatch(f, nil))
				if !slices.Equal(got, want) {
					t.Fatalf("SearchActivity(%+v) = %v, want %v", f, got, want)
				}
			}
			f := kms.ActivityFilter{Start: c.start, End: c.end, KeyID: readerID}
			if got := searchAll(t, e.svc, searcher, f, 2); len(got) != c.n {
				t.Fatalf("SearchActivity(%+v) = %d records, want %d", f, len(got), c.n)
			}
		})
	}
	_, err := e.svc.SearchActivity(searcher, kms.ActivityFilter{Start: at(11), End: at(10)}, kms.PageRequest{})
	wantKind(t, "SearchActivity(start > end)", err, kms.KindInvalid)
}

func TestSearchActivityTenancy(t *testing.T) {
	tr := newActivityTrail(t)
	// Without accounts.all, the search is the caller's own Account's.
	for _, f := range []kms.ActivityFilter{{}, {AccountID: tr.acctB}, {AccountUID: "tenant-b"}, {Ring: "alpha"}} {
		head := lastSeq(t, tr.st)
		got := searchAll(t, tr.svc, tr.tenantB, f, 4)
		want := wantRecords(records(t, tr.st), head, func(a kms.Activity) bool {
			return a.AccountID == tr.acctB && filterMatch(f, tr.uids)(a)
		})
		if !slices.Equal(ids(got), want) || len(want) == 0 && f.Ring == "" {
			t.Fatalf("tenant SearchActivity(%+v) = %v, want %v", f, ids(got), want)
		}
	}
	for _, f := range []kms.ActivityFilter{
		{AccountID: tr.acct},
		{AccountUID: "root"},
		{AccountUID: "nope"}, // says nothing of whether the uid exists
		{AccountID: tr.acctB, AccountUID: "root"},
	} {
		_, err := tr.svc.SearchActivity(tr.tenantB, f, kms.PageRequest{})
		wantKind(t, fmt.Sprintf("tenant SearchActivity(%+v)", f), err, kms.KindPermissionDenied)
	}
	_, err := tr.svc.SearchActivity(tr.tenantBNone, kms.ActivityFilter{}, kms.PageRequest{})
	wantKind(t, "SearchActivity without activity.read", err, kms.KindPermissionDenied)

	// GetActivity: another Account's record is not found without
	// accounts.all.
	var own, other string
	for _, a := range records(t, tr.st) {
		switch {
		case a.AccountID == tr.acctB && own == "":
			own = a.ID
		case a.AccountID == tr.acct && other == "":
			other = a.ID
		}
	}
	if a, err := tr.svc.GetActivity(tr.tenantB, own); err != nil || a.ID != own {
		t.Fatalf("tenant GetActivity(own) = %+v, %v", a, err)
	}
	_, err = tr.svc.GetActivity(tr.tenantB, other)
	wantKind(t, "tenant GetActivity(another account's)", err, kms.KindNotFound)
	if a, err := tr.svc.GetActivity(tr.searcher, own); err != nil || a.ID != own {
		t.Fatalf("GetActivity(other account's) with accounts.all = %+v, %v", a, err)
	}
	// The denied searches are on the trail, refused (valid false): four of
	// another Account's records, one without activity.read.
	got := searchAll(t, tr.svc, tr.searcher, kms.ActivityFilter{Action: "activity.search", Valid: ptr(false)}, 10)
	if len(got) != 5 {
		t.Fatalf("denied activity.search records = %d, want 5", len(got))
	}
	for _, a := range got {
		if a.Props["result"] != "permission_denied" {
			t.Errorf("denied activity.search record has result %v, want permission_denied", a.Props["result"])
		}
	}
}

func TestSearchActivityBadInput(t *testing.T) {
	tr := newActivityTrail(t)
	svc, ctx := tr.svc, tr.searcher
	f := kms.ActivityFilter{Ring: "alpha", Props: map[string]any{"result": "ok", "ringId": tr.alphaID}}
	first, err := svc.SearchActivity(ctx, f, kms.PageRequest{Limit: 2})
	if err != nil || !first.Pagination.HasMore {
		t.Fatalf("SearchActivity = %+v, %v; want a first page of more", first, err)
	}
	cursor := first.Pagination.NextCursor

	// The same filters, spelt otherwise, take the cursor.
	same := kms.ActivityFilter{Ring: "ALPHA", Props: map[string]any{"ringId": tr.alphaID, "result": "ok"}}
	next, err := svc.SearchActivity(ctx, same, kms.PageRequest{Limit: 2, Cursor: cursor})
	if err != nil || len(next.Data) == 0 || next.Data[0].Seq <= first.Data[1].Seq {
		t.Fatalf("SearchActivity(same filters, cursor) = %+v, %v", next, err)
	}
	// Other filters refuse it.
	for _, other := range []kms.ActivityFilter{
		{},
		{Ring: "beta", Props: f.Props},
		{Ring: "alpha"},
		{Ring: "alpha", Props: f.Props, Valid: ptr(true)},
		{Ring: "alpha", Props: map[string]any{"result": "ok", "ringId": tr.alphaID, "x": 1}},
		{Ring: "alpha", Props: f.Props, Start: ptr(int64(0))},
	} {
		_, err := svc.SearchActivity(ctx, other, kms.PageRequest{Limit: 2, Cursor: cursor})
		wantKind(t, fmt.Sprintf("SearchActivity(%+v, cursor of other filters)", other), err, kms.KindInvalid)
	}
	// Tampered cursors.
	for i := range cursor {
		c := []byte(cursor)
		c[i] ^= 0x01
		_, err := svc.SearchActivity(ctx, f, kms.PageRequest{Limit: 2, Cursor: string(c)})
		wantKind(t, fmt.Sprintf("SearchActivity(cursor altered at %d)", i), err, kms.KindInvalid)
	}
	for _, c := range []string{"x", cursor[:len(cursor)-1], cursor + "A", "!!!"} {
		_, err := svc.SearchActivity(ctx, f, kms.PageRequest{Limit: 2, Cursor: c})
		wantKind(t, fmt.Sprintf("SearchActivity(cursor %q)", c), err, kms.KindInvalid)
	}
	// A cursor of another list.
	rings, err := svc.ListKeyRings(tr.root, kms.PageRequest{Limit: 1})
	if err != nil || rings.Pagination.NextCursor == "" {
		t.Fatalf("ListKeyRings = %+v, %v", rings, err)
	}
	_, err = svc.SearchActivity(ctx, f, kms.PageRequest{Cursor: rings.Pagination.NextCursor})
	wantKind(t, "SearchActivity(cursor of ListKeyRings)", err, kms.KindInvalid)

	_, err = svc.SearchActivity(ctx, f, kms.PageRequest{Limit: -1})
	wantKind(t, "SearchActivity(limit -1)", err, kms.KindInvalid)
	if l, err := svc.SearchActivity(ctx, kms.ActivityFilter{}, kms.PageRequest{Limit: 1_000_000}); err != nil || l.Pagination.Limit != kms.MaxPageLimit {
		t.Fatalf("SearchActivity(limit 1e6) = %+v, %v; want the limit capped", l.Pagination, err)
	}
	if l, err := svc.SearchActivity(ctx, kms.ActivityFilter{}, kms.PageRequest{}); err != nil || l.Pagination.Limit != kms.DefaultPageLimit {
		t.Fatalf("SearchActivity(no limit) = %+v, %v; want the default", l.Pagination, err)
	}

	for name, v := range map[string]any{
		"object": map[string]any{"a": 1},
		"array":  []any{"a"},
		"null":   nil,
	} {
		_, err := svc.SearchActivity(ctx, kms.ActivityFilter{Props: map[string]any{"ringId": v}}, kms.PageRequest{})
		wantKind(t, "SearchActivity(props "+name+")", err, kms.KindInvalid)
	}
}

// lastSeq returns the seq of the last record of the trail.
func lastSeq(t *testing.T, st kms.Store) uint64 {
	t.Helper()
	return st.Trail().Len()
}

// TestSearchActivityPagingWhileWriting pages through more than 25,000
// records with limit 1000 while other callers append records: every
// record that existed when paging began is seen exactly once, none twice,
// in chain order, and nothing appended after the first page is returned.
func TestSearchActivityPagingWhileWriting(t *testing.T) {
	st := kmstest.MemoryStore(t)
	e := newEnvOn(t, st, kms.Options{MasterKey: kms.GenerateMasterKey()})
	e.ring(t, "load")
	writer := e.as(t, kms.Flags{"keyring.load.read": true})
	read := func() error {
		_, err := e.svc.GetKeyRing(writer, kms.RingRef{Name: "load"})
		return err
	}
	const total, writers = 25_000, 8
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for range total / writers {
				if err := read(); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}

	for _, c := range []struct {
		name string
		f    kms.ActivityFilter
	}{
		{"trail", kms.ActivityFilter{}},
		{"action index, from the epoch", kms.ActivityFilter{Action: "keyring.read", Start: ptr(int64(0))}},
	} {
		t.Run(c.name, func(t *testing.T) {
			searcher := e.as(t, kms.Flags{kms.FlagActivityRead: true, kms.FlagAllAccounts: true})
			head := lastSeq(t, st) // the records there before paging: 1 to head
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var written atomic.Int64
			for range 2 {
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						if err := read(); err != nil {
							t.Error(err)
							return
						}
						written.Add(1)
					}
				})
			}
			var got []string
			seen := map[string]bool{}
			var last uint64
			req := kms.PageRequest{Limit: 1000}
			for page := 1; ; page++ {
				l, err := e.svc.SearchActivity(searcher, c.f, req)
				if err != nil {
					close(stop)
					wg.Wait()
					t.Fatalf("page %d: %v", page, err)
				}
				for _, a := range l.Data {
					if seen[a.ID] {
						t.Fatalf("page %d: record %d (%s) seen twice", page, a.Seq, a.ID)
					}
					if a.Seq <= last {
						t.Fatalf("page %d: record %d after record %d", page, a.Seq, last)
					}
					seen[a.ID], last = true, a.Seq
					got = append(got, a.ID)
				}
				if page == 10 {
					close(stop) // the writers stop; the last pages catch up
					wg.Wait()
				}
				if !l.Pagination.HasMore {
					if page <= 10 {
						t.Fatalf("paging ended after %d pages", page)
					}
					break
				}
				req.Cursor = l.Pagination.NextCursor
			}
			if written.Load() == 0 {
				t.Fatal("no record was written while paging")
			}
			recs := records(t, st)
			match := filterMatch(c.f, nil)
			before := 0
			for _, a := range recs {
				if a.Seq <= head && match(a) {
					before++
					if !seen[a.ID] {
						t.Fatalf("record %d (%s), there before paging, was not seen", a.Seq, a.ID)
					}
				}
			}
			if before < total {
				t.Fatalf("%d records matched before paging, want at least %d", before, total)
			}
			// The pages see the trail as it was at the first page, which
			// came between head and the first page's own record: what
			// they return is the matching records up to some point in
			// between, without a gap, and nothing appended later.
			searcherID := kms.PrincipalFrom(searcher).ID
			first := slices.IndexFunc(recs, func(a kms.Activity) bool { return a.Action == "activity.search" && a.KeyID == searcherID })
			if first < 0 {
				t.Fatal("the trail has no record of the search")
			}
			want := wantRecords(recs, recs[first].Seq-1, match)
			if len(got) > len(want) || !slices.Equal(got, want[:len(got)]) {
				t.Fatalf("paging saw %d records, want the first %d or fewer of those before the first page: a record was skipped, or one appended after the first page was returned", len(got), len(want))
			}
			t.Logf("%d records, %d there before paging, %d written while paging", len(got), before, written.Load())
		})
	}
}

// BenchmarkSearchActivity measures one page (limit 100) of activity
// searches served from each kind of index, in trails of 1,000 and 100,000
// records where the 200 records sought are spread over the whole trail. A
// page costs the same whatever the length of the trail.
func BenchmarkSearchActivity(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		e := newEnvOn(b, kmstest.MemoryStore(b), kms.Options{MasterKey: kms.GenerateMasterKey()})
		e.ring(b, "other")
		target := e.ring(b, "target")
		writer := e.as(b, kms.Flags{"keyring.other.read": true})
		sought := e.as(b, kms.Flags{"keyring.target.read": true})
		weak := e.as(b, kms.Flags{"keyring.other.read": true})
		searcher := e.as(b, kms.Flags{kms.FlagActivityRead: true, kms.FlagAllAccounts: true})
		var wg sync.WaitGroup
		work := make(chan int)
		for range 8 {
			wg.Go(func() {
				for i := range work {
					var err error
					switch i % (n / 200) {
					case 0:
						_, err = e.svc.GetKeyRing(sought, kms.RingRef{Name: "target"})
					case 1:
						_, err = e.svc.Rotate(weak, kms.RotateInput{RingName: "other"})
						if kms.ErrorKind(err) == kms.KindPermissionDenied {
							err = nil
						}
					default:
						_, err = e.svc.GetKeyRing(writer, kms.RingRef{Name: "other"})
					}
					if err != nil {
						b.Error(err)
					}
				}
			})
		}
		for i := range n {
			work <- i
		}
		close(work)
		wg.Wait()
		l, err := e.svc.SearchActivity(searcher, kms.ActivityFilter{}, kms.PageRequest{Limit: 1})
		if err != nil {
			b.Fatal(err)
		}
		start := l.Data[0].CreatedAt + 1 // after the first record: the time index bounds the walk
		for _, bc := range []struct {
			name string
			f    kms.ActivityFilter
		}{
			{"keyid", kms.ActivityFilter{KeyID: kms.PrincipalFrom(sought).ID}},
			{"props", kms.ActivityFilter{Props: map[string]any{"ringId": target.Ring.ID}}},
			{"valid", kms.ActivityFilter{Valid: ptr(false)}},
			{"trail", kms.ActivityFilter{Start: &start}},
			{"keyid and time", kms.ActivityFilter{KeyID: kms.PrincipalFrom(sought).ID, Start: &start}},
		} {
			b.Run(fmt.Sprintf("%s/records=%d", bc.name, n), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					page, err := e.svc.SearchActivity(searcher, bc.f, kms.PageRequest{Limit: 100})
					if err != nil || len(page.Data) != 100 {
						b.Fatalf("SearchActivity = %d records, %v", len(page.Data), err)
					}
				}
			})
		}
	}
}
