package httpapi_test

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/ringkms/kms"
)

func TestGetActivityOverHTTP(t *testing.T) {
	e := newEnv(t)
	e.createRing(t, "audited")
	recs := e.activity(t, func(a *kms.Activity) bool { return a.Action == "keyring.create" && a.Ring == "audited" })
	if len(recs) != 1 {
		t.Fatalf("%d records of the ring's creation, want 1", len(recs))
	}
	want := recs[0]
	r := e.do(t, "GET", "/auth/activity/"+want.ID, e.root, nil).want(t, http.StatusOK)
	got := decode[kms.Activity](t, r)
	if got.ID != want.ID || got.KeyID != want.KeyID || got.Action != "keyring.create" || got.Ring != "audited" || !got.Valid ||
		got.CreatedAt != want.CreatedAt || got.Digest != want.Digest || got.Props == nil {
		t.Fatalf("GET /auth/activity/{id} = %s, want %+v", r.body, want)
	}
	if _, ok := r.object(t)["createdAt"].(float64); !ok {
		t.Errorf("createdAt is not a number: %s", r.body)
	}
	e.do(t, "GET", "/auth/activity/01a2000000000000000000000000beef", e.root, nil).wantError(t, http.StatusNotFound, "not_found")
	e.do(t, "GET", "/auth/activity/nope", e.root, nil).wantError(t, http.StatusNotFound, "not_found")
	e.checkAuth(t, "GET", "/auth/activity/"+want.ID, nil)
}

func TestSearchActivityOverHTTP(t *testing.T) {
	clock := newTestClock()
	e := newEnv(t, withClock(clock))
	e.createRing(t, "alpha")
	e.createRing(t, "beta")
	enc, encID := e.apiKey(t, "keyring.alpha.encrypt")
	for range 3 {
		e.do(t, "POST", "/ks/encrypt", enc, map[string]any{"ringname": "alpha"}).want(t, http.StatusOK)
	}
	e.do(t, "POST", "/ks/encrypt", enc, map[string]any{"ringname": "beta"}).wantError(t, http.StatusForbidden, "permission_denied")
	before := clock.now().UnixMilli()
	clock.advance(time.Minute)
	after := clock.now().UnixMilli()
	e.do(t, "POST", "/ks/encrypt", e.root, map[string]any{"ringname": "beta"}).want(t, http.StatusOK)
	e.do(t, "POST", "/ks/encrypt", enc, map[string]any{"ringname": "alpha"}).want(t, http.StatusOK)

	search := func(t *testing.T, secret, query string, filter any) kms.List[kms.Activity] {
		t.Helper()
		return decode[kms.List[kms.Activity]](t, e.do(t, "POST", "/auth/search/activity"+query, secret, filter).want(t, http.StatusOK))
	}
	// all pages through a search and returns every record.
	all := func(t *testing.T, secret string, filter any, limit int) []kms.Activity {
		t.Helper()
		var out []kms.Activity
		cursor := ""
		for range 100 {
			page := search(t, secret, fmt.Sprintf("?limit=%d&cursor=%s", limit, url.QueryEscape(cursor)), filter)
			out = append(out, page.Data...)
			p := page.Pagination
			if p.Limit != limit || p.Count != len(page.Data) || p.Count > limit || p.HasMore != (p.NextCursor != "") {
				t.Fatalf("pagination = %+v", p)
			}
			if !p.HasMore {
				return out
			}
			cursor = p.NextCursor
		}
		t.Fatal("more than 100 pages")
		return nil
	}

	tests := []struct {
		name   string
		filter map[string]any
		want   func(a kms.Activity) bool
		count  int // -1: any number but 0
	}{
		{"ring", map[string]any{"ring": "ALPHA"}, func(a kms.Activity) bool { return a.Ring == "alpha" }, -1},
		{"action and keyid", map[string]any{"action": "encrypt", "keyid": encID},
			func(a kms.Activity) bool { return a.Action == "encrypt" && a.KeyID == encID }, 5},
		{"denied", map[string]any{"keyid": encID, "valid": false},
			func(a kms.Activity) bool { return !a.Valid && a.Ring == "beta" && a.Action == "encrypt" }, 1},
		{"granted encrypts on beta", map[string]any{"ring": "beta", "action": "encrypt", "valid": true},
			func(a kms.Activity) bool { return a.Valid && a.KeyID != encID }, 1},
		{"props", map[string]any{"props": map[string]any{"flag": "keyring.beta.encrypt"}},
			func(a kms.Activity) bool { return !a.Valid && a.Props["flag"] == "keyring.beta.encrypt" }, 1},
		{"start", map[string]any{"start": after, "action": "encrypt"},
			func(a kms.Activity) bool { return a.CreatedAt >= after }, 2},
		{"end", map[string]any{"end": before, "action": "encrypt"},
			func(a kms.Activity) bool { return a.CreatedAt <= before }, 4},
		{"account", map[string]any{"accountId": e.account, "action": "encrypt"},
			func(a kms.Activity) bool { return a.AccountID == e.account }, 5},
		{"account uid", map[string]any{"accountUid": "tests", "action": "encrypt"},
			func(a kms.Activity) bool { return a.AccountID == e.account }, 5},
		{"unknown account uid", map[string]any{"accountUid": "nobody"}, nil, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := all(t, e.root, tc.filter, 2)
			seen := map[string]bool{}
			for _, a := range got {
				if seen[a.ID] {
					t.Errorf("record %s twice", a.ID)
				}
				seen[a.ID] = true
				if !tc.want(a) {
					t.Errorf("record %+v does not match %v", a, tc.filter)
				}
			}
			if tc.count >= 0 && len(got) != tc.count || tc.count < 0 && len(got) == 0 {
				t.Errorf("%d records, want %d", len(got), tc.count)
			}
		})
	}
	t.Run("no filter", func(t *testing.T) {
		for _, body := range []any{nil, map[string]any{}} {
			page := search(t, e.root, "?limit=3", body)
			if len(page.Data) != 3 || !page.Pagination.HasMore {
				t.Errorf("no filter, limit 3: %+v", page.Pagination)
			}
		}
		if got := all(t, e.root, nil, 10000); len(got) < 10 {
			t.Errorf("the whole trail has %d records", len(got))
		}
	})
	t.Run("400", func(t *testing.T) {
		page := search(t, e.root, "?limit=1", map[string]any{"ring": "alpha"})
		e.do(t, "POST", "/auth/search/activity?limit=1&cursor="+page.Pagination.NextCursor, e.root, map[string]any{"ring": "beta"}).
			wantError(t, http.StatusBadRequest, "invalid")
		e.do(t, "POST", "/auth/search/activity?cursor=bogus", e.root, nil).wantError(t, http.StatusBadRequest, "invalid")
		e.do(t, "POST", "/auth/search/activity?limit=0", e.root, nil).wantError(t, http.StatusBadRequest, "invalid")
		e.do(t, "POST", "/auth/search/activity", e.root, `{"start": "yesterday"}`).wantError(t, http.StatusBadRequest, "invalid")
		e.do(t, "POST", "/auth/search/activity", e.root, `{"ring": `).wantError(t, http.StatusBadRequest, "invalid")
		e.do(t, "POST", "/auth/search/activity", e.root, map[string]any{"start": after, "end": before}).wantError(t, http.StatusBadRequest, "invalid")
		e.do(t, "POST", "/auth/search/activity", e.root, map[string]any{"props": map[string]any{"x": map[string]any{}}}).wantError(t, http.StatusBadRequest, "invalid")
		e.send(t, "POST", "/auth/search/activity", req{body: `{}`, contentType: "text/plain", auth: []string{"Bearer " + e.root}}).wantError(t, http.StatusBadRequest, "invalid")
	})
	t.Run("tenancy", func(t *testing.T) {
		reader, _ := e.apiKey(t, "activity.read")
		for _, a := range all(t, reader, nil, 10000) {
			if a.AccountID != e.account {
				t.Errorf("a reader of account %s sees record %+v", e.account, a)
			}
		}
		if got := all(t, reader, map[string]any{"keyid": encID, "action": "encrypt"}, 100); len(got) != 5 {
			t.Errorf("%d encrypt records of the Account's key, want 5", len(got))
		}
		rootAcct := decode[kms.Account](t, e.do(t, "GET", "/auth/accounts/root?uid=true", e.root, nil).want(t, http.StatusOK))
		e.do(t, "POST", "/auth/search/activity", reader, map[string]any{"accountId": rootAcct.ID}).wantError(t, http.StatusForbidden, "permission_denied")
		e.do(t, "POST", "/auth/search/activity", reader, map[string]any{"accountUid": "root"}).wantError(t, http.StatusForbidden, "permission_denied")
		// A record of another Account is not found.
		rootRec := all(t, e.root, map[string]any{"accountId": rootAcct.ID, "ring": "beta", "action": "encrypt"}, 10)
		if len(rootRec) != 1 {
			t.Fatalf("%d root encrypts on beta, want 1", len(rootRec))
		}
		e.do(t, "GET", "/auth/activity/"+rootRec[0].ID, e.root, nil).want(t, http.StatusOK)
		e.do(t, "GET", "/auth/activity/"+rootRec[0].ID, reader, nil).wantError(t, http.StatusNotFound, "not_found")
	})
	e.checkAuth(t, "POST", "/auth/search/activity", map[string]any{})
}

// TestSearchActivityEndsAtItsFirstPage pages with limit 1 through searches
// whose filters match the search's own records: each page writes one
// more, yet the pages end, having returned every matching record that
// was there before the first page, once each, in order.
func TestSearchActivityEndsAtItsFirstPage(t *testing.T) {
	e := newEnv(t)
	e.createRing(t, "alpha")
	e.encrypt(t, "alpha")
	reader, readerID := e.apiKey(t, "activity.read")
	for range 3 {
		e.do(t, "POST", "/auth/search/activity?limit=1", reader, map[string]any{"action": "activity.search"}).want(t, http.StatusOK)
	}
	tests := []struct {
		name   string
		secret string
		filter map[string]any
		match  func(a *kms.Activity) bool
	}{
		{"no filter (the trail)", e.root, nil, func(*kms.Activity) bool { return true }},
		{"action (an index)", e.root, map[string]any{"action": "activity.search"},
			func(a *kms.Activity) bool { return a.Action == "activity.search" }},
		{"keyid of the searcher", reader, map[string]any{"keyid": readerID},
			func(a *kms.Activity) bool { return a.KeyID == readerID }},
		{"props result ok", e.root, map[string]any{"props": map[string]any{"result": "ok"}},
			func(a *kms.Activity) bool { return a.Props["result"] == "ok" }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var want []string
			for _, a := range e.activity(t, tc.match) {
				want = append(want, a.ID)
			}
			var got []string
			cursor := ""
			for page := 1; ; page++ {
				if page > len(want)+1 {
					t.Fatalf("%d pages of limit 1 for %d records: the search does not end", page-1, len(want))
				}
				l := decode[kms.List[kms.Activity]](t, e.do(t, "POST", "/auth/search/activity?limit=1&cursor="+url.QueryEscape(cursor), tc.secret, tc.filter).want(t, http.StatusOK))
				for _, a := range l.Data {
					got = append(got, a.ID)
				}
				if !l.Pagination.HasMore {
					break
				}
				cursor = l.Pagination.NextCursor
			}
			if !slices.Equal(got, want) {
				t.Fatalf("pages returned %d records %v, want the %d there before the first page %v", len(got), got, len(want), want)
			}
		})
	}
}
