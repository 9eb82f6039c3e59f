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
