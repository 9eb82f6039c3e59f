package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/kmstest"
)

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

	e.wantGetErrors(t, "GET ", []getError{
		{"missing ringname", "/ks/config", http.StatusBadRequest, "invalid"},
		{"bad ringname", "/ks/config?ringname=bad%20name!", http.StatusBadRequest, "invalid"},
		{"unknown ring", "/ks/config?ringname=nope", http.StatusNotFound, "not_found"},
	})
	e.wantBodyErrors(t, "PUT", "/ks/config", "PUT ", []bodyError{
		{"missing ringname", map[string]any{"config": cfg}, http.StatusBadRequest, "invalid"},
		{"missing config", map[string]any{"ringname": "cfg"}, http.StatusBadRequest, "invalid"},
		{"null config", map[string]any{"ringname": "cfg", "config": nil}, http.StatusBadRequest, "invalid"},
		{"negative maxEncryptCount", map[string]any{"ringname": "cfg", "config": map[string]any{"algos": map[string]any{"aes256": map[string]any{"maxEncryptCount": -1}}}}, http.StatusBadRequest, "invalid"},
		{"bad name", map[string]any{"ringname": "bad name!", "config": cfg}, http.StatusBadRequest, "invalid"},
		{"unknown ring", map[string]any{"ringname": "nope", "config": cfg}, http.StatusNotFound, "not_found"},
		{"invalid JSON", `{"ringname": "cfg", "config": {]}`, http.StatusBadRequest, "invalid"},
	})
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
			got := kmstest.UseOrder(ids)
			if ids[0] != created.Key.ID {
				t.Fatalf("the first encrypt used key %s, want the ring's first key %s", ids[0], created.Key.ID)
			}
			if want := strings.Repeat("A", tc.before) + tc.want; got != want {
				t.Fatalf("%d encrypts, maxEncryptCount %d, then %d more used keys %s, want %s", tc.before, tc.max, len(tc.want), got, want)
			}
		})
	}
}
