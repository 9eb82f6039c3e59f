package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/ringkms/kms"
)

// propsOf returns a props object whose JSON is exactly n bytes.
func propsOf(t testing.TB, n int) map[string]any {
	t.Helper()
	const overhead = len(`{"p":""}`)
	p := map[string]any{"p": strings.Repeat("x", n-overhead)}
	if b, _ := json.Marshal(p); len(b) != n {
		t.Fatalf("propsOf(%d) is %d bytes", n, len(b))
	}
	return p
}

// TestPropsCap sends a props object of the largest size allowed, then one
// byte more, through every request that stores one: the first is stored,
// the second answers 400 and stores nothing.
func TestPropsCap(t *testing.T) {
	e := newEnv(t)
	e.createRing(t, "capped")
	_, keyID := e.apiKey(t, "keyring.capped.read")
	e.createUser(t, "capped-user")
	checker, _ := e.apiKey(t, "keyring.capped.read")
	fits, over := propsOf(t, kms.MaxPropsBytes), propsOf(t, kms.MaxPropsBytes+1)
	n := 0
	name := func(prefix string) string { n++; return fmt.Sprintf("%s%d", prefix, n) }
	tests := []struct {
		name, method, path string
		body               func(props map[string]any) map[string]any
	}{
		{"API key", "POST", "/auth/apikey", func(p map[string]any) map[string]any {
			return map[string]any{"accountId": e.account, "flags": map[string]bool{}, "props": p}
		}},
		{"API key update", "PUT", "/auth/apikeyid", func(p map[string]any) map[string]any {
			return map[string]any{"apikeyid": keyID, "op": "replace", "props": p}
		}},
		{"User", "POST", "/auth/users", func(p map[string]any) map[string]any {
			b := e.userBody(name("u"))
			b["props"] = p
			return b
		}},
		{"invitation", "POST", "/auth/user/invite", func(p map[string]any) map[string]any {
			b := e.userBody(name("i"))
			b["props"] = p
			return b
		}},
		{"User update", "PATCH", "/auth/users/capped-user", func(p map[string]any) map[string]any {
			return map[string]any{"props": p}
		}},
		{"Account", "POST", "/auth/accounts", func(p map[string]any) map[string]any {
			return map[string]any{"uid": name("a"), "props": p}
		}},
		{"Account update", "PATCH", "/auth/accounts/" + e.account, func(p map[string]any) map[string]any {
			return map[string]any{"props": p}
		}},
		{"ring", "POST", "/ks/keyrings", func(p map[string]any) map[string]any {
			return map[string]any{"name": name("r"), "kem": "x25519", "props": p}
		}},
		{"ring keyProps", "POST", "/ks/keyrings", func(p map[string]any) map[string]any {
			return map[string]any{"name": name("r"), "kem": "x25519", "keyProps": p}
		}},
		{"asym ring", "POST", "/asym/keyrings", func(p map[string]any) map[string]any {
			return map[string]any{"name": name("a"), "props": p}
		}},
		{"asym ring keyProps", "POST", "/asym/keyrings", func(p map[string]any) map[string]any {
			return map[string]any{"name": name("a"), "keyProps": p}
		}},
		{"config props", "PUT", "/ks/config", func(p map[string]any) map[string]any {
			return map[string]any{"ringname": "capped", "config": map[string]any{"props": p}}
		}},
		{"config key props", "PUT", "/ks/config", func(p map[string]any) map[string]any {
			return map[string]any{"ringname": "capped", "config": map[string]any{"key": map[string]any{"props": p}}}
		}},
		{"validated activity", "POST", "/auth/validate", func(p map[string]any) map[string]any {
			return map[string]any{"key": checker, "activity": map[string]any{"action": "read", "ringname": "capped", "props": p}}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e.do(t, tt.method, tt.path, e.root, tt.body(fits)).want(t, http.StatusOK)
			before := len(trailIDs(t, e.store))
			msg := e.do(t, tt.method, tt.path, e.root, tt.body(over)).wantError(t, http.StatusBadRequest, "invalid")
			if !strings.Contains(strings.ToLower(msg), "props") {
				t.Errorf("message %q does not name the props", msg)
			}
			if strings.Contains(tt.path, "validate") && len(trailIDs(t, e.store)) != before+1 {
				t.Errorf("a refused validation recorded %d records, want its own failure only", len(trailIDs(t, e.store))-before)
			}
		})
	}
	t.Run("merges add up", func(t *testing.T) {
		half := propsOf(t, kms.MaxPropsBytes/2+100)
		e.do(t, "PUT", "/auth/apikeyid", e.root, map[string]any{"apikeyid": keyID, "op": "replace", "props": half}).want(t, http.StatusOK)
		other := map[string]any{"q": half["p"]}
		e.do(t, "PUT", "/auth/apikeyid", e.root, map[string]any{"apikeyid": keyID, "op": "merge", "props": other}).
			wantError(t, http.StatusBadRequest, "invalid")
		got := decode[kms.APIKey](t, e.do(t, "GET", "/auth/apikey/"+keyID, e.root, nil).want(t, http.StatusOK))
		if _, ok := got.Props["q"]; ok {
			t.Fatalf("a refused merge was stored")
		}
	})
}

// pageAll pages through a list (GET) or search (POST, with body) at the
// largest limit and returns every item's JSON and the size of each page's
// body.
func (e *env) pageAll(t *testing.T, method, path string, body any) (items []json.RawMessage, pages []int) {
	t.Helper()
	cursor := ""
	for {
		if len(pages) > 100 {
			t.Fatal("too many pages")
		}
		p := path + "?limit=10000"
		if cursor != "" {
			p += "&cursor=" + cursor
		}
		r := e.do(t, method, p, e.root, body).want(t, http.StatusOK)
		page := decode[kms.List[json.RawMessage]](t, r)
		if page.Pagination.Count != len(page.Data) || page.Pagination.HasMore != (page.Pagination.NextCursor != "") {
			t.Fatalf("page %d: pagination %+v with %d items", len(pages), page.Pagination, len(page.Data))
		}
		if len(page.Data) == 0 && page.Pagination.HasMore {
			t.Fatalf("page %d is empty but has more", len(pages))
		}
		items = append(items, page.Data...)
		pages = append(pages, len(r.body))
		if !page.Pagination.HasMore {
			return items, pages
		}
		cursor = page.Pagination.NextCursor
	}
}

// TestPageByteBudget fills lists with items that together pass the byte
// budget of a page many times over: each page, even at limit 10000, stops
// before the budget, says hasMore, and paging yields every item once.
func TestPageByteBudget(t *testing.T) {
	e := newEnv(t)
	// page is the budget plus the room of the page's envelope.
	page := kms.MaxPageBytes + 1024
	check := func(t *testing.T, items []json.RawMessage, pages []int, idOf func(map[string]any) string, want map[string]bool) {
		t.Helper()
		if len(pages) < 2 {
			t.Errorf("%d items in %d page(s), want them split by the budget", len(items), len(pages))
		}
		for i, n := range pages {
			if n > page {
				t.Errorf("page %d is %d bytes, more than the budget of %d", i, n, kms.MaxPageBytes)
			}
		}
		seen := map[string]bool{}
		for _, raw := range items {
			var m map[string]any
			if err := json.Unmarshal(raw, &m); err != nil {
				t.Fatal(err)
			}
			id := idOf(m)
			if seen[id] {
				t.Fatalf("item %s listed twice", id)
			}
			seen[id] = true
		}
		for id := range want {
			if !seen[id] {
				t.Errorf("item %s never listed", id)
			}
		}
	}

	t.Run("API keys", func(t *testing.T) {
		props := propsOf(t, kms.MaxPropsBytes)
		want := map[string]bool{}
		for i := 0; i < kms.MaxPageBytes/kms.MaxPropsBytes*5/2; i++ {
			k, err := e.svc.CreateAPIKey(e.rootCtx, kms.APIKeyInput{AccountID: e.account, Flags: kms.Flags{}, Props: props})
			if err != nil {
				t.Fatal(err)
			}
			want[k.KeyID] = true
		}
		items, pages := e.pageAll(t, "GET", "/auth/apikey", nil)
		check(t, items, pages, func(m map[string]any) string { return m["keyid"].(string) }, want)
		items, pages = e.pageAll(t, "GET", "/auth/accounts/"+e.account+"/apikeys", nil)
		check(t, items, pages, func(m map[string]any) string { return m["keyid"].(string) }, want)
	})
	t.Run("Assets", func(t *testing.T) {
		e.createRing(t, "budget")
		data := map[string]any{"d": strings.Repeat("y", kms.MaxAssetDataBytes-100)}
		want := map[string]bool{}
		for i := 0; i < kms.MaxPageBytes/kms.MaxAssetDataBytes*5/2; i++ {
			res, err := e.svc.Encrypt(e.rootCtx, kms.EncryptInput{RingName: "budget", Asset: &kms.AssetInput{Data: data}})
			if err != nil {
				t.Fatal(err)
			}
			want[res.Asset.ID] = true
		}
		items, pages := e.pageAll(t, "POST", "/assets/search", map[string]any{})
		check(t, items, pages, func(m map[string]any) string { return m["id"].(string) }, want)
	})
	t.Run("Users", func(t *testing.T) {
		props := propsOf(t, kms.MaxPropsBytes)
		want := map[string]bool{}
		for i := 0; i < kms.MaxPageBytes/kms.MaxPropsBytes*3/2; i++ {
			// Invited: no password to hash.
			name := fmt.Sprintf("budget%03d", i)
			_, err := e.svc.Invite(e.rootCtx, kms.InviteInput{Username: name, Email: name + "@example.com",
				FirstName: "B", LastName: "U", Props: props})
			if err != nil {
				t.Fatal(err)
			}
			u, err := e.svc.GetUser(e.rootCtx, kms.UserRef{Value: name})
			if err != nil {
				t.Fatal(err)
			}
			want[u.ID] = true
		}
		items, pages := e.pageAll(t, "GET", "/auth/users", nil)
		check(t, items, pages, func(m map[string]any) string { return m["id"].(string) }, want)
	})
}

// TestValidateActivityBounds checks that POST /auth/validate refuses an
// activity whose action or ring name is longer than any flag can name,
// and that the trail's indexes go on working after such a request (one
// index key too large for the store would stop them).
func TestValidateActivityBounds(t *testing.T) {
	e := newEnv(t)
	checker, _ := e.apiKey(t, "keyring.bounded.read")
	for _, activity := range []map[string]any{
		{"action": strings.Repeat("a", 201)},
		{"action": strings.Repeat("a", 70000)},
		{"action": "read", "ringname": strings.Repeat("r", 65)},
		{"action": "read", "ringname": strings.Repeat("r", 70000)},
	} {
		e.do(t, "POST", "/auth/validate", e.root, map[string]any{"key": checker, "activity": activity}).
			wantError(t, http.StatusBadRequest, "invalid")
	}
	e.do(t, "POST", "/auth/validate", e.root, map[string]any{"key": checker,
		"activity": map[string]any{"action": "read", "ringname": strings.Repeat("r", 64)}}).want(t, http.StatusOK)
	e.do(t, "POST", "/auth/validate", e.root, map[string]any{"key": checker,
		"activity": map[string]any{"action": strings.Repeat("a", 200)}}).want(t, http.StatusOK)
	_, id := e.apiKey(t)
	page := decode[kms.List[kms.Activity]](t, e.do(t, "POST", "/auth/search/activity", e.root,
		map[string]any{"action": "apikey.create", "props": map[string]any{"apikeyId": id}}).want(t, http.StatusOK))
	if len(page.Data) != 1 {
		t.Fatalf("the search by action found %d records of the last API key, want 1", len(page.Data))
	}
}
