package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/ringkms/kms"
)

func TestAccountsOverHTTP(t *testing.T) {
	e := newEnv(t)
	var acct kms.Account
	t.Run("create", func(t *testing.T) {
		r := e.do(t, "POST", "/auth/accounts", e.root, map[string]any{"uid": "acme", "notes": "n", "props": map[string]any{"tier": "gold"}}).want(t, http.StatusOK)
		acct = decode[kms.Account](t, r)
		if acct.ID == "" || acct.UID != "acme" || acct.Notes != "n" || acct.Props["tier"] != "gold" || acct.CreatedAt.IsZero() {
			t.Fatalf("POST /auth/accounts = %s", r.body)
		}
		body := e.do(t, "POST", "/auth/accounts", e.root, map[string]any{"uid": "acme"}).wantErrorBody(t, http.StatusBadRequest, "conflict")
		if errs, _ := body["errors"].(map[string]any); errs["uid"] == nil {
			t.Errorf("errors = %v, want uid", body["errors"])
		}
		e.do(t, "POST", "/auth/accounts", e.root, map[string]any{"notes": "no uid"}).wantError(t, http.StatusBadRequest, "invalid")
		e.checkAuth(t, "POST", "/auth/accounts", map[string]any{"uid": "x"})
		// A new Account is another tenant: accounts.write is not enough.
		secret, _ := e.apiKey(t, "accounts.write")
		e.do(t, "POST", "/auth/accounts", secret, map[string]any{"uid": "x"}).wantError(t, http.StatusForbidden, "permission_denied")
	})
	t.Run("get", func(t *testing.T) {
		for _, path := range []string{"/auth/accounts/" + acct.ID, "/auth/accounts/acme?uid=true"} {
			if got := decode[kms.Account](t, e.do(t, "GET", path, e.root, nil).want(t, http.StatusOK)); got.ID != acct.ID {
				t.Errorf("GET %s = %+v", path, got)
			}
		}
		e.do(t, "GET", "/auth/accounts/01a2000000000000000000000000beef", e.root, nil).wantError(t, http.StatusNotFound, "not_found")
		e.do(t, "GET", "/auth/accounts/nobody?uid=true", e.root, nil).wantError(t, http.StatusNotFound, "not_found")
		e.checkAuth(t, "GET", "/auth/accounts/"+acct.ID, nil)
	})
	t.Run("tenancy", func(t *testing.T) {
		secret, _ := e.apiKey(t, "accounts.read")
		e.do(t, "GET", "/auth/accounts/"+e.account, secret, nil).want(t, http.StatusOK)
		e.do(t, "GET", "/auth/accounts/"+acct.ID, secret, nil).wantError(t, http.StatusNotFound, "not_found")
		list := decode[kms.List[kms.Account]](t, e.do(t, "GET", "/auth/accounts", secret, nil).want(t, http.StatusOK))
		if len(list.Data) != 1 || list.Data[0].ID != e.account {
			t.Errorf("GET /auth/accounts without accounts.all = %+v", list.Data)
		}
	})
	t.Run("list", func(t *testing.T) {
		page := decode[kms.List[kms.Account]](t, e.do(t, "GET", "/auth/accounts?limit=2", e.root, nil).want(t, http.StatusOK))
		if len(page.Data) != 2 || !page.Pagination.HasMore || page.Pagination.NextCursor == "" {
			t.Fatalf("first page = %+v", page)
		}
		rest := decode[kms.List[kms.Account]](t, e.do(t, "GET", "/auth/accounts?limit=2&cursor="+page.Pagination.NextCursor, e.root, nil).want(t, http.StatusOK))
		if len(rest.Data) != 1 || rest.Data[0].ID != acct.ID || rest.Pagination.HasMore || rest.Pagination.NextCursor != "" {
			t.Fatalf("last page = %+v", rest)
		}
		e.do(t, "GET", "/auth/accounts?limit=x", e.root, nil).wantError(t, http.StatusBadRequest, "invalid")
		e.checkAuth(t, "GET", "/auth/accounts", nil)
	})
	t.Run("patch", func(t *testing.T) {
		got := decode[kms.Account](t, e.do(t, "PATCH", "/auth/accounts/acme?uid=true", e.root, map[string]any{"notes": "changed"}).want(t, http.StatusOK))
		if got.ID != acct.ID || got.Notes != "changed" || got.UID != "acme" || got.Props["tier"] != "gold" {
			t.Fatalf("PATCH = %+v", got)
		}
		got = decode[kms.Account](t, e.do(t, "PATCH", "/auth/accounts/"+acct.ID, e.root, map[string]any{"uid": "acme2"}).want(t, http.StatusOK))
		if got.UID != "acme2" {
			t.Fatalf("PATCH uid = %+v", got)
		}
		e.do(t, "PATCH", "/auth/accounts/01a2000000000000000000000000beef", e.root, map[string]any{"notes": "x"}).wantError(t, http.StatusNotFound, "not_found")
		e.do(t, "PATCH", "/auth/accounts/"+acct.ID, e.root, map[string]any{"uid": "tests"}).wantErrorBody(t, http.StatusBadRequest, "conflict")
		e.do(t, "PATCH", "/auth/accounts/"+acct.ID, e.root, map[string]any{"uid": ""}).wantError(t, http.StatusBadRequest, "invalid")
		e.checkAuth(t, "PATCH", "/auth/accounts/"+acct.ID, map[string]any{"notes": "x"})
	})
	t.Run("api keys of an account", func(t *testing.T) {
		k := decode[kms.APIKey](t, e.do(t, "POST", "/auth/apikey", e.root, map[string]any{"accountId": acct.ID, "flags": map[string]bool{"keyring.a.read": true}}).want(t, http.StatusOK))
		for _, path := range []string{"/auth/accounts/" + acct.ID + "/apikeys", "/auth/accounts/acme2/apikeys?uid=true&limit=5"} {
			list := decode[kms.List[kms.APIKey]](t, e.do(t, "GET", path, e.root, nil).want(t, http.StatusOK))
			if len(list.Data) != 1 || list.Data[0].KeyID != k.KeyID || list.Data[0].Key != "" {
				t.Errorf("GET %s = %+v", path, list.Data)
			}
		}
		e.do(t, "GET", "/auth/accounts/nobody/apikeys?uid=true", e.root, nil).wantError(t, http.StatusNotFound, "not_found")
		e.checkAuth(t, "GET", "/auth/accounts/"+acct.ID+"/apikeys", nil)

		// An Account with keys cannot be deleted.
		e.do(t, "DELETE", "/auth/accounts/"+acct.ID, e.root, nil).wantError(t, http.StatusBadRequest, "conflict")
		e.do(t, "DELETE", "/auth/apikey/"+k.KeyID+"?id=true", e.root, nil).want(t, http.StatusOK)
	})
	t.Run("delete", func(t *testing.T) {
		e.checkAuth(t, "DELETE", "/auth/accounts/"+acct.ID, nil)
		secret, _ := e.apiKey(t, "accounts.write")
		e.do(t, "DELETE", "/auth/accounts/"+acct.ID, secret, nil).wantError(t, http.StatusForbidden, "permission_denied")
		got := decode[kms.Account](t, e.do(t, "DELETE", "/auth/accounts/acme2?uid=true", e.root, nil).want(t, http.StatusOK))
		if got.ID != acct.ID || got.UID != "acme2" {
			t.Fatalf("DELETE = %+v", got)
		}
		e.do(t, "DELETE", "/auth/accounts/"+acct.ID, e.root, nil).wantError(t, http.StatusNotFound, "not_found")
		e.do(t, "GET", "/auth/accounts/"+acct.ID, e.root, nil).wantError(t, http.StatusNotFound, "not_found")
		// Not the Account of the credential in use.
		msg := e.do(t, "GET", "/auth/accounts/root?uid=true", e.root, nil).want(t, http.StatusOK)
		rootAcct := decode[kms.Account](t, msg)
		e.do(t, "DELETE", "/auth/accounts/"+rootAcct.ID, e.root, nil).wantError(t, http.StatusBadRequest, "conflict")
	})
}

func TestAPIKeysOverHTTP(t *testing.T) {
	e := newEnv(t)
	e.createRing(t, "pay")
	create := func(t *testing.T, flags map[string]bool) kms.APIKey {
		t.Helper()
		r := e.do(t, "POST", "/auth/apikey", e.root, map[string]any{"accountId": e.account, "flags": flags, "props": map[string]any{"env": "test"}}).want(t, http.StatusOK)
		k := decode[kms.APIKey](t, r)
		if !strings.HasPrefix(k.Key, "rk_") || k.KeyID == "" || !k.Active || k.AccountID != e.account || k.References.AccountID != e.account || k.Props["env"] != "test" {
			t.Fatalf("POST /auth/apikey = %s", r.body)
		}
		return k
	}
	k := create(t, map[string]bool{"keyring.pay.encrypt": true})

	t.Run("create", func(t *testing.T) {
		e.do(t, "GET", "/ks/keyrings/pay", k.Key, nil).wantError(t, http.StatusForbidden, "permission_denied")
		e.do(t, "POST", "/ks/encrypt", k.Key, map[string]any{"ringname": "pay"}).want(t, http.StatusOK)
		byUID := decode[kms.APIKey](t, e.do(t, "POST", "/auth/apikey?uid=true", e.root, map[string]any{"accountId": "tests", "flags": map[string]bool{}}).want(t, http.StatusOK))
		if byUID.AccountID != e.account {
			t.Errorf("?uid=true: accountId = %s, want %s", byUID.AccountID, e.account)
		}
		e.do(t, "POST", "/auth/apikey", e.root, map[string]any{"accountId": "01a2000000000000000000000000beef", "flags": map[string]bool{}}).wantError(t, http.StatusNotFound, "not_found")
		e.do(t, "POST", "/auth/apikey?uid=true", e.root, map[string]any{"accountId": "nobody", "flags": map[string]bool{}}).wantError(t, http.StatusNotFound, "not_found")
		e.do(t, "POST", "/auth/apikey", e.root, map[string]any{"flags": map[string]bool{}}).wantError(t, http.StatusBadRequest, "invalid")
		// flags is required: an empty object grants nothing, a missing or
		// null one is an error.
		for _, body := range []map[string]any{{"accountId": e.account}, {"accountId": e.account, "flags": nil}} {
			msg := e.do(t, "POST", "/auth/apikey", e.root, body).wantError(t, http.StatusBadRequest, "invalid")
			if !strings.Contains(msg, "flags") {
				t.Errorf("POST /auth/apikey %v: message %q does not name flags", body, msg)
			}
		}
		e.do(t, "POST", "/auth/apikey", e.root, map[string]any{"accountId": e.account, "flags": map[string]bool{"Bad Flag": true}}).wantError(t, http.StatusBadRequest, "invalid")
		e.do(t, "POST", "/auth/apikey", e.root, map[string]any{"accountId": e.account, "flags": "x"}).wantError(t, http.StatusBadRequest, "invalid")
		writer, _ := e.apiKey(t, "apikeys.write", "keyring.pay.read")
		e.do(t, "POST", "/auth/apikey", writer, map[string]any{"accountId": e.account, "flags": map[string]bool{"keyring.pay.read": true}}).want(t, http.StatusOK)
		e.do(t, "POST", "/auth/apikey", writer, map[string]any{"accountId": e.account, "flags": map[string]bool{"*": true}}).wantError(t, http.StatusForbidden, "permission_denied")
		e.checkAuth(t, "POST", "/auth/apikey", map[string]any{"accountId": e.account, "flags": map[string]bool{}})
	})
	t.Run("read", func(t *testing.T) {
		for _, path := range []string{"/auth/apikey/" + k.KeyID, "/auth/apikey/" + k.KeyID + "/props"} {
			r := e.do(t, "GET", path, e.root, nil).want(t, http.StatusOK)
			got := decode[map[string]any](t, r)
			if got["keyid"] != k.KeyID || got["key"] != nil || got["props"].(map[string]any)["env"] != "test" {
				t.Errorf("GET %s = %s", path, r.body)
			}
			e.checkAuth(t, "GET", path, nil)
		}
		e.do(t, "GET", "/auth/apikey/01a2000000000000000000000000beef", e.root, nil).wantError(t, http.StatusNotFound, "not_found")
		e.do(t, "GET", "/auth/apikey/01a2000000000000000000000000beef/props", e.root, nil).wantError(t, http.StatusNotFound, "not_found")
	})
	t.Run("list", func(t *testing.T) {
		list := decode[kms.List[map[string]any]](t, e.do(t, "GET", "/auth/apikey?limit=10000", e.root, nil).want(t, http.StatusOK))
		found := false
		for _, item := range list.Data {
			if item["key"] != nil {
				t.Errorf("GET /auth/apikey lists a secret: %v", item)
			}
			found = found || item["keyid"] == k.KeyID
		}
		if !found || list.Pagination.HasMore {
			t.Errorf("GET /auth/apikey = %+v", list)
		}
		e.do(t, "GET", "/auth/apikey?limit=-1", e.root, nil).wantError(t, http.StatusBadRequest, "invalid")
		e.checkAuth(t, "GET", "/auth/apikey", nil)
	})
	t.Run("search by ring", func(t *testing.T) {
		ring := decode[struct {
			Ring kms.KeyRing `json:"ring"`
		}](t, e.do(t, "GET", "/ks/keyrings/pay", e.root, nil).want(t, http.StatusOK)).Ring
		for _, path := range []string{"/auth/search/keyring/pay/apikey", "/auth/search/keyring/PAY/apikey?limit=100", "/auth/search/keyring/" + ring.ID + "/apikey?id=true"} {
			list := decode[kms.List[kms.APIKey]](t, e.do(t, "GET", path, e.root, nil).want(t, http.StatusOK))
			ids := map[string]bool{}
			for _, item := range list.Data {
				ids[item.KeyID] = true
				if item.Key != "" {
					t.Errorf("GET %s lists a secret", path)
				}
			}
			if !ids[k.KeyID] {
				t.Errorf("GET %s = %+v, want key %s", path, list.Data, k.KeyID)
			}
		}
		page := decode[kms.List[kms.APIKey]](t, e.do(t, "GET", "/auth/search/keyring/pay/apikey?limit=1", e.root, nil).want(t, http.StatusOK))
		if len(page.Data) != 1 || !page.Pagination.HasMore {
			t.Errorf("limit=1: %+v", page) // the ring's key, then the root key (flag *)
		}
		e.do(t, "GET", "/auth/search/keyring/nope/apikey", e.root, nil).wantError(t, http.StatusNotFound, "not_found")
		e.do(t, "GET", "/auth/search/keyring/nope/apikey?id=true", e.root, nil).wantError(t, http.StatusNotFound, "not_found")
		e.checkAuth(t, "GET", "/auth/search/keyring/pay/apikey", nil)
	})
	t.Run("update by key", func(t *testing.T) {
		put := func(body map[string]any) kms.APIKeyUpdateResult {
			t.Helper()
			body["key"] = k.Key
			r := e.do(t, "PUT", "/auth/apikey", e.root, body).want(t, http.StatusOK)
			res := decode[kms.APIKeyUpdateResult](t, r)
			if res.Key != k.Key || res.KeyID != k.KeyID || res.Op != body["op"] {
				t.Fatalf("PUT /auth/apikey = %s", r.body)
			}
			return res
		}
		res := put(map[string]any{"op": "merge", "flags": map[string]bool{"keyring.pay.read": true}, "props": map[string]any{"team": "a"}})
		if !res.Flags["keyring.pay.read"] || !res.Flags["keyring.pay.encrypt"] || res.Props["env"] != "test" || res.Props["team"] != "a" {
			t.Fatalf("merge = %+v", res)
		}
		e.do(t, "GET", "/ks/keyrings/pay", k.Key, nil).want(t, http.StatusOK)
		res = put(map[string]any{"op": "delete", "flags": map[string]bool{"keyring.pay.read": true}, "props": map[string]any{"env": nil}})
		if res.Flags["keyring.pay.read"] || !res.Flags["keyring.pay.encrypt"] || res.Props["env"] != nil || res.Props["team"] != "a" {
			t.Fatalf("delete = %+v", res)
		}
		e.do(t, "GET", "/ks/keyrings/pay", k.Key, nil).wantError(t, http.StatusForbidden, "permission_denied")
		res = put(map[string]any{"op": "replace", "flags": map[string]bool{"keyring.pay.decrypt": true}, "props": map[string]any{"only": 1}})
		if len(res.Flags) != 1 || !res.Flags["keyring.pay.decrypt"] || len(res.Props) != 1 || res.Props["only"] != float64(1) {
			t.Fatalf("replace = %+v", res)
		}
		e.do(t, "PUT", "/auth/apikey", e.root, map[string]any{"op": "merge", "key": "rk_unknown"}).wantError(t, http.StatusNotFound, "not_found")
		e.do(t, "PUT", "/auth/apikey", e.root, map[string]any{"op": "swap", "key": k.Key}).wantError(t, http.StatusBadRequest, "invalid")
		e.do(t, "PUT", "/auth/apikey", e.root, map[string]any{"op": "merge"}).wantError(t, http.StatusBadRequest, "invalid")
		e.checkAuth(t, "PUT", "/auth/apikey", map[string]any{"op": "merge", "key": k.Key})
	})
	t.Run("update by id", func(t *testing.T) {
		r := e.do(t, "PUT", "/auth/apikeyid", e.root, map[string]any{"op": "merge", "apikeyid": k.KeyID, "active": false}).want(t, http.StatusOK)
		res := decode[map[string]any](t, r)
		if res["keyid"] != k.KeyID || res["active"] != false || res["key"] != nil || res["op"] != "merge" {
			t.Fatalf("PUT /auth/apikeyid = %s", r.body)
		}
		e.do(t, "POST", "/ks/decrypt", k.Key, map[string]any{"hash": "x", "header": "y"}).wantError(t, http.StatusUnauthorized, "unauthenticated")
		e.do(t, "PUT", "/auth/apikeyid", e.root, map[string]any{"op": "merge", "apikeyid": k.KeyID, "active": true}).want(t, http.StatusOK)
		e.do(t, "GET", "/auth/apikey", k.Key, nil).wantError(t, http.StatusForbidden, "permission_denied")
		e.do(t, "PUT", "/auth/apikeyid", e.root, map[string]any{"op": "merge", "apikeyid": "01a2000000000000000000000000beef"}).wantError(t, http.StatusNotFound, "not_found")
		// Moving a key to another Account needs accounts.all.
		writer, _ := e.apiKey(t, "apikeys.write")
		e.do(t, "PUT", "/auth/apikeyid", writer, map[string]any{"op": "merge", "apikeyid": k.KeyID, "references": map[string]any{"accountId": "x"}}).
			wantError(t, http.StatusForbidden, "permission_denied")
		e.checkAuth(t, "PUT", "/auth/apikeyid", map[string]any{"op": "merge", "apikeyid": k.KeyID})
	})
	t.Run("validate", func(t *testing.T) {
		validator, _ := e.apiKey(t, "apikeys.validate")
		v := func(body map[string]any) map[string]any {
			t.Helper()
			return e.do(t, "POST", "/auth/validate", validator, body).want(t, http.StatusOK).object(t)
		}
		if got := v(map[string]any{"key": k.Key}); got["valid"] != true || got["keyid"] != k.KeyID {
			t.Errorf("validate = %v", got)
		}
		if got := v(map[string]any{"key": k.Key, "activity": map[string]any{"action": "decrypt", "ringname": "pay"}}); got["valid"] != true || got["validAction"] != true {
			t.Errorf("validate decrypt = %v", got)
		}
		if got := v(map[string]any{"key": k.Key, "activity": map[string]any{"action": "rotate", "ringname": "pay"}}); got["valid"] != true || got["validAction"] != false {
			t.Errorf("validate rotate = %v", got)
		}
		if got := v(map[string]any{"key": "rk_unknown"}); got["valid"] != false {
			t.Errorf("validate unknown = %v", got)
		}
		e.do(t, "POST", "/auth/validate", validator, map[string]any{}).wantError(t, http.StatusBadRequest, "invalid")
		e.checkAuth(t, "POST", "/auth/validate", map[string]any{"key": k.Key})
	})
	t.Run("validate cannot forge a record", func(t *testing.T) {
		validator, validatorID := e.apiKey(t, "apikeys.validate")
		forged := map[string]any{"validatedBy": "nobody", "via": "decrypt", "flag": "*", "action": "x", "ring": "x", "result": "x",
			"reportedAction": "x", "ringId": "r", "case": "forged"}
		e.do(t, "POST", "/auth/validate", validator, map[string]any{"key": k.Key,
			"activity": map[string]any{"action": "decrypt", "ringname": "pay", "props": forged}}).want(t, http.StatusOK)
		recs := e.activity(t, func(a *kms.Activity) bool { return a.Props["case"] == "forged" })
		if len(recs) != 1 {
			t.Fatalf("%d records of the validation, want 1", len(recs))
		}
		got := recs[0]
		want := map[string]any{"validatedBy": validatorID, "via": "validate", "flag": "keyring.pay.decrypt", "action": "validate",
			"reportedAction": "decrypt", "ring": "pay", "ringId": "r"}
		for name, v := range want {
			if got.Props[name] != v {
				t.Errorf("record props[%q] = %v, want %v (props %v)", name, got.Props[name], v, got.Props)
			}
		}
		if got.Props["result"] == "x" {
			t.Errorf("record props[result] = x: the caller's value")
		}
		if got.KeyID != k.KeyID || got.Action != "validate" || got.Ring != "pay" {
			t.Errorf("record = %+v, want the validated key's validation on pay", got)
		}
		// Without an action, the caller's props still set none of the
		// service's members.
		e.do(t, "POST", "/auth/validate", validator, map[string]any{"key": k.Key,
			"activity": map[string]any{"props": map[string]any{"flag": "*", "validatedBy": "nobody", "case": "no action"}}}).want(t, http.StatusOK)
		recs = e.activity(t, func(a *kms.Activity) bool { return a.Props["case"] == "no action" })
		if len(recs) != 1 || recs[0].Props["flag"] != nil || recs[0].Props["reportedAction"] != nil || recs[0].Props["validatedBy"] != validatorID || recs[0].Props["via"] != "validate" {
			t.Errorf("records of a validation without an action = %+v", recs)
		}
	})
	t.Run("delete", func(t *testing.T) {
		byKey := create(t, map[string]bool{})
		e.checkAuth(t, "DELETE", "/auth/apikey/"+byKey.Key, nil)
		body := e.do(t, "DELETE", "/auth/apikey/"+byKey.Key, e.root, nil).want(t, http.StatusOK).object(t)
		if body["apikey"] != byKey.Key || body["id"] != false {
			t.Errorf("DELETE by key = %v", body)
		}
		e.do(t, "GET", "/auth/apikey/"+byKey.KeyID, e.root, nil).wantError(t, http.StatusNotFound, "not_found")
		e.do(t, "GET", "/auth/apikey", byKey.Key, nil).wantError(t, http.StatusUnauthorized, "unauthenticated")
		e.do(t, "DELETE", "/auth/apikey/"+byKey.Key, e.root, nil).wantError(t, http.StatusNotFound, "not_found")

		body = e.do(t, "DELETE", "/auth/apikey/"+k.KeyID+"?id=true", e.root, nil).want(t, http.StatusOK).object(t)
		if body["apikey"] != k.KeyID || body["id"] != true {
			t.Errorf("DELETE by ID = %v", body)
		}
		e.do(t, "POST", "/ks/encrypt", k.Key, map[string]any{"ringname": "pay"}).wantError(t, http.StatusUnauthorized, "unauthenticated")
		e.do(t, "DELETE", "/auth/apikey/"+k.KeyID+"?id=true", e.root, nil).wantError(t, http.StatusNotFound, "not_found")
		// The key in the path is not logged.
		for _, l := range e.logs.Lines(t) {
			if l["method"] == "DELETE" && l["route"] == "/auth/apikey/:apikey" && l["path"] != nil {
				t.Errorf("log line of DELETE /auth/apikey/:apikey has a path: %v", l)
			}
		}
		if strings.Contains(e.logs.String(), byKey.Key) {
			t.Errorf("the log holds the API key deleted by its secret")
		}
	})
}

// TestReachOverHTTP checks the reach rule: a credential acts on an API
// key, a User or an Account only if it holds every flag granted there.
func TestReachOverHTTP(t *testing.T) {
	e := newEnv(t)
	strong, strongID := e.apiKey(t, "*")
	e.do(t, "PUT", "/auth/apikeyid", e.root, map[string]any{"op": "merge", "apikeyid": strongID, "active": false}).want(t, http.StatusOK)
	weak, _ := e.apiKey(t, "apikeys.write", "keyring.ra.encrypt")

	t.Run("apikeys.write does not revive, strip or delete a stronger key", func(t *testing.T) {
		for _, body := range []map[string]any{
			{"op": "merge", "apikeyid": strongID, "active": true},
			{"op": "replace", "apikeyid": strongID, "flags": map[string]bool{}},
			{"op": "delete", "apikeyid": strongID, "flags": map[string]bool{"*": true}},
			{"op": "merge", "apikeyid": strongID, "props": map[string]any{"x": 1}},
		} {
			r := e.do(t, "PUT", "/auth/apikeyid", weak, body)
			r.wantError(t, http.StatusForbidden, "permission_denied")
			if strings.Contains(string(r.body), `"flags"`) {
				t.Errorf("PUT /auth/apikeyid %v: the refusal shows flags: %s", body, r.body)
			}
		}
		e.do(t, "PUT", "/auth/apikey", weak, map[string]any{"op": "merge", "key": strong, "active": true}).wantError(t, http.StatusForbidden, "permission_denied")
		e.do(t, "DELETE", "/auth/apikey/"+strongID+"?id=true", weak, nil).wantError(t, http.StatusForbidden, "permission_denied")
		e.do(t, "DELETE", "/auth/apikey/"+strong, weak, nil).wantError(t, http.StatusForbidden, "permission_denied")
		got := decode[kms.APIKey](t, e.do(t, "GET", "/auth/apikey/"+strongID, e.root, nil).want(t, http.StatusOK))
		if got.Active || len(got.Flags) != 1 || !got.Flags["*"] {
			t.Errorf("the stronger key after the refusals = %+v, want inactive with flag *", got)
		}
		e.do(t, "GET", "/auth/apikey", strong, nil).wantError(t, http.StatusUnauthorized, "unauthenticated")
	})
	t.Run("a covered key, and the answer without apikeys.read", func(t *testing.T) {
		_, id := e.apiKey(t, "keyring.ra.encrypt")
		e.do(t, "PUT", "/auth/apikeyid", e.root, map[string]any{"op": "merge", "apikeyid": id, "active": false}).want(t, http.StatusOK)
		body := e.do(t, "PUT", "/auth/apikeyid", weak, map[string]any{"op": "merge", "apikeyid": id, "active": true}).want(t, http.StatusOK).object(t)
		if body["keyid"] != id || body["active"] != true || body["op"] != "merge" {
			t.Errorf("PUT /auth/apikeyid (covered key) = %v", body)
		}
		if _, ok := body["flags"]; ok {
			t.Errorf("PUT /auth/apikeyid answers flags to a caller without apikeys.read: %v", body)
		}
		if _, ok := body["props"]; ok {
			t.Errorf("PUT /auth/apikeyid answers props to a caller without apikeys.read: %v", body)
		}
		reader, _ := e.apiKey(t, "apikeys.write", "apikeys.read", "keyring.ra.encrypt")
		body = e.do(t, "PUT", "/auth/apikeyid", reader, map[string]any{"op": "merge", "apikeyid": id, "props": map[string]any{"x": 1}}).want(t, http.StatusOK).object(t)
		if flags, _ := body["flags"].(map[string]any); flags["keyring.ra.encrypt"] != true || body["props"] == nil {
			t.Errorf("PUT /auth/apikeyid with apikeys.read = %v, want flags and props", body)
		}
		e.do(t, "DELETE", "/auth/apikey/"+id+"?id=true", weak, nil).want(t, http.StatusOK)
	})
	t.Run("users.write does not change a stronger user", func(t *testing.T) {
		e.createUser(t, "boss", "*")
		writer, _ := e.apiKey(t, "users.write")
		e.do(t, "PATCH", "/auth/users/boss", writer, map[string]any{"email": "mine@example.com"}).wantError(t, http.StatusForbidden, "permission_denied")
		e.do(t, "DELETE", "/auth/users/boss", writer, nil).wantError(t, http.StatusForbidden, "permission_denied")
	})
	t.Run("accounts.write does not change an account it does not cover", func(t *testing.T) {
		// The root Account holds the root key ("*").
		all, _ := e.apiKey(t, "accounts.write", "accounts.all")
		e.do(t, "PATCH", "/auth/accounts/root?uid=true", all, map[string]any{"uid": "hijacked"}).wantError(t, http.StatusForbidden, "permission_denied")
		e.do(t, "GET", "/auth/accounts/root?uid=true", e.root, nil).want(t, http.StatusOK)
		// The test Account holds keys and a User with flags the writer
		// lacks: not even its own Account.
		own, _ := e.apiKey(t, "accounts.write")
		msg := e.do(t, "PATCH", "/auth/accounts/tests?uid=true", own, map[string]any{"notes": "x"}).wantError(t, http.StatusForbidden, "permission_denied")
		if !strings.Contains(msg, "holds flag") {
			t.Errorf("message %q does not say which flag is out of reach", msg)
		}
		// An Account whose credentials it covers.
		acct := decode[kms.Account](t, e.do(t, "POST", "/auth/accounts", e.root, map[string]any{"uid": "small"}).want(t, http.StatusOK))
		e.apiKeyIn(t, acct.ID, "keyring.ra.encrypt")
		e.do(t, "PATCH", "/auth/accounts/small?uid=true", all, map[string]any{"notes": "x"}).wantError(t, http.StatusForbidden, "permission_denied")
		covering, _ := e.apiKeyIn(t, acct.ID, "accounts.write", "keyring.ra.encrypt")
		e.do(t, "PATCH", "/auth/accounts/small?uid=true", covering, map[string]any{"notes": "x"}).want(t, http.StatusOK)
	})
}
