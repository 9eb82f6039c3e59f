package e2e

import (
	"bytes"
	"crypto/ecdh"
	"crypto/hpke"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/client"
	"github.com/ringkms/kms/internal/kmsdtest"
)

// must returns v, failing the test when err is not nil.
func must[T any](t *testing.T, what string) func(v T, err error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return v
	}
}

// wantKind fails the test unless err is a *kms.Error of kind.
func wantKind(t *testing.T, what string, err error, kind kms.Kind) *kms.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("%s = nil error, want %v", what, kind)
	}
	if got := kms.ErrorKind(err); got != kind {
		t.Fatalf("%s = %v (kind %v), want kind %v", what, err, got, kind)
	}
	return kms.AsError(err)
}

// raw sends one request with the validating http.Client of v and decodes
// a JSON answer into out (when not nil): for the routes the client has no
// method for.
func raw(t *testing.T, v *validator, method, url, secret string, body any, out any) int {
	t.Helper()
	code, data, err := kmsdtest.Do(v.client(), method, url, secret, body)
	if err != nil {
		t.Fatal(err)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s = %d, not JSON: %v\n%s", method, url, code, err, data)
		}
	}
	return code
}

// unwrap opens keyData with the ring's private key (docs/FORMAT.md): the
// X-Wing seed, or the X25519 private key.
func unwrap(t *testing.T, privB64, ringID string, k *kms.Key) []byte {
	t.Helper()
	if k == nil || k.KeyData == nil {
		t.Fatal("no keyData to unwrap")
	}
	priv, err := base64.StdEncoding.DecodeString(privB64)
	if err != nil {
		t.Fatalf("privateKey: %v", err)
	}
	var sk hpke.PrivateKey
	switch k.KeyData.Encrypted.Key.Encoding {
	case "hpke-xwing":
		sk, err = hpke.MLKEM768X25519().NewPrivateKey(priv)
	case "hpke-x25519":
		sk, err = hpke.DHKEM(ecdh.X25519()).NewPrivateKey(priv)
	default:
		t.Fatalf("keyData encoding %q", k.KeyData.Encrypted.Key.Encoding)
	}
	if err != nil {
		t.Fatalf("private key: %v", err)
	}
	enc, err := base64.StdEncoding.DecodeString(k.KeyData.IV)
	if err != nil {
		t.Fatal(err)
	}
	ct, err := base64.StdEncoding.DecodeString(k.KeyData.Encrypted.Key.Value)
	if err != nil {
		t.Fatal(err)
	}
	r, err := hpke.NewRecipient(enc, sk, hpke.HKDFSHA256(), hpke.AES256GCM(), []byte("ringkms/keydata/v1/"+ringID+"/"+k.ID))
	if err != nil {
		t.Fatalf("hpke.NewRecipient: %v", err)
	}
	key, err := r.Open(nil, ct)
	if err != nil {
		t.Fatalf("open keyData of key %s: %v", k.ID, err)
	}
	if len(key) != 32 {
		t.Fatalf("unwrapped key has %d bytes, want 32", len(key))
	}
	return key
}

// allPages walks a list to its end with pages of size, checking the
// pagination, and returns every item.
func allPages[T any](t *testing.T, what string, size int, list func(kms.PageRequest) (*kms.List[T], error)) []T {
	t.Helper()
	var out []T
	req := kms.PageRequest{Limit: size}
	for range 1000 {
		page, err := list(req)
		if err != nil {
			t.Fatalf("%s (cursor %q): %v", what, req.Cursor, err)
		}
		if page.Pagination.Count != len(page.Data) || page.Pagination.Limit != size || len(page.Data) > size {
			t.Fatalf("%s: pagination %+v with %d items, page size %d", what, page.Pagination, len(page.Data), size)
		}
		out = append(out, page.Data...)
		if !page.Pagination.HasMore {
			return out
		}
		req.Cursor = page.Pagination.NextCursor
	}
	t.Fatalf("%s: more than 1000 pages", what)
	return nil
}

func TestFlows(t *testing.T) {
	in, p, v, root := serve(t, "-min-destroy-delay", "0s")
	anon := clientOf(p, t, v, "")
	mails := map[string]bool{}

	t.Run("bootstrap", func(t *testing.T) {
		if err := anon.Healthz(bg); err != nil {
			t.Fatalf("Healthz: %v", err)
		}
		var doc map[string]any
		if code := raw(t, v, "GET", p.URL+"/openapi.json", "", nil, &doc); code != 200 || doc["openapi"] != "3.1.0" {
			t.Fatalf("GET /openapi.json = %d, openapi %v", code, doc["openapi"])
		}
		keys := allPages(t, "ListAPIKeys", 10, func(r kms.PageRequest) (*kms.List[*kms.APIKey], error) { return root.ListAPIKeys(bg, r) })
		if len(keys) != 1 || !keys[0].Flags["*"] || !keys[0].Active {
			t.Fatalf("ListAPIKeys = %+v, want the bootstrap key with flag *", keys)
		}
		accts := must[*kms.List[*kms.Account]](t, "ListAccounts")(root.ListAccounts(bg, kms.PageRequest{}))
		if len(accts.Data) != 1 || accts.Data[0].UID != kms.BootstrapAccountUID {
			t.Fatalf("ListAccounts = %+v, want the bootstrap Account", accts.Data)
		}
		// No credential breaks the document (bearer); a wrong one does not.
		_, err := anon.ListKeyRings(breaksDoc(bg), kms.PageRequest{})
		wantKind(t, "ListKeyRings without a credential", err, kms.KindUnauthenticated)
		_, err = clientOf(p, t, v, "rk_wrong").ListKeyRings(bg, kms.PageRequest{})
		wantKind(t, "ListKeyRings with a wrong key", err, kms.KindUnauthenticated)
		// A malformed limit breaks the document too, and kmsd says 400.
		_, err = root.ListKeyRings(breaksDoc(bg), kms.PageRequest{Limit: -1})
		wantKind(t, "ListKeyRings limit -1", err, kms.KindInvalid)
	})

	// Accounts.
	var acme *kms.Account
	t.Run("accounts", func(t *testing.T) {
		acme = must[*kms.Account](t, "CreateAccount")(root.CreateAccount(bg, kms.AccountInput{UID: "acme", Notes: "a customer", Props: map[string]any{"tier": "gold"}}))
		if got := must[*kms.Account](t, "GetAccount by uid")(root.GetAccount(bg, kms.AccountRef{Value: "acme", ByUID: true})); got.ID != acme.ID || got.Props["tier"] != "gold" {
			t.Fatalf("GetAccount(uid acme) = %+v, want %+v", got, acme)
		}
		notes := "a good customer"
		upd := must[*kms.Account](t, "UpdateAccount")(root.UpdateAccount(bg, kms.AccountRef{Value: acme.ID}, kms.AccountUpdate{Notes: &notes}))
		if upd.Notes != notes || upd.UID != "acme" || upd.Props["tier"] != "gold" {
			t.Fatalf("UpdateAccount = %+v", upd)
		}
		doomed := must[*kms.Account](t, "CreateAccount doomed")(root.CreateAccount(bg, kms.AccountInput{UID: "doomed"}))
		_, err := root.CreateAccount(bg, kms.AccountInput{UID: "doomed"})
		wantKind(t, "CreateAccount with a taken uid", err, kms.KindConflict)
		all := allPages(t, "ListAccounts", 1, func(r kms.PageRequest) (*kms.List[*kms.Account], error) { return root.ListAccounts(bg, r) })
		if len(all) != 3 {
			t.Fatalf("ListAccounts by pages of 1: %d Accounts, want 3", len(all))
		}
		if got := must[*kms.Account](t, "DeleteAccount")(root.DeleteAccount(bg, kms.AccountRef{Value: "doomed", ByUID: true})); got.ID != doomed.ID {
			t.Fatalf("DeleteAccount = %+v, want %s", got, doomed.ID)
		}
		_, err = root.GetAccount(bg, kms.AccountRef{Value: doomed.ID})
		wantKind(t, "GetAccount of a deleted Account", err, kms.KindNotFound)
	})

	// Key rings.
	var payments *kms.CreateKeyRingResult
	t.Run("keyrings", func(t *testing.T) {
		payments = must[*kms.CreateKeyRingResult](t, "CreateKeyRing payments")(root.CreateKeyRing(bg, kms.CreateKeyRingInput{
			Name: "payments", DisplayName: "Payments", Props: map[string]any{"team": "billing"}, KeyProps: map[string]any{"purpose": "pay"}}))
		if payments.PrivateKey == "" || payments.Ring.ActiveKey != payments.Key.ID || payments.Key.Props["purpose"] != "pay" {
			t.Fatalf("CreateKeyRing = %+v", payments)
		}
		unwrap(t, payments.PrivateKey, payments.Ring.ID, payments.Key)
		x := must[*kms.CreateKeyRingResult](t, "CreateKeyRing x25519")(root.CreateKeyRing(bg, kms.CreateKeyRingInput{Name: "Small", KEM: "x25519", Algo: "aes256"}))
		unwrap(t, x.PrivateKey, x.Ring.ID, x.Key)
		_, err := root.CreateKeyRing(bg, kms.CreateKeyRingInput{Name: "small"})
		wantKind(t, "CreateKeyRing of a taken name (another case)", err, kms.KindConflict)
		_, err = root.CreateKeyRing(breaksDoc(bg), kms.CreateKeyRingInput{})
		wantKind(t, "CreateKeyRing without a name", err, kms.KindInvalid)

		byID := must[*kms.KeyRing](t, "GetKeyRing by ID")(root.GetKeyRing(bg, kms.RingRef{Name: payments.Ring.ID, ByID: true}))
		if byID.Name != "payments" || byID.Props["team"] != "billing" {
			t.Fatalf("GetKeyRing(id) = %+v", byID)
		}
		rings := allPages(t, "ListKeyRings", 1, func(r kms.PageRequest) (*kms.List[*kms.KeyRing], error) { return root.ListKeyRings(bg, r) })
		if len(rings) != 2 {
			t.Fatalf("ListKeyRings: %d rings, want 2", len(rings))
		}
		k := must[*kms.Key](t, "GetKey")(root.GetKey(bg, kms.RingRef{Name: "payments"}, payments.Key.ID))
		if k.KeyData == nil || k.KeyData.Encrypted.Key.Value != payments.Key.KeyData.Encrypted.Key.Value {
			t.Fatalf("GetKey = %+v, want the key data of the creation", k)
		}
		_, err = root.GetKey(bg, kms.RingRef{Name: "payments"}, x.Key.ID)
		wantKind(t, "GetKey of another ring's key", err, kms.KindNotFound)

		// /asym.
		asym := must[*kms.CreateAsymKeyRingResult](t, "CreateAsymKeyRing")(root.CreateAsymKeyRing(bg, kms.CreateAsymKeyRingInput{Name: "clear", KeyProps: map[string]any{"k": 1}}))
		ak := must[*kms.AsymKey](t, "GetAsymKey")(root.GetAsymKey(bg, kms.RingRef{Name: asym.Ring.ID, ByID: true}, asym.Key.ID))
		if ak.KeyData.Key != asym.Key.KeyData.Key || ak.KeyData.Key == "" {
			t.Fatalf("GetAsymKey = %+v, want the key of the creation", ak)
		}
		rot := must[*kms.AsymKey](t, "RotateAsym")(root.RotateAsym(bg, kms.RotateInput{RingName: "clear"}))
		if rot.ID == asym.Key.ID || rot.Props["k"] == nil {
			t.Fatalf("RotateAsym = %+v", rot)
		}
		_, err = root.GetKeyRing(bg, kms.RingRef{Name: "clear"})
		wantKind(t, "GetKeyRing of an /asym ring under /ks", err, kms.KindNotFound)
		_, err = root.ExportAsymKey(bg, kms.RingRef{Name: "clear"}, asym.Key.ID) // export is of held keys (TestTransitHeldKeys)
		wantKind(t, "ExportAsymKey of a ring made by CreateAsymKeyRing", err, kms.KindInvalid)

		del := must[*kms.DeleteKeyRingResult](t, "DeleteKeyRing")(root.DeleteKeyRing(bg, kms.RingRef{Name: "small"}))
		if del.ID != x.Ring.ID {
			t.Fatalf("DeleteKeyRing = %+v, want ID %s", del, x.Ring.ID)
		}
		_, err = root.GetKeyRing(bg, kms.RingRef{Name: "small"})
		wantKind(t, "GetKeyRing of a deleted ring", err, kms.KindNotFound)
	})

	// API keys with flags: a limited key may do what its flags say only.
	var limited *kms.APIKey
	var limitedC *client.Client
	t.Run("apikeys", func(t *testing.T) {
		limited = must[*kms.APIKey](t, "CreateAPIKey")(root.CreateAPIKey(bg, kms.APIKeyInput{AccountID: "acme", AccountByUID: true,
			Flags: kms.Flags{"keyring.payments.encrypt": true, "keyring.payments.decrypt": true, "keyring.Payments.Read": true, "assets.read": true},
			Props: map[string]any{"app": "shop"}}))
		if limited.Key == "" || limited.AccountID != acme.ID || !limited.Flags["keyring.payments.read"] {
			t.Fatalf("CreateAPIKey = %+v", limited)
		}
		limitedC = clientOf(p, t, v, limited.Key)
		if _, err := limitedC.Encrypt(bg, kms.EncryptInput{RingName: "payments"}); err != nil {
			t.Fatalf("Encrypt with keyring.payments.encrypt: %v", err)
		}
		_, err := limitedC.Rotate(bg, kms.RotateInput{RingName: "payments"})
		if e := wantKind(t, "Rotate without keyring.payments.rotate", err, kms.KindPermissionDenied); !strings.Contains(e.Message, "keyring.payments.rotate") {
			t.Errorf("the 403 message %q does not name the flag", e.Message)
		}
		_, err = limitedC.ListAccounts(bg, kms.PageRequest{})
		wantKind(t, "ListAccounts without accounts.read", err, kms.KindPermissionDenied)
		_, err = limitedC.CreateAPIKey(bg, kms.APIKeyInput{AccountID: acme.ID, Flags: kms.Flags{"*": true}})
		wantKind(t, "CreateAPIKey without apikeys.write", err, kms.KindPermissionDenied)

		// The safe form never carries the secret.
		got := must[*kms.APIKey](t, "GetAPIKey")(root.GetAPIKey(bg, limited.KeyID))
		if got.Key != "" || got.Props["app"] != "shop" {
			t.Fatalf("GetAPIKey = %+v", got)
		}
		var props kms.APIKey
		if code := raw(t, v, "GET", p.URL+"/auth/apikey/"+limited.KeyID+"/props", in.bootstrap, nil, &props); code != 200 || props.KeyID != limited.KeyID {
			t.Fatalf("GET /auth/apikey/{id}/props = %d %+v", code, props)
		}

		// Grant rotation by ID (merge), then change props by secret.
		res := must[*kms.APIKeyUpdateResult](t, "UpdateAPIKey by ID")(root.UpdateAPIKey(bg, kms.APIKeyUpdate{Op: kms.UpdateMerge,
			Ref: kms.APIKeyRef{Value: limited.KeyID}, Flags: kms.Flags{"keyring.payments.rotate": true}}))
		if !res.Flags["keyring.payments.rotate"] || !res.Flags["keyring.payments.encrypt"] || res.Key != "" {
			t.Fatalf("UpdateAPIKey(merge) = %+v", res)
		}
		if _, err := limitedC.Rotate(bg, kms.RotateInput{RingName: "payments"}); err != nil {
			t.Fatalf("Rotate after the grant: %v", err)
		}
		res = must[*kms.APIKeyUpdateResult](t, "UpdateAPIKey by secret")(root.UpdateAPIKey(bg, kms.APIKeyUpdate{Op: kms.UpdateReplace,
			Ref: kms.APIKeyRef{Value: limited.Key, BySecret: true}, Flags: res.Flags, Props: map[string]any{"app": "shop", "v": 2}}))
		if res.Props["v"] != float64(2) || res.Key != limited.Key {
			t.Fatalf("UpdateAPIKey(replace props) = %+v", res)
		}
		// Deactivated, it is refused; active again, it works.
		off, on := false, true
		must[*kms.APIKeyUpdateResult](t, "deactivate")(root.UpdateAPIKey(bg, kms.APIKeyUpdate{Op: kms.UpdateMerge, Ref: kms.APIKeyRef{Value: limited.KeyID}, Active: &off}))
		_, err = limitedC.Encrypt(bg, kms.EncryptInput{RingName: "payments"})
		wantKind(t, "Encrypt with an inactive key", err, kms.KindUnauthenticated)
		must[*kms.APIKeyUpdateResult](t, "activate")(root.UpdateAPIKey(bg, kms.APIKeyUpdate{Op: kms.UpdateMerge, Ref: kms.APIKeyRef{Value: limited.KeyID}, Active: &on}))

		// Lists and searches.
		acmeKeys := must[*kms.List[*kms.APIKey]](t, "ListAccountAPIKeys")(root.ListAccountAPIKeys(bg, kms.AccountRef{Value: "acme", ByUID: true}, kms.PageRequest{}))
		if len(acmeKeys.Data) != 1 || acmeKeys.Data[0].KeyID != limited.KeyID {
			t.Fatalf("ListAccountAPIKeys(acme) = %+v", acmeKeys.Data)
		}
		byRing := must[*kms.List[*kms.APIKey]](t, "SearchAPIKeysByRing")(root.SearchAPIKeysByRing(bg, kms.RingRef{Name: payments.Ring.ID, ByID: true}, kms.PageRequest{Limit: 5}))
		// The keys naming the ring, then those reaching every ring (the
		// bootstrap key, *).
		if len(byRing.Data) != 2 || byRing.Data[0].KeyID != limited.KeyID || !byRing.Data[1].Flags["*"] {
			t.Fatalf("SearchAPIKeysByRing(payments) = %d keys, want the limited key and the bootstrap key", len(byRing.Data))
		}
		// A ring that an active key's flags name cannot be deleted.
		_, err = root.DeleteKeyRing(bg, kms.RingRef{Name: "payments"})
		wantKind(t, "DeleteKeyRing of a ring in use", err, kms.KindConflict)

		// Validation of another key, with the activity it reports.
		val := must[*kms.ValidateResult](t, "ValidateAPIKey")(root.ValidateAPIKey(bg, kms.ValidateInput{Key: limited.Key,
			Activity: &kms.ValidateActivity{Action: "encrypt", RingName: "payments", Props: map[string]any{"from": "e2e"}}}))
		if !val.Valid || val.ValidAction == nil || !*val.ValidAction || val.KeyID != limited.KeyID {
			t.Fatalf("ValidateAPIKey = %+v", val)
		}
		val = must[*kms.ValidateResult](t, "ValidateAPIKey config")(root.ValidateAPIKey(bg, kms.ValidateInput{Key: limited.Key,
			Activity: &kms.ValidateActivity{Action: "config", RingName: "payments"}}))
		if !val.Valid || val.ValidAction == nil || *val.ValidAction {
			t.Fatalf("ValidateAPIKey(config) = %+v, want valid without the action", val)
		}
		val = must[*kms.ValidateResult](t, "ValidateAPIKey unknown")(root.ValidateAPIKey(bg, kms.ValidateInput{Key: "rk_unknown"}))
		if val.Valid {
			t.Fatalf("ValidateAPIKey(unknown) = %+v", val)
		}

		// Deletion by secret and by ID.
		for _, bySecret := range []bool{true, false} {
			k := must[*kms.APIKey](t, "CreateAPIKey doomed")(root.CreateAPIKey(bg, kms.APIKeyInput{AccountID: acme.ID, Flags: kms.Flags{}}))
			ref := kms.APIKeyRef{Value: k.KeyID}
			if bySecret {
				ref = kms.APIKeyRef{Value: k.Key, BySecret: true}
			}
			d := must[*kms.DeleteAPIKeyResult](t, "DeleteAPIKey")(root.DeleteAPIKey(bg, ref))
			if d.ID == bySecret {
				t.Fatalf("DeleteAPIKey(by secret %v) = %+v", bySecret, d)
			}
			_, err := root.GetAPIKey(bg, k.KeyID)
			wantKind(t, "GetAPIKey of a deleted key", err, kms.KindNotFound)
			_, err = clientOf(p, t, v, k.Key).ListKeyRings(bg, kms.PageRequest{})
			wantKind(t, "a deleted key", err, kms.KindUnauthenticated)
		}
	})

	// Rotation and configuration.
	t.Run("rotate and config", func(t *testing.T) {
		before := must[*kms.KeyRing](t, "GetKeyRing")(root.GetKeyRing(bg, kms.RingRef{Name: "payments"}))
		k := must[*kms.Key](t, "Rotate")(root.Rotate(bg, kms.RotateInput{RingName: "payments", Algo: "aes256"}))
		after := must[*kms.KeyRing](t, "GetKeyRing")(root.GetKeyRing(bg, kms.RingRef{Name: "payments"}))
		if k.ID == before.ActiveKey || after.ActiveKey != k.ID {
			t.Fatalf("Rotate: active key %s -> %s, rotated to %s", before.ActiveKey, after.ActiveKey, k.ID)
		}
		unwrap(t, payments.PrivateKey, payments.Ring.ID, k)
		keys := allPages(t, "ListKeys", 2, func(r kms.PageRequest) (*kms.List[*kms.Key], error) {
			return root.ListKeys(bg, kms.RingRef{Name: "payments"}, r)
		})
		if len(keys) != 3 || keys[2].ID != k.ID || keys[0].KeyData != nil {
			t.Fatalf("ListKeys = %d keys (last %s), want 3 ending with %s, without key data", len(keys), keys[len(keys)-1].ID, k.ID)
		}

		cfg := &kms.KeyRingConfig{Props: map[string]any{"team": "billing", "cfg": true}, Key: kms.ConfigKey{Props: map[string]any{"purpose": "pay2"}},
			Algos: kms.ConfigAlgos{AES256: kms.AlgoConfig{MaxEncryptCount: 2}}}
		got := must[*kms.KeyRingConfig](t, "SetConfig")(root.SetConfig(bg, kms.RingRef{Name: "payments"}, cfg))
		if got.Algos.AES256.MaxEncryptCount != 2 || got.Props["cfg"] != true {
			t.Fatalf("SetConfig = %+v", got)
		}
		if got := must[*kms.KeyRingConfig](t, "GetConfig")(root.GetConfig(bg, kms.RingRef{Name: "payments"})); got.Key.Props["purpose"] != "pay2" || got.Algos.AES256.MaxEncryptCount != 2 {
			t.Fatalf("GetConfig = %+v", got)
		}
		// Two encrypts per key: the third rotates first.
		var ids []string
		for range 5 {
			e := must[*kms.EncryptResult](t, "Encrypt")(root.Encrypt(bg, kms.EncryptInput{RingName: "payments"}))
			ids = append(ids, e.Key.ID)
		}
		if ids[0] != ids[1] || ids[1] == ids[2] || ids[2] != ids[3] || ids[3] == ids[4] {
			t.Fatalf("with maxEncryptCount 2, encrypts used keys %v", ids)
		}
		if nk := must[*kms.Key](t, "GetKey")(root.GetKey(bg, kms.RingRef{Name: "payments"}, ids[4])); nk.Props["purpose"] != "pay2" {
			t.Fatalf("a key made after the config has props %v, want the config's key.props", nk.Props)
		}
		// The other spelling of the ring name member (ringanme), and no limit.
		var body struct{ Config kms.KeyRingConfig }
		if code := raw(t, v, "PUT", p.URL+"/ks/config", in.bootstrap, map[string]any{"ringanme": "payments", "config": map[string]any{"props": map[string]any{"team": "billing"}}}, &body); code != 200 || body.Config.Algos.AES256.MaxEncryptCount != 0 {
			t.Fatalf("PUT /ks/config with ringanme = %d %+v", code, body.Config)
		}
		_, err := root.SetConfig(breaksDoc(bg), kms.RingRef{Name: "payments"}, &kms.KeyRingConfig{Algos: kms.ConfigAlgos{AES256: kms.AlgoConfig{MaxEncryptCount: -1}}})
		wantKind(t, "SetConfig with a negative maxEncryptCount", err, kms.KindInvalid)
		// A body over the cap (1 MiB) answers 413.
		_, err = root.Encrypt(bg, kms.EncryptInput{RingName: "payments", Asset: &kms.AssetInput{Data: map[string]any{"big": strings.Repeat("x", 1<<20)}}})
		wantKind(t, "Encrypt with a 1 MiB body", err, kms.KindTooLarge)
	})

	// Key states: disable, enable, schedule and cancel a destruction, and
	// a destruction that runs (kmsd runs with -min-destroy-delay 0s).
	t.Run("key states", func(t *testing.T) {
		must[*kms.CreateKeyRingResult](t, "CreateKeyRing lifecycle")(root.CreateKeyRing(bg, kms.CreateKeyRingInput{Name: "lifecycle"}))
		ring := kms.RingRef{Name: "lifecycle"}
		old := must[*kms.EncryptResult](t, "Encrypt")(root.Encrypt(bg, kms.EncryptInput{RingName: "lifecycle"}))
		active := must[*kms.Key](t, "Rotate")(root.Rotate(bg, kms.RotateInput{RingName: "lifecycle", Algo: "aes256"}))
		dec := kms.DecryptInput{Hash: old.Hash, Header: old.Header}

		k := must[*kms.Key](t, "SetKeyState disabled")(root.SetKeyState(bg, ring, old.Key.ID, kms.KeyStateInput{State: kms.KeyDisabled}))
		if k.State != kms.KeyDisabled {
			t.Fatalf("SetKeyState disabled = state %q", k.State)
		}
		_, err := root.Decrypt(bg, dec)
		wantKind(t, "Decrypt with a disabled key", err, kms.KindDisabled)
		_, err = root.GetKey(bg, ring, old.Key.ID)
		wantKind(t, "GetKey of a disabled key", err, kms.KindDisabled)
		_, err = root.SetKeyState(bg, ring, active.ID, kms.KeyStateInput{State: kms.KeyDisabled})
		wantKind(t, "SetKeyState disabled of the active key", err, kms.KindInvalid)
		must[*kms.Key](t, "SetKeyState enabled")(root.SetKeyState(bg, ring, old.Key.ID, kms.KeyStateInput{State: kms.KeyEnabled}))
		if d := must[*kms.DecryptResult](t, "Decrypt after enabling")(root.Decrypt(bg, dec)); d.Key.ID != old.Key.ID {
			t.Fatalf("Decrypt after enabling = key %s, want %s", d.Key.ID, old.Key.ID)
		}

		// What the key touched: one hash handed out, one decrypt that
		// returned it (the refused one is not counted).
		wantUsage := func(what string) {
			t.Helper()
			u := must[*kms.KeyUsage](t, "KeyUsage "+what)(root.KeyUsage(bg, ring, old.Key.ID))
			if u.EncryptCount != 1 || u.DecryptCount != 1 || u.FirstUsedAt == nil || u.LastUsedAt.Before(*u.FirstUsedAt) {
				t.Fatalf("KeyUsage %s = %+v, want 1 encrypt and 1 decrypt", what, u)
			}
			hashes := must[*kms.List[*kms.KeyHash]](t, "ListKeyHashes "+what)(root.ListKeyHashes(bg, ring, old.Key.ID, kms.PageRequest{Limit: 10}))
			if len(hashes.Data) != 1 || hashes.Data[0].Hash != old.Hash {
				t.Fatalf("ListKeyHashes %s = %+v, want only %s", what, hashes.Data, old.Hash)
			}
		}
		wantUsage("after enabling")
		if k := must[*kms.List[*kms.Key]](t, "ListKeys")(root.ListKeys(bg, ring, kms.PageRequest{})); k.Data[0].EncryptCount == nil || *k.Data[0].EncryptCount != 1 {
			t.Fatalf("ListKeys: first key's encryptCount %v, want 1", k.Data[0].EncryptCount)
		}

		k = must[*kms.Key](t, "DestroyKey in 1h")(root.DestroyKey(bg, ring, old.Key.ID, kms.DestroyKeyInput{After: "1h"}))
		if k.State != kms.KeyDestroyScheduled || k.DestroyAt == nil {
			t.Fatalf("DestroyKey in 1h = state %q, destroyAt %v", k.State, k.DestroyAt)
		}
		if k = must[*kms.Key](t, "CancelDestroyKey")(root.CancelDestroyKey(bg, ring, old.Key.ID)); k.State != kms.KeyDisabled {
			t.Fatalf("CancelDestroyKey = state %q, want disabled", k.State)
		}
		_, err = root.DestroyKey(bg, ring, old.Key.ID, kms.DestroyKeyInput{After: "soon"})
		wantKind(t, "DestroyKey after soon", err, kms.KindInvalid)
		must[*kms.Key](t, "DestroyKey now")(root.DestroyKey(bg, ring, old.Key.ID, kms.DestroyKeyInput{After: "0s"}))
		waitFor(t, 20*time.Second, "the key's destruction", func() bool {
			_, err := root.Decrypt(bg, dec)
			return kms.ErrorKind(err) == kms.KindDestroyed
		})
		_, err = root.SetKeyState(bg, ring, old.Key.ID, kms.KeyStateInput{State: kms.KeyEnabled})
		wantKind(t, "SetKeyState of a destroyed key", err, kms.KindDestroyed)
		wantUsage("after destruction") // the usage and the hashes stay

		// The same under /asym.
		asym := must[*kms.CreateAsymKeyRingResult](t, "CreateAsymKeyRing")(root.CreateAsymKeyRing(bg, kms.CreateAsymKeyRingInput{Name: "asym-lifecycle"}))
		must[*kms.AsymKey](t, "RotateAsym")(root.RotateAsym(bg, kms.RotateInput{RingName: "asym-lifecycle"}))
		aring := kms.RingRef{Name: "asym-lifecycle"}
		must[*kms.Key](t, "SetAsymKeyState disabled")(root.SetAsymKeyState(bg, aring, asym.Key.ID, kms.KeyStateInput{State: kms.KeyDisabled}))
		_, err = root.GetAsymKey(bg, aring, asym.Key.ID)
		wantKind(t, "GetAsymKey of a disabled key", err, kms.KindDisabled)
		must[*kms.Key](t, "DestroyAsymKey in 2h")(root.DestroyAsymKey(bg, aring, asym.Key.ID, kms.DestroyKeyInput{After: "2h"}))
		must[*kms.Key](t, "CancelDestroyAsymKey")(root.CancelDestroyAsymKey(bg, aring, asym.Key.ID))
		must[*kms.Key](t, "SetAsymKeyState enabled")(root.SetAsymKeyState(bg, aring, asym.Key.ID, kms.KeyStateInput{State: kms.KeyEnabled}))
		// Its configuration, and its usage (of transit calls: none).
		acfg := &kms.KeyRingConfig{Algos: kms.ConfigAlgos{AES256: kms.AlgoConfig{MaxEncryptCount: 5, RotationPeriod: "720h"}}}
		if got := must[*kms.KeyRingConfig](t, "SetAsymConfig")(root.SetAsymConfig(bg, aring, acfg)); got.Algos.AES256.RotationPeriod != "720h" {
			t.Fatalf("SetAsymConfig = %+v", got)
		}
		if got := must[*kms.KeyRingConfig](t, "GetAsymConfig")(root.GetAsymConfig(bg, aring)); got.Algos.AES256.MaxEncryptCount != 5 {
			t.Fatalf("GetAsymConfig = %+v", got)
		}
		if u := must[*kms.KeyUsage](t, "AsymKeyUsage")(root.AsymKeyUsage(bg, aring, asym.Key.ID)); u.EncryptCount != 0 || u.KeyID != asym.Key.ID {
			t.Fatalf("AsymKeyUsage = %+v", u)
		}
		if ak := must[*kms.AsymKey](t, "GetAsymKey")(root.GetAsymKey(bg, aring, asym.Key.ID)); ak.KeyData.Key != asym.Key.KeyData.Key {
			t.Fatalf("GetAsymKey after enabling = %+v, want the key of the creation", ak)
		}
	})

	// Encrypt and decrypt with Assets.
	t.Run("assets", func(t *testing.T) {
		c := limitedC // an API key of acme: the Assets are acme's
		e1 := must[*kms.EncryptResult](t, "Encrypt with a new Asset")(c.Encrypt(bg, kms.EncryptInput{RingName: "payments",
			Asset: &kms.AssetInput{Data: map[string]any{"doc": "invoice-1", "amount": 10}}}))
		if e1.Asset == nil || e1.Asset.AccountID != acme.ID || e1.Asset.KeyRingID != payments.Ring.ID || e1.Asset.APIKeyID != limited.KeyID {
			t.Fatalf("Encrypt answered the Asset %+v", e1.Asset)
		}
		a1 := e1.Asset.ID
		d1 := must[*kms.DecryptResult](t, "Decrypt")(c.Decrypt(bg, kms.DecryptInput{Hash: e1.Hash, Header: e1.Header}))
		if !d1.Asset.Valid || d1.Asset.ID != a1 || d1.Asset.Data["doc"] != "invoice-1" || d1.Key.ID != e1.Key.ID || d1.RingName != "payments" {
			t.Fatalf("Decrypt = %+v", d1)
		}
		if !bytes.Equal(unwrap(t, payments.PrivateKey, payments.Ring.ID, d1.Key), unwrap(t, payments.PrivateKey, payments.Ring.ID, e1.Key)) {
			t.Fatal("decrypt unwraps to another key than encrypt")
		}
		// Batches: items in order, a bad header failing its item alone.
		eb := must[*kms.EncryptBatchResult](t, "EncryptBatch")(c.EncryptBatch(bg, kms.EncryptBatchInput{RingName: "payments", Count: 3}))
		if len(eb.Items) != 3 || eb.Items[2].Error != nil || eb.Items[2].Hash == "" {
			t.Fatalf("EncryptBatch = %+v", eb.Items)
		}
		db := must[*kms.DecryptBatchResult](t, "DecryptBatch")(c.DecryptBatch(bg, kms.DecryptBatchInput{Items: []kms.DecryptInput{
			{Hash: eb.Items[0].Hash, Header: eb.Items[0].Header}, {Hash: eb.Items[1].Hash, Header: eb.Items[0].Header}, {Hash: e1.Hash, Header: e1.Header}}}))
		if len(db.Items) != 3 || db.Items[0].Error != nil || db.Items[0].Key.ID != eb.Items[0].Key.ID ||
			db.Items[1].Error == nil || db.Items[1].Error.Code != "unprocessable" || db.Items[2].Error != nil || !db.Items[2].Asset.Valid {
			t.Fatalf("DecryptBatch = %+v", db.Items)
		}
		hi := must[*kms.HashInfo](t, "LookupHash")(c.LookupHash(bg, e1.Hash))
		if hi.RingID != payments.Ring.ID || hi.KeyID != e1.Key.ID {
			t.Fatalf("LookupHash = %+v", hi)
		}
		hd := must[*kms.HeaderInfo](t, "LookupHeader")(c.LookupHeader(bg, e1.Header))
		if !hd.Valid || !hd.HasSignedAsset || hd.Hash != e1.Hash || hd.Version != 1 {
			t.Fatalf("LookupHeader = %+v", hd)
		}
		// Anyone verifies the header and its Asset offline, with the
		// published signing keys.
		keys := must[*kms.SigningKeySet](t, "SigningKeys")(anon.SigningKeys(bg))
		if v, err := keys.VerifyHeader(e1.Header, e1.Asset); err != nil || !v.Valid || v.AssetID != a1 {
			t.Fatalf("VerifyHeader with the published keys = %+v, %v", v, err)
		}
		changed := *e1.Asset
		changed.Data = map[string]any{"doc": "invoice-2", "amount": 10}
		if v, err := keys.VerifyHeader(e1.Header, &changed); err != nil || v.Valid {
			t.Fatalf("VerifyHeader with other Asset data = %+v, %v; want invalid", v, err)
		}
		// The keys are cacheable: naming the ETag answers 304.
		req, _ := http.NewRequest("GET", p.URL+"/ks/signing-keys", nil)
		resp, err := v.client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		req.Header.Set("If-None-Match", resp.Header.Get("ETag"))
		resp, err = v.client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotModified {
			t.Fatalf("GET /ks/signing-keys with If-None-Match of its ETag = %d, want 304", resp.StatusCode)
		}
		// An altered header: valid false on look-up, 422 on decrypt.
		hb, _ := base64.RawURLEncoding.DecodeString(e1.Header)
		hb[len(hb)-1] ^= 1
		bad := base64.RawURLEncoding.EncodeToString(hb)
		if hd := must[*kms.HeaderInfo](t, "LookupHeader altered")(c.LookupHeader(bg, bad)); hd.Valid {
			t.Fatalf("LookupHeader(altered) = %+v, want valid false", hd)
		}
		res, err := c.Decrypt(bg, kms.DecryptInput{Hash: e1.Hash, Header: bad})
		wantKind(t, "Decrypt with an altered header", err, kms.KindUnprocessable)
		if res == nil || res.Asset.Valid || res.Key != nil {
			t.Fatalf("Decrypt(altered) = %+v", res)
		}
		_, err = c.LookupHash(bg, "AQ"+e1.Hash[2:len(e1.Hash)-2]+"AA")
		wantKind(t, "LookupHash of a forged hash", err, kms.KindInvalid)

		// A child Asset, and the lineage.
		e2 := must[*kms.EncryptResult](t, "Encrypt with a child Asset")(c.Encrypt(bg, kms.EncryptInput{RingName: "payments",
			Asset: &kms.AssetInput{Data: map[string]any{"doc": "receipt-1"}, Parents: []string{a1}}}))
		a2 := e2.Asset.ID
		if !slices.Equal(e2.Asset.Parents, []string{a1}) {
			t.Fatalf("child Asset parents = %v", e2.Asset.Parents)
		}
		lin := must[*kms.Lineage](t, "GetLineage")(c.GetLineage(bg, a1, 2))
		if len(lin.Descendants) != 1 || lin.Descendants[0].ID != a2 || len(lin.Ancestors) != 0 || lin.Depth != 2 {
			t.Fatalf("GetLineage(parent) = %+v", lin)
		}
		lin = must[*kms.Lineage](t, "GetLineage child")(c.GetLineage(bg, a2, 0))
		if len(lin.Ancestors) != 1 || lin.Ancestors[0].ID != a1 || lin.Depth != 3 {
			t.Fatalf("GetLineage(child) = %+v", lin)
		}
		_, err = c.GetLineage(breaksDoc(bg), a2, 17)
		wantKind(t, "GetLineage depth 17", err, kms.KindInvalid)

		// An update of the data: the old header fails with 422, the new
		// one verifies.
		e3 := must[*kms.EncryptResult](t, "Encrypt updating the Asset")(c.Encrypt(bg, kms.EncryptInput{RingName: "payments",
			Asset: &kms.AssetInput{AssetID: a1, Data: map[string]any{"doc": "invoice-1", "amount": 12}}}))
		if e3.Asset.ID != a1 || e3.Asset.Data["amount"] != float64(12) {
			t.Fatalf("updated Asset = %+v", e3.Asset)
		}
		res, err = c.Decrypt(bg, kms.DecryptInput{Hash: e1.Hash, Header: e1.Header})
		if e := wantKind(t, "Decrypt after the Asset changed", err, kms.KindUnprocessable); !strings.Contains(e.Message, "changed") {
			t.Errorf("422 message %q does not say the Asset changed", e.Message)
		}
		if res == nil || res.Asset.Valid || res.Asset.ID != a1 || res.Key != nil {
			t.Fatalf("Decrypt(changed) = %+v", res)
		}
		if d := must[*kms.DecryptResult](t, "Decrypt updated")(c.Decrypt(bg, kms.DecryptInput{Hash: e3.Hash, Header: e3.Header})); !d.Asset.Valid || d.Asset.Data["amount"] != float64(12) {
			t.Fatalf("Decrypt(updated) = %+v", d)
		}
		got := must[*kms.Asset](t, "GetAsset")(c.GetAsset(bg, a1))
		if got.Data["amount"] != float64(12) || got.UpdatedAt.Before(got.CreatedAt) {
			t.Fatalf("GetAsset = %+v", got)
		}

		// Search.
		kids := must[*kms.List[*kms.Asset]](t, "SearchAssets parents")(c.SearchAssets(bg, kms.AssetFilter{Parents: []string{a1}}, kms.PageRequest{}))
		if len(kids.Data) != 1 || kids.Data[0].ID != a2 {
			t.Fatalf("SearchAssets(parents a1) = %+v", kids.Data)
		}
		byData := must[*kms.List[*kms.Asset]](t, "SearchAssets data")(c.SearchAssets(bg, kms.AssetFilter{Data: map[string]any{"doc": "receipt-1"}}, kms.PageRequest{}))
		if len(byData.Data) != 1 || byData.Data[0].ID != a2 {
			t.Fatalf("SearchAssets(data) = %+v", byData.Data)
		}
		all := allPages(t, "SearchAssets", 1, func(r kms.PageRequest) (*kms.List[*kms.Asset], error) {
			return c.SearchAssets(bg, kms.AssetFilter{KeyRingID: payments.Ring.ID}, r)
		})
		if len(all) != 2 {
			t.Fatalf("SearchAssets(ring) by pages of 1: %d Assets, want 2", len(all))
		}
		byKey := must[*kms.List[*kms.Asset]](t, "SearchAssets keyId")(c.SearchAssets(bg, kms.AssetFilter{KeyID: e1.Key.ID}, kms.PageRequest{}))
		if len(byKey.Data) == 0 || !slices.ContainsFunc(byKey.Data, func(a *kms.Asset) bool { return a.ID == a1 }) {
			t.Fatalf("SearchAssets(keyId %s) = %+v, want %s among them", e1.Key.ID, byKey.Data, a1)
		}
		// A parent cannot be deleted before its child; a deleted Asset
		// fails its headers.
		_, err = root.DeleteAsset(bg, a1)
		wantKind(t, "DeleteAsset of a parent", err, kms.KindConflict)
		_, err = c.DeleteAsset(bg, a2)
		wantKind(t, "DeleteAsset without assets.delete", err, kms.KindPermissionDenied)
		if d := must[*kms.DeleteAssetResult](t, "DeleteAsset")(root.DeleteAsset(bg, a2)); !d.Deleted || d.ID != a2 {
			t.Fatalf("DeleteAsset = %+v", d)
		}
		_, err = c.Decrypt(bg, kms.DecryptInput{Hash: e2.Hash, Header: e2.Header})
		wantKind(t, "Decrypt of a deleted Asset's header", err, kms.KindUnprocessable)
		_, err = c.GetAsset(bg, a2)
		wantKind(t, "GetAsset of a deleted Asset", err, kms.KindNotFound)
		_, err = c.Encrypt(bg, kms.EncryptInput{RingName: "payments", Asset: &kms.AssetInput{AssetID: a2, Data: map[string]any{}}})
		wantKind(t, "Encrypt updating a deleted Asset", err, kms.KindNotFound)
	})

	// Users: creation, sign-in, refresh, logout, invitation, reset.
	t.Run("users", func(t *testing.T) {
		created := must[*kms.CreateUserResult](t, "CreateUser")(root.CreateUser(bg, kms.UserInput{Username: "ada", Email: "ada@example.com",
			FirstName: "Ada", LastName: "Lovelace", AccountID: acme.ID, Flags: kms.Flags{"users.read": true}, Props: map[string]any{"x": 1}}))
		if created.Password == "" || created.User.Status != "active" || created.User.AccountID != acme.ID {
			t.Fatalf("CreateUser = %+v", created)
		}
		_, err := root.CreateUser(bg, kms.UserInput{Username: "ada", Email: "other@example.com", FirstName: "A", LastName: "B"})
		// 400 conflict, as for the names of rings and Accounts, with
		// errors naming the member.
		if e := wantKind(t, "CreateUser with a taken username", err, kms.KindConflict); e.Fields["username"] == "" {
			t.Errorf("the 400 names no username in errors: %+v", e)
		}
		login := must[*kms.LoginResult](t, "Login")(anon.Login(bg, kms.LoginInput{Username: "ada", Password: created.Password}))
		ada := anon.WithBearer(login.AccessToken)
		if me := must[*kms.User](t, "GetUser self")(ada.GetUser(bg, kms.UserRef{Value: "ada"})); me.ID != created.User.ID {
			t.Fatalf("GetUser(self) = %+v", me)
		}
		users := allPages(t, "ListUsers", 1, func(r kms.PageRequest) (*kms.List[*kms.User], error) { return ada.ListUsers(bg, r) })
		if len(users) != 1 {
			t.Fatalf("ListUsers as ada (acme only): %d Users, want 1", len(users))
		}
		_, err = ada.ListKeyRings(bg, kms.PageRequest{})
		wantKind(t, "ListKeyRings as ada", err, kms.KindPermissionDenied)
		// Refresh revokes the old token; logout the new one.
		ref := must[*kms.LoginResult](t, "Refresh")(ada.Refresh(bg))
		_, err = ada.GetUser(bg, kms.UserRef{Value: "ada"})
		wantKind(t, "the token before the refresh", err, kms.KindUnauthenticated)
		ada = anon.WithBearer(ref.AccessToken)
		if err := ada.Logout(bg); err != nil {
			t.Fatalf("Logout: %v", err)
		}
		_, err = ada.GetUser(bg, kms.UserRef{Value: "ada"})
		wantKind(t, "the token after logout", err, kms.KindUnauthenticated)
		_, err = root.Refresh(bg)
		wantKind(t, "Refresh with an API key", err, kms.KindInvalid)
		_, err = anon.Login(bg, kms.LoginInput{Username: "ada", Password: "Wrong-password-1"})
		wantKind(t, "Login with a wrong password", err, kms.KindInvalid)
		must[*kms.LoginResult](t, "Login by email")(anon.Login(bg, kms.LoginInput{Username: "ada@example.com", Password: created.Password, ByEmail: true}))

		last := "Byron"
		if u := must[*kms.User](t, "UpdateUser")(root.UpdateUser(bg, kms.UserRef{Value: "ada@example.com", ByEmail: true}, kms.UserUpdate{LastName: &last})); u.LastName != last || u.FirstName != "Ada" {
			t.Fatalf("UpdateUser = %+v", u)
		}

		// Invitation: the mailed link, validation, a weak and a good password.
		inv := must[*kms.InviteResult](t, "Invite")(root.Invite(bg, kms.InviteInput{Username: "grace", Email: "grace@example.com", FirstName: "Grace", LastName: "Hopper", AccountID: acme.ID}))
		m := in.waitMail(t, "grace@example.com", mails)
		link, token := m.link(t, "/auth/user/invite-validate")
		if link != inv.LoginURL {
			t.Errorf("mailed link %q, answered loginUrl %q", link, inv.LoginURL)
		}
		iv := must[*kms.InviteValidation](t, "ValidateInvite")(anon.ValidateInvite(bg, token))
		if iv.State != kms.InviteSuccess || iv.User.Username != "grace" || iv.User.Status != "invited" {
			t.Fatalf("ValidateInvite = %+v", iv)
		}
		_, err = anon.CompleteInvite(bg, token, "weak")
		e := wantKind(t, "CompleteInvite with a weak password", err, kms.KindInvalid)
		if pc, ok := e.Details.(kms.PasswordCheck); e.State != "malformed-password" || !ok || pc.IsValid || pc.Details.MinLength != 8 {
			t.Fatalf("CompleteInvite(weak) error = %+v", e)
		}
		done := must[*kms.InviteCompletion](t, "CompleteInvite")(anon.CompleteInvite(bg, token, "Grace-Hopper-1906"))
		if done.AccessToken == "" || done.User.Status != "active" {
			t.Fatalf("CompleteInvite = %+v", done)
		}
		_, err = anon.ValidateInvite(bg, token)
		if e := wantKind(t, "ValidateInvite of a used token", err, kms.KindUnauthenticated); e.State != kms.InviteInvalid {
			t.Fatalf("used token: state %q, want invalid", e.State)
		}
		_, err = anon.CompleteInvite(bg, token, "Grace-Hopper-1906")
		wantKind(t, "CompleteInvite of a used token", err, kms.KindUnauthenticated)

		// Password reset through the mailed link.
		msg := must[string](t, "StartPasswordReset")(anon.StartPasswordReset(bg, "grace@example.com"))
		if msg2 := must[string](t, "StartPasswordReset unknown")(anon.StartPasswordReset(bg, "nobody@example.com")); msg2 != msg {
			t.Errorf("reset of an unknown address answers %q, of a known one %q", msg2, msg)
		}
		resetLink, token := in.waitMail(t, "grace@example.com", mails).link(t, "/auth/basic/reset-password-complete")
		// The mailed link itself (kmsd's own address) says whether the
		// token can still reset.
		var state map[string]any
		if code := raw(t, v, "GET", resetLink, "", nil, &state); code != 200 || state["state"] != "valid" {
			t.Fatalf("GET of the mailed reset link = %d %v, want 200 valid", code, state)
		}
		err = anon.CompletePasswordReset(bg, token, "weak")
		wantKind(t, "CompletePasswordReset with a weak password", err, kms.KindInvalid)
		if err := anon.CompletePasswordReset(bg, token, "Amazing-Grace-1992"); err != nil {
			t.Fatalf("CompletePasswordReset: %v", err)
		}
		err = anon.CompletePasswordReset(bg, token, "Amazing-Grace-1993")
		wantKind(t, "CompletePasswordReset with a used token", err, kms.KindInvalid)
		var used map[string]any
		if code := raw(t, v, "GET", resetLink, "", nil, &used); code != 400 || len(used) != 0 {
			t.Fatalf("GET of a used reset link = %d %v, want 400 {}", code, used)
		}
		_, err = anon.WithBearer(done.AccessToken).GetUser(bg, kms.UserRef{Value: "grace"})
		wantKind(t, "a token from before the reset", err, kms.KindUnauthenticated)
		_, err = anon.Login(bg, kms.LoginInput{Username: "grace", Password: "Grace-Hopper-1906"})
		wantKind(t, "Login with the old password", err, kms.KindInvalid)
		must[*kms.LoginResult](t, "Login with the new password")(anon.Login(bg, kms.LoginInput{Username: "grace", Password: "Amazing-Grace-1992"}))

		// Failed logins of one User are throttled: 429 after five.
		must[*kms.CreateUserResult](t, "CreateUser mallory")(root.CreateUser(bg, kms.UserInput{Username: "mallory", Email: "mallory@example.com", FirstName: "M", LastName: "M"}))
		for i := 1; ; i++ {
			_, err := anon.Login(bg, kms.LoginInput{Username: "mallory", Password: "Not-the-password-1"})
			if kms.ErrorKind(err) == kms.KindRateLimited {
				break
			}
			wantKind(t, "Login with a wrong password", err, kms.KindInvalid)
			if i > 6 {
				t.Fatalf("%d failed logins, and no 429", i)
			}
		}

		if d := must[*kms.DeleteUserResult](t, "DeleteUser")(root.DeleteUser(bg, kms.UserRef{Value: done.User.ID, ByID: true})); d.Message == "" {
			t.Fatalf("DeleteUser = %+v", d)
		}
		_, err = root.GetUser(bg, kms.UserRef{Value: "grace"})
		wantKind(t, "GetUser of a deleted User", err, kms.KindNotFound)
	})

	// The activity trail.
	t.Run("activity", func(t *testing.T) {
		activityFlow(t, v, root, limited)
	})

	p.Stop(t)
	in.verifyAudit(t)

	unseen, no200 := v.coverage()
	if len(unseen) > 0 {
		t.Errorf("operations of the document the flows never called: %v", unseen)
	}
	if len(no200) > 0 {
		t.Logf("operations the flows never saw answer 200: %v", no200)
	}
	t.Logf("answers per operation:\n%s", v.summary())
}
