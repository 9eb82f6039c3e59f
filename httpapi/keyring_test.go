package httpapi_test

import (
	"crypto/ecdh"
	"crypto/hpke"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/ringkms/kms"
)

// unwrapKey opens the wrapped key data of key keyID of ring ringID with a
// private key, as a client in any language would (docs/FORMAT.md), and
// returns the 32-byte aes256 key.
func unwrapKey(t testing.TB, kd *kms.KeyData, ringID, keyID string, open func(ct, enc, info []byte) ([]byte, error)) []byte {
	t.Helper()
	if kd == nil {
		t.Fatalf("key %s has no keyData", keyID)
	}
	ct, err := base64.StdEncoding.DecodeString(kd.Encrypted.Key.Value)
	if err != nil {
		t.Fatalf("keyData.encrypted.key.value is not base64: %v", err)
	}
	enc, err := base64.StdEncoding.DecodeString(kd.IV)
	if err != nil {
		t.Fatalf("keyData.iv is not base64: %v", err)
	}
	key, err := open(ct, enc, []byte("ringkms/keydata/v1/"+ringID+"/"+keyID))
	if err != nil {
		t.Fatalf("unwrap key %s: %v", keyID, err)
	}
	if len(key) != 32 {
		t.Fatalf("unwrapped key has %d bytes, want 32", len(key))
	}
	return key
}

func hpkeOpener(t testing.TB, kem hpke.KEM, raw []byte) func(ct, enc, info []byte) ([]byte, error) {
	t.Helper()
	priv, err := kem.NewPrivateKey(raw)
	if err != nil {
		t.Fatalf("NewPrivateKey: %v", err)
	}
	return func(ct, enc, info []byte) ([]byte, error) {
		r, err := hpke.NewRecipient(enc, priv, hpke.HKDFSHA256(), hpke.AES256GCM(), info)
		if err != nil {
			return nil, err
		}
		return r.Open(nil, ct)
	}
}

func TestCreateKeyRing(t *testing.T) {
	e := newEnv(t)

	x25519, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	x25519Raw := base64.StdEncoding.EncodeToString(x25519.PublicKey().Bytes())
	der, err := x509.MarshalPKIXPublicKey(x25519.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	x25519PEM := string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err = x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	rsaPEM := string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	x25519Open := hpkeOpener(t, hpke.DHKEM(ecdh.X25519()), x25519.Bytes())
	rsaOpen := func(ct, _, info []byte) ([]byte, error) {
		return rsa.DecryptOAEP(sha256.New(), nil, rsaKey, ct, info)
	}

	tests := []struct {
		name      string
		body      map[string]any
		encoding  string
		generated bool // the answer carries the private key
		open      func(ct, enc, info []byte) ([]byte, error)
		wantPub   string // the ring's publicKey, in its canonical form
	}{
		{name: "generated X-Wing", body: map[string]any{"name": "gen-xwing", "props": map[string]any{"team": "pay"}, "keyProps": map[string]any{"k": "v"}},
			encoding: "hpke-xwing", generated: true},
		{name: "generated X25519", body: map[string]any{"name": "gen-x25519", "kem": "x25519", "algo": "aes256"},
			encoding: "hpke-x25519", generated: true},
		{name: "caller X25519 raw", body: map[string]any{"name": "own-x25519", "publicKey": x25519Raw}, encoding: "hpke-x25519", open: x25519Open, wantPub: x25519Raw},
		{name: "caller X25519 PEM", body: map[string]any{"name": "own-x25519-pem", "publicKey": x25519PEM}, encoding: "hpke-x25519", open: x25519Open, wantPub: x25519Raw},
		{name: "caller RSA-2048 PEM", body: map[string]any{"name": "own-rsa", "publicKey": rsaPEM}, encoding: "rsa-oaep-sha256", open: rsaOpen, wantPub: rsaPEM},
		{name: "caller key wins over kem", body: map[string]any{"name": "own-kem", "publicKey": x25519Raw, "kem": "xwing"}, encoding: "hpke-x25519", open: x25519Open},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(t, "POST", "/ks/keyrings", e.root, tc.body).want(t, http.StatusOK)
			raw := r.object(t)
			if _, ok := raw["privateKey"]; ok != tc.generated {
				t.Errorf("POST /ks/keyrings: privateKey present = %v, want %v; body %s", ok, tc.generated, r.body)
			}
			res := decode[kms.CreateKeyRingResult](t, r)
			if res.Ring == nil || res.Key == nil {
				t.Fatalf("POST /ks/keyrings = %s, want ring and key", r.body)
			}
			name := tc.body["name"].(string)
			if res.Ring.Name != name || res.Ring.DisplayName != name || res.Ring.ActiveAlgorithm != "aes256" || res.Ring.ID == "" {
				t.Errorf("ring = %+v, want name and displayName %q, activeAlgorithm aes256", res.Ring, name)
			}
			if res.Ring.ActiveKey != res.Key.ID || res.Key.Type != "aes256" {
				t.Errorf("ring.activeKey = %q, key = %+v, want the key's ID and type aes256", res.Ring.ActiveKey, res.Key)
			}
			if got := res.Key.KeyData.Encrypted.Key.Encoding; got != tc.encoding {
				t.Errorf("keyData.encrypted.key.encoding = %q, want %q", got, tc.encoding)
			}
			if tc.wantPub != "" && res.Ring.PublicKey != tc.wantPub {
				t.Errorf("ring.publicKey = %q, want %q", res.Ring.PublicKey, tc.wantPub)
			}
			if res.Ring.PublicKey == "" {
				t.Errorf("ring.publicKey is empty")
			}
			open := tc.open
			if tc.generated {
				priv, err := base64.StdEncoding.DecodeString(res.PrivateKey)
				if err != nil {
					t.Fatalf("privateKey is not base64: %v", err)
				}
				kem := hpke.MLKEM768X25519()
				if tc.encoding == "hpke-x25519" {
					kem = hpke.DHKEM(ecdh.X25519())
				}
				open = hpkeOpener(t, kem, priv)
			}
			unwrapKey(t, res.Key.KeyData, res.Ring.ID, res.Key.ID, open)
			if tc.body["props"] != nil && res.Ring.Props["team"] != "pay" {
				t.Errorf("ring.props = %v, want team: pay", res.Ring.Props)
			}
			if tc.body["keyProps"] != nil && res.Key.Props["k"] != "v" {
				t.Errorf("key.props = %v, want k: v", res.Key.Props)
			}
		})
	}

	e.createRing(t, "pay")
	errs := []struct {
		name string
		body any
		code string
	}{
		{"missing name", map[string]any{"algo": "aes256"}, "invalid"},
		{"empty name", map[string]any{"name": ""}, "invalid"},
		{"bad name", map[string]any{"name": "bad name!"}, "invalid"},
		{"65 characters", map[string]any{"name": strings.Repeat("a", 65)}, "invalid"},
		{"duplicate", map[string]any{"name": "pay"}, "conflict"},
		{"duplicate other case", map[string]any{"name": "Pay"}, "conflict"},
		{"bad algo", map[string]any{"name": "algo", "algo": "aes128"}, "invalid"},
		{"bad publicKey", map[string]any{"name": "pk", "publicKey": "bm90IGEga2V5"}, "invalid"},
		{"bad publicKey PEM", map[string]any{"name": "pk", "publicKey": "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"}, "invalid"},
		{"bad kem", map[string]any{"name": "kem", "kem": "p256"}, "invalid"},
		{"bad dataKeys", map[string]any{"name": "dk", "dataKeys": "both"}, "invalid"},
		{"name of wrong type", map[string]any{"name": 5}, "invalid"},
		{"invalid JSON", `{"name": "x"`, "invalid"},
	}
	for _, tc := range errs {
		t.Run("400 "+tc.name, func(t *testing.T) {
			e.do(t, "POST", "/ks/keyrings", e.root, tc.body).wantError(t, http.StatusBadRequest, tc.code)
		})
	}
	t.Run("31 characters (32 or more: shaped like a credential)", func(t *testing.T) {
		e.createRing(t, strings.Repeat("b", 31))
	})
	e.checkAuth(t, "POST", "/ks/keyrings", map[string]any{"name": "denied"})
	t.Run("200 with the create flag of the ring", func(t *testing.T) {
		secret, _ := e.apiKey(t, "keyring.allowed.create")
		e.do(t, "POST", "/ks/keyrings", secret, map[string]any{"name": "allowed", "kem": "x25519"}).want(t, http.StatusOK)
		e.do(t, "POST", "/ks/keyrings", secret, map[string]any{"name": "other", "kem": "x25519"}).wantError(t, http.StatusForbidden, "permission_denied")
	})
}

func TestGetKeyRing(t *testing.T) {
	e := newEnv(t)
	created := e.createRing(t, "Payments")
	reader, _ := e.apiKey(t, "keyring.payments.read")

	tests := []struct {
		name, path, secret string
	}{
		{"by name", "/ks/keyrings/Payments", e.root},
		{"by name, other case", "/ks/keyrings/pAYMENTS", e.root},
		{"by ID", "/ks/keyrings/" + created.Ring.ID + "?id=true", e.root},
		{"by ID, id=TRUE", "/ks/keyrings/" + created.Ring.ID + "?id=TRUE", e.root},
		{"with the read flag", "/ks/keyrings/payments", reader},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(t, "GET", tc.path, tc.secret, nil).want(t, http.StatusOK)
			got := decode[struct{ Ring *kms.KeyRing }](t, r).Ring
			if got == nil || got.ID != created.Ring.ID || got.Name != "Payments" || got.ActiveKey != created.Key.ID || got.PublicKey != created.Ring.PublicKey {
				t.Errorf("GET %s = %s, want ring %+v", tc.path, r.body, created.Ring)
			}
		})
	}
	errs := []struct {
		name, path string
		status     int
		code       string
	}{
		{"unknown name", "/ks/keyrings/nope", http.StatusNotFound, "not_found"},
		{"unknown ID", "/ks/keyrings/0123456789abcdef0123456789abcdef?id=true", http.StatusNotFound, "not_found"},
		{"name as ID", "/ks/keyrings/Payments?id=true", http.StatusNotFound, "not_found"},
		{"ID as name", "/ks/keyrings/" + created.Ring.ID, http.StatusNotFound, "not_found"},
		{"bad name", "/ks/keyrings/bad%20name!", http.StatusBadRequest, "invalid"},
		{"65 characters", "/ks/keyrings/" + strings.Repeat("a", 65), http.StatusBadRequest, "invalid"},
	}
	for _, tc := range errs {
		t.Run(tc.name, func(t *testing.T) {
			e.do(t, "GET", tc.path, e.root, nil).wantError(t, tc.status, tc.code)
		})
	}
	e.checkAuth(t, "GET", "/ks/keyrings/payments", nil)
	t.Run("403 by ID", func(t *testing.T) {
		secret, _ := e.apiKey(t, "keyring.other.read")
		e.do(t, "GET", "/ks/keyrings/"+created.Ring.ID+"?id=true", secret, nil).wantError(t, http.StatusForbidden, "permission_denied")
	})
}

// page is a list answer.
type page[T any] struct {
	Data       []T            `json:"data"`
	Pagination map[string]any `json:"pagination"`
}

// pageAll pages through path with limit, checking the pagination rules on
// every page, and returns the items in order.
func pageAll[T any](t *testing.T, e *env, path string, limit int) []T {
	t.Helper()
	var all []T
	cursor := ""
	for i := 0; ; i++ {
		if i > 100 {
			t.Fatalf("GET %s: more than 100 pages", path)
		}
		p := path + "?limit=" + strconv.Itoa(limit)
		if cursor != "" {
			p += "&cursor=" + cursor
		}
		r := e.do(t, "GET", p, e.root, nil).want(t, http.StatusOK)
		pg := decode[page[T]](t, r)
		if pg.Data == nil {
			t.Fatalf("GET %s: data = null, want an array", p)
		}
		pag := pg.Pagination
		if pag["limit"] != float64(limit) || pag["count"] != float64(len(pg.Data)) {
			t.Errorf("GET %s: pagination %v, want limit %d, count %d", p, pag, limit, len(pg.Data))
		}
		hasMore, ok := pag["hasMore"].(bool)
		if !ok {
			t.Fatalf("GET %s: pagination %v has no boolean hasMore", p, pag)
		}
		next, present := pag["nextCursor"].(string)
		if present != hasMore || (present && next == "") {
			t.Fatalf("GET %s: hasMore = %v but nextCursor = %q (present %v): nextCursor must be present exactly when hasMore", p, hasMore, next, present)
		}
		if hasMore && len(pg.Data) != limit {
			t.Errorf("GET %s: a page before the last has %d items, want %d", p, len(pg.Data), limit)
		}
		all = append(all, pg.Data...)
		if !hasMore {
			return all
		}
		cursor = next
	}
}

func TestListKeyRings(t *testing.T) {
	e := newEnv(t)
	want := map[string]bool{}
	for i := range 25 {
		name := "ring-" + strconv.Itoa(100+i)
		e.createRing(t, name)
		want[name] = true
	}

	for _, limit := range []int{7, 25, 100} {
		t.Run("limit "+strconv.Itoa(limit), func(t *testing.T) {
			rings := pageAll[kms.KeyRing](t, e, "/ks/keyrings", limit)
			seen := map[string]bool{}
			for i, r := range rings {
				if seen[r.Name] {
					t.Errorf("ring %q listed twice", r.Name)
				}
				seen[r.Name] = true
				if !want[r.Name] {
					t.Errorf("ring %q listed but not created", r.Name)
				}
				if i > 0 && rings[i-1].Name >= r.Name {
					t.Errorf("rings out of name order: %q before %q", rings[i-1].Name, r.Name)
				}
			}
			if len(seen) != len(want) {
				t.Errorf("listed %d rings, want %d", len(seen), len(want))
			}
		})
	}
	t.Run("default limit", func(t *testing.T) {
		r := e.do(t, "GET", "/ks/keyrings", e.root, nil).want(t, http.StatusOK)
		pg := decode[page[kms.KeyRing]](t, r)
		if pg.Pagination["limit"] != float64(100) || len(pg.Data) != 25 || pg.Pagination["hasMore"] != false {
			t.Errorf("GET /ks/keyrings = %v with %d items, want limit 100, 25 items, hasMore false", pg.Pagination, len(pg.Data))
		}
		if _, ok := pg.Pagination["nextCursor"]; ok {
			t.Errorf("GET /ks/keyrings: last page has nextCursor: %v", pg.Pagination)
		}
	})
	t.Run("limit 20000 is capped", func(t *testing.T) {
		r := e.do(t, "GET", "/ks/keyrings?limit=20000", e.root, nil).want(t, http.StatusOK)
		if got := decode[page[kms.KeyRing]](t, r).Pagination["limit"]; got != float64(10000) {
			t.Errorf("GET /ks/keyrings?limit=20000: pagination.limit = %v, want 10000", got)
		}
	})
	for _, limit := range []string{"0", "-1", "abc", "1.5", "%20"} {
		t.Run("400 limit "+limit, func(t *testing.T) {
			e.do(t, "GET", "/ks/keyrings?limit="+limit, e.root, nil).wantError(t, http.StatusBadRequest, "invalid")
		})
	}
	first := decode[page[kms.KeyRing]](t, e.do(t, "GET", "/ks/keyrings?limit=2", e.root, nil).want(t, http.StatusOK))
	cursor := first.Pagination["nextCursor"].(string)
	t.Run("400 tampered cursor", func(t *testing.T) {
		e.do(t, "GET", "/ks/keyrings?limit=2&cursor="+flip(cursor), e.root, nil).wantError(t, http.StatusBadRequest, "invalid")
		e.do(t, "GET", "/ks/keyrings?cursor=garbage!", e.root, nil).wantError(t, http.StatusBadRequest, "invalid")
	})
	t.Run("400 cursor of a key listing", func(t *testing.T) {
		for range 2 {
			e.do(t, "POST", "/ks/rotate", e.root, map[string]any{"ringname": "ring-100"}).want(t, http.StatusOK)
		}
		keys := decode[page[kms.Key]](t, e.do(t, "GET", "/ks/keyrings/ring-100/keys?limit=1", e.root, nil).want(t, http.StatusOK))
		kc, _ := keys.Pagination["nextCursor"].(string)
		if kc == "" {
			t.Fatalf("key listing has no nextCursor: %v", keys.Pagination)
		}
		e.do(t, "GET", "/ks/keyrings?cursor="+kc, e.root, nil).wantError(t, http.StatusBadRequest, "invalid")
		e.do(t, "GET", "/ks/keyrings/ring-100/keys?cursor="+cursor, e.root, nil).wantError(t, http.StatusBadRequest, "invalid")
	})
	e.checkAuth(t, "GET", "/ks/keyrings", nil)
	t.Run("200 with keyring.*.read", func(t *testing.T) {
		secret, _ := e.apiKey(t, "keyring.*.read")
		e.do(t, "GET", "/ks/keyrings?limit=1", secret, nil).want(t, http.StatusOK)
	})
}

func TestListKeys(t *testing.T) {
	e := newEnv(t)
	created := e.createRing(t, "keys")
	other := e.createRing(t, "other")
	ids := []string{created.Key.ID}
	for range 24 {
		r := e.do(t, "POST", "/ks/rotate", e.root, map[string]any{"ringname": "keys"}).want(t, http.StatusOK)
		ids = append(ids, decode[struct{ Key kms.Key }](t, r).Key.ID)
	}

	for _, path := range []string{"/ks/keyrings/keys/keys", "/ks/keyrings/KEYS/keys", "/ks/keyrings/" + created.Ring.ID + "/keys"} {
		t.Run(path, func(t *testing.T) {
			var items []map[string]any
			if strings.Contains(path, created.Ring.ID) {
				items = pageAllQuery(t, e, path, "id=true", 7)
			} else {
				items = pageAll[map[string]any](t, e, path, 7)
			}
			if len(items) != len(ids) {
				t.Fatalf("listed %d keys, want %d", len(items), len(ids))
			}
			// Each key once, oldest first. Key IDs start with their
			// creation time in milliseconds and the list is in ID order,
			// so keys made within one millisecond may come in any order.
			want := map[string]bool{}
			for _, id := range ids {
				want[id] = true
			}
			for i, it := range items {
				id, _ := it["id"].(string)
				if !want[id] {
					t.Errorf("key %d = %q: not a key of the ring, or listed twice", i, id)
				}
				delete(want, id)
				if i > 0 && id[:12] < items[i-1]["id"].(string)[:12] {
					t.Errorf("key %d (%s) is older than key %d (%s): want oldest first", i, id, i-1, items[i-1]["id"])
				}
				if it["type"] != "aes256" {
					t.Errorf("key %d type = %v, want aes256", i, it["type"])
				}
				if _, ok := it["keyData"]; ok {
					t.Errorf("key list item %d has keyData: %v", i, it)
				}
				if _, ok := it["props"].(map[string]any); !ok {
					t.Errorf("key list item %d has no props object: %v", i, it)
				}
			}
		})
	}

	first := decode[page[kms.Key]](t, e.do(t, "GET", "/ks/keyrings/keys/keys?limit=3", e.root, nil).want(t, http.StatusOK))
	cursor := first.Pagination["nextCursor"].(string)
	errs := []struct {
		name, path string
		status     int
		code       string
	}{
		{"unknown ring", "/ks/keyrings/nope/keys", http.StatusNotFound, "not_found"},
		{"unknown ring ID", "/ks/keyrings/0123456789abcdef0123456789abcdef/keys?id=true", http.StatusNotFound, "not_found"},
		{"bad name", "/ks/keyrings/bad%20name!/keys", http.StatusBadRequest, "invalid"},
		{"malformed ID", "/ks/keyrings/xyz/keys?id=true", http.StatusNotFound, "not_found"},
		{"limit 0", "/ks/keyrings/keys/keys?limit=0", http.StatusBadRequest, "invalid"},
		{"limit -1", "/ks/keyrings/keys/keys?limit=-1", http.StatusBadRequest, "invalid"},
		{"limit abc", "/ks/keyrings/keys/keys?limit=abc", http.StatusBadRequest, "invalid"},
		{"tampered cursor", "/ks/keyrings/keys/keys?cursor=" + flip(cursor), http.StatusBadRequest, "invalid"},
		{"cursor of another ring", "/ks/keyrings/other/keys?cursor=" + cursor, http.StatusBadRequest, "invalid"},
	}
	for _, tc := range errs {
		t.Run(tc.name, func(t *testing.T) {
			e.do(t, "GET", tc.path, e.root, nil).wantError(t, tc.status, tc.code)
		})
	}
	t.Run("limit 20000 is capped", func(t *testing.T) {
		r := e.do(t, "GET", "/ks/keyrings/keys/keys?limit=20000", e.root, nil).want(t, http.StatusOK)
		pg := decode[page[kms.Key]](t, r)
		if pg.Pagination["limit"] != float64(10000) || len(pg.Data) != 25 {
			t.Errorf("GET /ks/keyrings/keys/keys?limit=20000 = %v with %d items, want limit 10000 and 25 items", pg.Pagination, len(pg.Data))
		}
	})
	t.Run("one key in another ring", func(t *testing.T) {
		pg := decode[page[kms.Key]](t, e.do(t, "GET", "/ks/keyrings/other/keys", e.root, nil).want(t, http.StatusOK))
		if len(pg.Data) != 1 || pg.Data[0].ID != other.Key.ID {
			t.Errorf("GET /ks/keyrings/other/keys = %+v, want only %s", pg.Data, other.Key.ID)
		}
	})
	e.checkAuth(t, "GET", "/ks/keyrings/keys/keys", nil)
}

// pageAllQuery is pageAll with an extra query parameter.
func pageAllQuery(t *testing.T, e *env, path, query string, limit int) []map[string]any {
	t.Helper()
	var all []map[string]any
	cursor := ""
	for range 100 {
		p := path + "?" + query + "&limit=" + strconv.Itoa(limit)
		if cursor != "" {
			p += "&cursor=" + cursor
		}
		pg := decode[page[map[string]any]](t, e.do(t, "GET", p, e.root, nil).want(t, http.StatusOK))
		all = append(all, pg.Data...)
		next, _ := pg.Pagination["nextCursor"].(string)
		if pg.Pagination["hasMore"] != true {
			if next != "" {
				t.Errorf("GET %s: last page has nextCursor", p)
			}
			return all
		}
		cursor = next
	}
	t.Fatalf("GET %s: more than 100 pages", path)
	return nil
}

func TestGetKey(t *testing.T) {
	e := newEnv(t)
	created := e.createRing(t, "getkey")
	r := e.do(t, "POST", "/ks/rotate", e.root, map[string]any{"ringname": "getkey"}).want(t, http.StatusOK)
	rotated := decode[struct{ Key kms.Key }](t, r).Key

	for _, tc := range []struct {
		name, path string
		want       *kms.Key
	}{
		{"first key", "/ks/keyrings/getkey/keys/" + created.Key.ID, created.Key},
		{"rotated key", "/ks/keyrings/GetKey/keys/" + rotated.ID, &rotated},
		{"by ring ID", "/ks/keyrings/" + created.Ring.ID + "/keys/" + created.Key.ID + "?id=true", created.Key},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(t, "GET", tc.path, e.root, nil).want(t, http.StatusOK)
			got := decode[kms.Key](t, r)
			if got.ID != tc.want.ID || got.Type != "aes256" || got.KeyData == nil || *got.KeyData != *tc.want.KeyData {
				t.Errorf("GET %s = %s, want key %+v", tc.path, r.body, tc.want)
			}
		})
	}
	errs := []struct {
		name, path string
		status     int
		code       string
	}{
		{"unknown key", "/ks/keyrings/getkey/keys/0123456789abcdef0123456789abcdef", http.StatusNotFound, "not_found"},
		{"malformed key ID", "/ks/keyrings/getkey/keys/not-an-id", http.StatusNotFound, "not_found"},
		{"unknown ring", "/ks/keyrings/nope/keys/" + created.Key.ID, http.StatusNotFound, "not_found"},
		{"bad ring name", "/ks/keyrings/bad%20name!/keys/" + created.Key.ID, http.StatusBadRequest, "invalid"},
		{"malformed ring ID", "/ks/keyrings/getkey/keys/" + created.Key.ID + "?id=true", http.StatusNotFound, "not_found"},
	}
	for _, tc := range errs {
		t.Run(tc.name, func(t *testing.T) {
			e.do(t, "GET", tc.path, e.root, nil).wantError(t, tc.status, tc.code)
		})
	}
	t.Run("key of another ring", func(t *testing.T) {
		other := e.createRing(t, "getkey-other")
		e.do(t, "GET", "/ks/keyrings/getkey/keys/"+other.Key.ID, e.root, nil).wantError(t, http.StatusNotFound, "not_found")
	})
	e.checkAuth(t, "GET", "/ks/keyrings/getkey/keys/"+created.Key.ID, nil)
}

func TestRotate(t *testing.T) {
	e := newEnv(t)
	created := e.createRing(t, "rot")

	r := e.do(t, "POST", "/ks/rotate", e.root, map[string]any{"ringname": "ROT", "algo": "aes256"}).want(t, http.StatusOK)
	body := r.object(t)
	if len(body) != 1 || body["key"] == nil {
		t.Fatalf("POST /ks/rotate = %s, want {key}", r.body)
	}
	key := decode[struct{ Key kms.Key }](t, r).Key
	if key.ID == "" || key.ID == created.Key.ID || key.KeyData == nil || key.Type != "aes256" {
		t.Errorf("POST /ks/rotate: key = %+v, want a new aes256 key with keyData", key)
	}
	ring := decode[struct{ Ring kms.KeyRing }](t, e.do(t, "GET", "/ks/keyrings/rot", e.root, nil).want(t, http.StatusOK)).Ring
	if ring.ActiveKey != key.ID {
		t.Errorf("after rotation, activeKey = %s, want %s", ring.ActiveKey, key.ID)
	}

	errs := []struct {
		name   string
		body   any
		status int
		code   string
	}{
		{"missing ringname", map[string]any{"algo": "aes256"}, http.StatusBadRequest, "invalid"},
		{"bad algo", map[string]any{"ringname": "rot", "algo": "des"}, http.StatusBadRequest, "invalid"},
		{"bad name", map[string]any{"ringname": "bad name!"}, http.StatusBadRequest, "invalid"},
		{"ringname of wrong type", map[string]any{"ringname": []string{"rot"}}, http.StatusBadRequest, "invalid"},
		{"unknown ring", map[string]any{"ringname": "nope"}, http.StatusNotFound, "not_found"},
	}
	for _, tc := range errs {
		t.Run(tc.name, func(t *testing.T) {
			e.do(t, "POST", "/ks/rotate", e.root, tc.body).wantError(t, tc.status, tc.code)
		})
	}
	e.checkAuth(t, "POST", "/ks/rotate", map[string]any{"ringname": "rot"})

	t.Run("403 is in the activity trail", func(t *testing.T) {
		secret, keyID := e.apiKey(t, "keyring.rot.encrypt", "keyring.rot.read")
		msg := e.do(t, "POST", "/ks/rotate", secret, map[string]any{"ringname": "rot"}).wantError(t, http.StatusForbidden, "permission_denied")
		if !strings.Contains(msg, "keyring.rot.rotate") {
			t.Errorf("403 message %q does not name the missing flag keyring.rot.rotate", msg)
		}
		if _, err := e.svc.VerifyActivityChain(e.rootCtx); err != nil {
			t.Fatalf("VerifyActivityChain() after the 403 = %v", err)
		}
		denials := e.activity(t, func(a *kms.Activity) bool {
			return a.KeyID == keyID && a.Action == "keyring.rotate"
		})
		if len(denials) != 1 {
			t.Fatalf("found %d keyring.rotate records of API key %s, want 1: %+v", len(denials), keyID, denials)
		}
		d := denials[0]
		if d.Valid || d.Ring != "rot" || d.AccountID != e.account || d.Props["flag"] != "keyring.rot.rotate" {
			t.Errorf("denial record = %+v, want valid false, ring rot, account %s, props.flag keyring.rot.rotate", d, e.account)
		}
		// The answer did not rotate the ring.
		ring := decode[struct{ Ring kms.KeyRing }](t, e.do(t, "GET", "/ks/keyrings/rot", e.root, nil).want(t, http.StatusOK)).Ring
		if ring.ActiveKey != key.ID {
			t.Errorf("after a denied rotation, activeKey = %s, want %s", ring.ActiveKey, key.ID)
		}
	})
	t.Run("200 with keyring.*.rotate", func(t *testing.T) {
		secret, _ := e.apiKey(t, "keyring.*.rotate")
		e.do(t, "POST", "/ks/rotate", secret, map[string]any{"ringname": "rot"}).want(t, http.StatusOK)
	})
}

func TestConfig(t *testing.T) {
	e := newEnv(t)
	e.createRing(t, "cfg")

	r := e.do(t, "GET", "/ks/config?ringname=cfg", e.root, nil).want(t, http.StatusOK)
	got := decode[struct{ Config kms.KeyRingConfig }](t, r).Config
	if got.Algos.AES256.MaxEncryptCount != 0 || got.Props == nil || got.Key.Props == nil {
		t.Errorf("GET /ks/config = %s, want empty props and maxEncryptCount 0", r.body)
	}

	cfg := map[string]any{
		"props": map[string]any{"team": "pay"},
		"key":   map[string]any{"props": map[string]any{"purpose": "files"}},
		"algos": map[string]any{"aes256": map[string]any{"maxEncryptCount": 1000}},
	}
	for _, tc := range []struct {
		name string
		body map[string]any
	}{
		{"ringname", map[string]any{"ringname": "cfg", "config": cfg}},
		{"ringanme (the misspelt member)", map[string]any{"ringanme": "CFG", "config": cfg}},
		{"ringname wins over ringanme", map[string]any{"ringname": "cfg", "ringanme": "nope", "config": cfg}},
	} {
		t.Run("PUT "+tc.name, func(t *testing.T) {
			r := e.do(t, "PUT", "/ks/config", e.root, tc.body).want(t, http.StatusOK)
			got := decode[struct{ Config kms.KeyRingConfig }](t, r).Config
			if got.Props["team"] != "pay" || got.Key.Props["purpose"] != "files" || got.Algos.AES256.MaxEncryptCount != 1000 {
				t.Errorf("PUT /ks/config = %s, want the config sent", r.body)
			}
			r = e.do(t, "GET", "/ks/config?ringname=cfg", e.root, nil).want(t, http.StatusOK)
			if got2 := decode[struct{ Config kms.KeyRingConfig }](t, r).Config; got2.Algos.AES256.MaxEncryptCount != 1000 {
				t.Errorf("GET /ks/config after PUT = %s, want maxEncryptCount 1000", r.body)
			}
		})
	}
	t.Run("new keys get key.props", func(t *testing.T) {
		r := e.do(t, "POST", "/ks/rotate", e.root, map[string]any{"ringname": "cfg"}).want(t, http.StatusOK)
		if k := decode[struct{ Key kms.Key }](t, r).Key; k.Props["purpose"] != "files" {
			t.Errorf("rotated key props = %v, want purpose: files", k.Props)
		}
	})

	getErrs := []struct {
		name, path string
		status     int
		code       string
	}{
		{"missing ringname", "/ks/config", http.StatusBadRequest, "invalid"},
		{"bad ringname", "/ks/config?ringname=bad%20name!", http.StatusBadRequest, "invalid"},
		{"unknown ring", "/ks/config?ringname=nope", http.StatusNotFound, "not_found"},
	}
	for _, tc := range getErrs {
		t.Run("GET "+tc.name, func(t *testing.T) {
			e.do(t, "GET", tc.path, e.root, nil).wantError(t, tc.status, tc.code)
		})
	}
	putErrs := []struct {
		name   string
		body   any
		status int
		code   string
	}{
		{"missing ringname", map[string]any{"config": cfg}, http.StatusBadRequest, "invalid"},
		{"missing config", map[string]any{"ringname": "cfg"}, http.StatusBadRequest, "invalid"},
		{"null config", map[string]any{"ringname": "cfg", "config": nil}, http.StatusBadRequest, "invalid"},
		{"negative maxEncryptCount", map[string]any{"ringname": "cfg", "config": map[string]any{"algos": map[string]any{"aes256": map[string]any{"maxEncryptCount": -1}}}}, http.StatusBadRequest, "invalid"},
		{"bad name", map[string]any{"ringname": "bad name!", "config": cfg}, http.StatusBadRequest, "invalid"},
		{"unknown ring", map[string]any{"ringname": "nope", "config": cfg}, http.StatusNotFound, "not_found"},
		{"invalid JSON", `{"ringname": "cfg", "config": {]}`, http.StatusBadRequest, "invalid"},
	}
	for _, tc := range putErrs {
		t.Run("PUT "+tc.name, func(t *testing.T) {
			e.do(t, "PUT", "/ks/config", e.root, tc.body).wantError(t, tc.status, tc.code)
		})
	}
	t.Run("PUT maxEncryptCount of wrong type", func(t *testing.T) {
		body := `{"ringname": "cfg", "config": {"algos": {"aes256": {"maxEncryptCount": "lots"}}}}`
		msg := e.do(t, "PUT", "/ks/config", e.root, body).wantError(t, http.StatusBadRequest, "invalid")
		if !strings.Contains(msg, "maxEncryptCount") {
			t.Errorf("message %q does not name maxEncryptCount", msg)
		}
	})
	t.Run("GET", func(t *testing.T) { e.checkAuth(t, "GET", "/ks/config?ringname=cfg", nil) })
	t.Run("PUT", func(t *testing.T) {
		e.checkAuth(t, "PUT", "/ks/config", map[string]any{"ringname": "cfg", "config": cfg})
		reader, _ := e.apiKey(t, "keyring.cfg.read")
		e.do(t, "PUT", "/ks/config", reader, map[string]any{"ringname": "cfg", "config": cfg}).wantError(t, http.StatusForbidden, "permission_denied")
		e.do(t, "GET", "/ks/config?ringname=cfg", reader, nil).want(t, http.StatusOK)
	})
}

func TestMaxEncryptCount(t *testing.T) {
	e := newEnv(t)
	created := e.createRing(t, "counted")
	e.do(t, "PUT", "/ks/config", e.root, map[string]any{"ringname": "counted",
		"config": map[string]any{"algos": map[string]any{"aes256": map[string]any{"maxEncryptCount": 3}}}}).want(t, http.StatusOK)

	var keys []string
	for i := range 7 {
		res := e.encrypt(t, "counted")
		keys = append(keys, res.Key.ID)
		if i%3 == 0 {
			ring := decode[struct{ Ring kms.KeyRing }](t, e.do(t, "GET", "/ks/keyrings/counted", e.root, nil).want(t, http.StatusOK)).Ring
			if ring.ActiveKey != res.Key.ID {
				t.Errorf("encrypt %d used key %s, but GET /ks/keyrings/counted shows activeKey %s", i+1, res.Key.ID, ring.ActiveKey)
			}
		}
	}
	if keys[0] != created.Key.ID {
		t.Errorf("encrypt 1 used key %s, want the first key %s", keys[0], created.Key.ID)
	}
	for i := 1; i < 7; i++ {
		same := keys[i] == keys[i-1]
		if wantSame := i%3 != 0; same != wantSame {
			t.Errorf("encrypt %d used key %s after %s: same key = %v, want %v (maxEncryptCount 3)", i+1, keys[i], keys[i-1], same, wantSame)
		}
	}
	if keys[0] == keys[3] || keys[3] == keys[6] || keys[0] == keys[6] {
		t.Errorf("keys %v: want three distinct keys", keys)
	}
}

func TestDeleteKeyRing(t *testing.T) {
	e := newEnv(t)
	used := e.createRing(t, "in-use")
	free := e.createRing(t, "free")
	e.apiKey(t, "keyring.in-use.encrypt")

	t.Run("400 while an API key names it", func(t *testing.T) {
		msg := e.do(t, "DELETE", "/ks/keyrings/in-use", e.root, nil).wantError(t, http.StatusBadRequest, "conflict")
		if !strings.Contains(msg, "API key") {
			t.Errorf("message %q does not say an API key uses the ring", msg)
		}
		e.do(t, "GET", "/ks/keyrings/in-use", e.root, nil).want(t, http.StatusOK)
	})
	t.Run("200 when none does", func(t *testing.T) {
		res := e.encrypt(t, "free")
		r := e.do(t, "DELETE", "/ks/keyrings/FREE", e.root, nil).want(t, http.StatusOK)
		body := r.object(t)
		if len(body) != 2 || body["name"] != "free" || body["id"] != free.Ring.ID {
			t.Errorf("DELETE /ks/keyrings/FREE = %s, want {name: free, id: %s}", r.body, free.Ring.ID)
		}
		e.do(t, "GET", "/ks/keyrings/free", e.root, nil).wantError(t, http.StatusNotFound, "not_found")
		e.do(t, "GET", "/ks/keyrings/"+free.Ring.ID+"?id=true", e.root, nil).wantError(t, http.StatusNotFound, "not_found")
		e.do(t, "GET", "/ks/keyrings/free/keys/"+free.Key.ID, e.root, nil).wantError(t, http.StatusNotFound, "not_found")
		e.do(t, "GET", "/ks/hash/"+res.Hash, e.root, nil).wantError(t, http.StatusNotFound, "not_found")
		e.do(t, "DELETE", "/ks/keyrings/free", e.root, nil).wantError(t, http.StatusNotFound, "not_found")
		// The name is free again.
		e.createRing(t, "free")
	})
	t.Run("a flag set to false does not hold it", func(t *testing.T) {
		e.createRing(t, "victim")
		e.do(t, "POST", "/auth/apikey", e.root, map[string]any{"accountId": e.account,
			"flags": map[string]bool{"keyring.victim.delete": false, "keyring.victim.*": false, "*": false}}).want(t, http.StatusOK)
		e.do(t, "DELETE", "/ks/keyrings/victim", e.root, nil).want(t, http.StatusOK)
	})
	t.Run("400 names no key of another Account", func(t *testing.T) {
		e.createRing(t, "shared")
		other := decode[kms.Account](t, e.do(t, "POST", "/auth/accounts", e.root, map[string]any{"uid": "other"}).want(t, http.StatusOK))
		theirs := decode[kms.APIKey](t, e.do(t, "POST", "/auth/apikey", e.root, map[string]any{"accountId": other.ID,
			"flags": map[string]bool{"keyring.shared.encrypt": true}}).want(t, http.StatusOK))
		deleter, _ := e.apiKey(t, "keyring.*.delete")
		msg := e.do(t, "DELETE", "/ks/keyrings/shared", deleter, nil).wantError(t, http.StatusBadRequest, "conflict")
		if strings.Contains(msg, theirs.KeyID) || !strings.Contains(msg, "other accounts") {
			t.Errorf("message %q: want no key ID of another Account, and that keys of other accounts name the ring", msg)
		}
		_, mine := e.apiKey(t, "keyring.shared.read")
		msg = e.do(t, "DELETE", "/ks/keyrings/shared", deleter, nil).wantError(t, http.StatusBadRequest, "conflict")
		if strings.Contains(msg, theirs.KeyID) || !strings.Contains(msg, mine) {
			t.Errorf("message %q: want key %s of the caller's Account and not %s", msg, mine, theirs.KeyID)
		}
		// With accounts.all, every Account's keys are named.
		msg = e.do(t, "DELETE", "/ks/keyrings/shared", e.root, nil).wantError(t, http.StatusBadRequest, "conflict")
		if !strings.Contains(msg, theirs.KeyID) || !strings.Contains(msg, mine) {
			t.Errorf("message %q (accounts.all): want keys %s and %s", msg, mine, theirs.KeyID)
		}
	})
	t.Run("400 bad name", func(t *testing.T) {
		e.do(t, "DELETE", "/ks/keyrings/bad%20name!", e.root, nil).wantError(t, http.StatusBadRequest, "invalid")
	})
	e.checkAuth(t, "DELETE", "/ks/keyrings/in-use", nil)
	_ = used
}

// TestMaxEncryptCountCountsEarlierUses sets maxEncryptCount on rings whose
// active key already served encrypt calls: those calls count. A limit
// already reached rotates the ring on the next encrypt; one not reached
// leaves the key the calls it has left.
func TestMaxEncryptCountCountsEarlierUses(t *testing.T) {
	e := newEnv(t)
	setMax := func(t *testing.T, ring string, n int) {
		t.Helper()
		body := map[string]any{"ringname": ring, "config": map[string]any{"algos": map[string]any{"aes256": map[string]any{"maxEncryptCount": n}}}}
		e.do(t, "PUT", "/ks/config", e.root, body).want(t, http.StatusOK)
	}
	keys := func(t *testing.T, ring string, n int) []string {
		t.Helper()
		var ids []string
		for range n {
			ids = append(ids, e.encrypt(t, ring).Key.ID)
		}
		return ids
	}
	for _, tc := range []struct {
		name        string
		before, max int
		want        string // after the calls before: one letter per call, a new letter for a new key
	}{
		{"limit passed", 3, 2, "BBCCD"},
		{"limit reached", 2, 2, "BBCC"},
		{"limit not reached", 1, 3, "AABBB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ring := strings.ReplaceAll(tc.name, " ", "-")
			created := e.createRing(t, ring)
			ids := keys(t, ring, tc.before)
			setMax(t, ring, tc.max)
			ids = append(ids, keys(t, ring, len(tc.want))...)
			// Name the keys A, B, C... in the order of their first use.
			names := map[string]byte{}
			var got []byte
			for _, id := range ids {
				if _, ok := names[id]; !ok {
					names[id] = byte('A' + len(names))
				}
				got = append(got, names[id])
			}
			if ids[0] != created.Key.ID {
				t.Fatalf("the first encrypt used key %s, want the ring's first key %s", ids[0], created.Key.ID)
			}
			if want := strings.Repeat("A", tc.before) + tc.want; string(got) != want {
				t.Fatalf("%d encrypts, maxEncryptCount %d, then %d more used keys %s, want %s", tc.before, tc.max, len(tc.want), got, want)
			}
		})
	}
}
