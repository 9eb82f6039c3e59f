package httpapi_test

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/kmstest"
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
	clock := kmstest.NewClock()
	e := newEnv(t, withClock(clock))
	e.createRing(t, "alpha")
	e.createRing(t, "beta")
	enc, encID := e.apiKey(t, "keyring.alpha.encrypt")
	for range 3 {
		e.do(t, "POST", "/ks/encrypt", enc, map[string]any{"ringname": "alpha"}).want(t, http.StatusOK)
	}
	e.do(t, "POST", "/ks/encrypt", enc, map[string]any{"ringname": "beta"}).wantError(t, http.StatusForbidden, "permission_denied")
	before := clock.Now().UnixMilli()
	clock.Advance(time.Minute)
	after := clock.Now().UnixMilli()
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

// TestActivityRecordsOutcome makes calls that succeed, are denied, or fail
// in other ways, each with an API key of its own, and reads each call's
// record back through POST /auth/search/activity: result is "ok" only for
// success, else the code of the error the call answered; valid is false
// for a denial and for every failed check of a credential, hash, header or
// Asset, even one the call answers as a result.
func TestActivityRecordsOutcome(t *testing.T) {
	e := newEnv(t)
	e.createRing(t, "alpha")
	enc, other := e.encrypt(t, "alpha"), e.encrypt(t, "alpha")
	user, password := e.createUser(t, "olive")
	subject, _ := e.apiKey(t, "keyring.alpha.read")

	tests := []struct {
		name   string
		flags  []string
		call   func(t *testing.T, secret string)
		filter func(keyID string) map[string]any // the call's records; default keyid and action
		action string
		valid  bool
		result string
	}{
		{"granted encrypt", []string{"keyring.alpha.encrypt"}, func(t *testing.T, k string) {
			e.do(t, "POST", "/ks/encrypt", k, map[string]any{"ringname": "alpha"}).want(t, http.StatusOK)
		}, nil, "encrypt", true, "ok"},
		{"denied encrypt", []string{"keyring.beta.encrypt"}, func(t *testing.T, k string) {
			e.do(t, "POST", "/ks/encrypt", k, map[string]any{"ringname": "alpha"}).wantError(t, http.StatusForbidden, "permission_denied")
		}, nil, "encrypt", false, "permission_denied"},
		{"denied search of another account", []string{"activity.read"}, func(t *testing.T, k string) {
			e.do(t, "POST", "/auth/search/activity", k, map[string]any{"accountUid": "root"}).wantError(t, http.StatusForbidden, "permission_denied")
		}, nil, "activity.search", false, "permission_denied"},
		{"ring not found", []string{"keyring.*.read"}, func(t *testing.T, k string) {
			e.do(t, "GET", "/ks/keyrings/missing", k, nil).wantError(t, http.StatusNotFound, "not_found")
		}, nil, "keyring.read", true, "not_found"},
		{"invalid rotate", []string{"keyring.alpha.rotate"}, func(t *testing.T, k string) {
			e.do(t, "POST", "/ks/rotate", k, map[string]any{"ringname": "alpha", "algo": "des"}).wantError(t, http.StatusBadRequest, "invalid")
		}, nil, "keyring.rotate", true, "invalid"},
		{"ring exists", []string{"keyring.alpha.create"}, func(t *testing.T, k string) {
			e.do(t, "POST", "/ks/keyrings", k, map[string]any{"name": "alpha"}).wantError(t, http.StatusBadRequest, "conflict")
		}, nil, "keyring.create", true, "conflict"},
		{"decrypt", []string{"keyring.alpha.decrypt"}, func(t *testing.T, k string) {
			e.do(t, "POST", "/ks/decrypt", k, map[string]any{"hash": enc.Hash, "header": enc.Header}).want(t, http.StatusOK)
		}, nil, "decrypt", true, "ok"},
		{"tampered decrypt", []string{"keyring.alpha.decrypt"}, func(t *testing.T, k string) {
			e.do(t, "POST", "/ks/decrypt", k, map[string]any{"hash": enc.Hash, "header": other.Header}).want(t, http.StatusUnprocessableEntity)
		}, nil, "decrypt", false, "unprocessable"},
		{"forged hash", []string{"keyring.alpha.read"}, func(t *testing.T, k string) {
			e.do(t, "GET", "/ks/hash/"+flip(enc.Hash), k, nil).wantError(t, http.StatusBadRequest, "invalid")
		}, nil, "hash.lookup", false, "invalid"},
		{"forged header, answered valid false", []string{"keyring.alpha.read"}, func(t *testing.T, k string) {
			r := e.do(t, "GET", "/ks/header/"+flipAt(enc.Header, 24), k, nil).want(t, http.StatusOK)
			if decode[kms.HeaderInfo](t, r).Valid {
				t.Fatalf("GET /ks/header/<altered> = %s, want valid false", r.body)
			}
		}, nil, "header.lookup", false, "ok"},
		{"validate, action denied", []string{"apikeys.validate"}, func(t *testing.T, k string) {
			r := e.do(t, "POST", "/auth/validate", k, map[string]any{"key": subject, "activity": map[string]any{"action": "encrypt", "ringname": "alpha", "props": map[string]any{"case": "denied"}}}).want(t, http.StatusOK)
			if got := decode[kms.ValidateResult](t, r); !got.Valid || got.ValidAction == nil || *got.ValidAction {
				t.Fatalf("POST /auth/validate = %s, want valid, validAction false", r.body)
			}
		}, func(string) map[string]any { return map[string]any{"props": map[string]any{"case": "denied"}} }, "validate", false, "permission_denied"},
		{"validate, unknown key", []string{"apikeys.validate"}, func(t *testing.T, k string) {
			r := e.do(t, "POST", "/auth/validate", k, map[string]any{"key": "rk_not-a-real-key-000000000000000000000000", "activity": map[string]any{"props": map[string]any{"case": "unknown"}}}).want(t, http.StatusOK)
			if got := decode[kms.ValidateResult](t, r); got.Valid {
				t.Fatalf("POST /auth/validate = %s, want valid false", r.body)
			}
		}, func(string) map[string]any { return map[string]any{"props": map[string]any{"case": "unknown"}} }, "validate", false, "unauthenticated"},
		{"wrong password", nil, func(t *testing.T, _ string) {
			e.do(t, "POST", "/auth/basic/login", "", map[string]any{"username": "olive", "password": password + "x"}).wantError(t, http.StatusBadRequest, "invalid")
		}, func(string) map[string]any { return map[string]any{"keyid": user.ID, "action": "user.login"} }, "user.login", false, "invalid"},
		{"login", nil, func(t *testing.T, _ string) {
			e.login(t, "olive", password)
		}, func(string) map[string]any { return map[string]any{"keyid": user.ID, "action": "user.login"} }, "user.login", true, "ok"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			secret, id := e.apiKey(t, tc.flags...)
			filter := map[string]any{"keyid": id, "action": tc.action}
			if tc.filter != nil {
				filter = tc.filter(id)
			}
			search := func() []kms.Activity {
				r := e.do(t, "POST", "/auth/search/activity?limit=10000", e.root, filter).want(t, http.StatusOK)
				return decode[kms.List[kms.Activity]](t, r).Data
			}
			before := len(search())
			tc.call(t, secret)
			recs := search()
			if len(recs) != before+1 {
				t.Fatalf("the call wrote %d records that match %v, want 1", len(recs)-before, filter)
			}
			a := recs[len(recs)-1]
			if a.Action != tc.action || a.Valid != tc.valid || a.Props["result"] != tc.result {
				t.Fatalf("record of the call: action %s, valid %v, result %v; want %s, %v, %s (props %v)",
					a.Action, a.Valid, a.Props["result"], tc.action, tc.valid, tc.result, a.Props)
			}
		})
	}
}
