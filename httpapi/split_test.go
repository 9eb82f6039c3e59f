package httpapi_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/docblock"
)

// TestSplitDataKeys: POST /ks/keyrings takes dataKeys, split when it is
// absent, empty or null and ring only by name; every answer that shows a
// ring shows it, and on a split ring the encrypt answer and the decrypt
// answer carry the call's keyShare, alone or in a batch; a refused or
// failed decrypt carries none.
func TestSplitDataKeys(t *testing.T) {
	e := newEnv(t)
	r := e.do(t, "POST", "/ks/keyrings", e.root, map[string]any{"name": "docs", "kem": "x25519"}).want(t, http.StatusOK)
	if got := decode[kms.CreateKeyRingResult](t, r).Ring.DataKeys; got != "split" {
		t.Fatalf("POST /ks/keyrings without dataKeys answered dataKeys %q, want split", got)
	}
	for _, c := range []struct {
		body map[string]any
		want string
	}{
		{map[string]any{"name": "split2", "dataKeys": "split"}, "split"},
		{map[string]any{"name": "split3", "dataKeys": ""}, "split"},
		{map[string]any{"name": "split4", "dataKeys": nil}, "split"},
		{map[string]any{"name": "plain", "kem": "x25519", "dataKeys": "ring"}, "ring"},
	} {
		r := e.do(t, "POST", "/ks/keyrings", e.root, c.body).want(t, http.StatusOK)
		if got := decode[kms.CreateKeyRingResult](t, r).Ring.DataKeys; got != c.want {
			t.Fatalf("POST /ks/keyrings %v answered dataKeys %q, want %s", c.body, got, c.want)
		}
	}
	for _, v := range []any{"both", "SPLIT", " split", 1, true} {
		msg := e.do(t, "POST", "/ks/keyrings", e.root, map[string]any{"name": "bad", "dataKeys": v}).wantError(t, http.StatusBadRequest, "invalid")
		if s, ok := v.(string); ok && (!strings.Contains(msg, `"ring"`) || !strings.Contains(msg, `"split"`)) {
			t.Errorf("dataKeys %q: message %q, want one naming ring and split", s, msg)
		}
	}
	type ringBody struct{ Ring kms.KeyRing }
	if got := decode[ringBody](t, e.do(t, "GET", "/ks/keyrings/docs", e.root, nil).want(t, http.StatusOK)).Ring.DataKeys; got != "split" {
		t.Errorf("GET /ks/keyrings/docs: dataKeys %q, want split", got)
	}
	for _, ring := range pageAll[kms.KeyRing](t, e, "/ks/keyrings", 10) {
		if want := map[bool]string{true: "ring", false: "split"}[ring.Name == "plain"]; ring.DataKeys != want {
			t.Errorf("GET /ks/keyrings: %s has dataKeys %q, want %s", ring.Name, ring.DataKeys, want)
		}
	}

	enc := e.encrypt(t, "docs")
	again := e.encrypt(t, "docs")
	if len(shareOf(t, enc.KeyShare)) != 32 || enc.KeyShare == again.KeyShare {
		t.Fatalf("two encrypt calls answered the shares %q and %q, want two of 32 bytes", enc.KeyShare, again.KeyShare)
	}
	dec := decode[kms.DecryptResult](t, e.do(t, "POST", "/ks/decrypt", e.root, map[string]any{"hash": enc.Hash, "header": enc.Header}).want(t, http.StatusOK))
	if dec.KeyShare != enc.KeyShare {
		t.Fatalf("POST /ks/decrypt answered share %q, want its encrypt's %q", dec.KeyShare, enc.KeyShare)
	}
	if plain := e.encrypt(t, "plain"); plain.KeyShare != "" {
		t.Errorf("POST /ks/encrypt on a ring of ring keys answered a share")
	}
	failed := e.do(t, "POST", "/ks/decrypt", e.root, map[string]any{"hash": enc.Hash, "header": again.Header}).want(t, http.StatusUnprocessableEntity)
	if _, ok := failed.object(t)["keyShare"]; ok {
		t.Errorf("a decrypt that failed verification answered a share: %s", failed.body)
	}
	writer, _ := e.apiKey(t, "keyring.docs.encrypt")
	denied := e.do(t, "POST", "/ks/decrypt", writer, map[string]any{"hash": enc.Hash, "header": enc.Header})
	denied.wantError(t, http.StatusForbidden, "permission_denied")
	if bytes.Contains(denied.body, []byte("keyShare")) {
		t.Errorf("a refused decrypt answered a share: %s", denied.body)
	}

	batch := decode[kms.EncryptBatchResult](t, e.do(t, "POST", "/ks/encrypt/batch", e.root, map[string]any{"ringname": "docs", "count": 3}).want(t, http.StatusOK))
	var items []map[string]any
	seen := map[string]bool{enc.KeyShare: true}
	for i, it := range batch.Items {
		if it.EncryptResult == nil || seen[it.KeyShare] || len(shareOf(t, it.KeyShare)) != 32 {
			t.Fatalf("batch item %d = %+v, want a share of its own", i, it)
		}
		seen[it.KeyShare] = true
		items = append(items, map[string]any{"hash": it.Hash, "header": it.Header})
	}
	decs := decode[kms.DecryptBatchResult](t, e.do(t, "POST", "/ks/decrypt/batch", e.root, map[string]any{"items": items}).want(t, http.StatusOK))
	for i, it := range decs.Items {
		if it.DecryptResult == nil || it.KeyShare != batch.Items[i].KeyShare {
			t.Fatalf("decrypt batch item %d = %+v, want the share of encrypt item %d", i, it, i)
		}
	}
}

// TestSplitFirstSession: the ring that docs/API.md's first session with
// curl makes, with the very body it sends, has split data keys, and the
// encrypt it then sends answers a keyShare, which the session shows.
func TestSplitFirstSession(t *testing.T) {
	doc := docblock.Read(t, "docs/API.md")
	start := strings.Index(doc, "## A first session with curl")
	if start < 0 {
		t.Fatal(`docs/API.md has no section "A first session with curl"`)
	}
	session := doc[start:]
	session = session[:strings.Index(session, "\n```\n")] // the end of its first block
	body := func(path string) map[string]any {
		t.Helper()
		m := regexp.MustCompile(regexp.QuoteMeta(path) + ` [^\n]*\\\n[^\n]*-d '([^']*)'`).FindStringSubmatch(session)
		if m == nil {
			t.Fatalf("the first session sends no body to %s", path)
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(m[1]), &v); err != nil {
			t.Fatalf("the first session's body for %s, %s: %v", path, m[1], err)
		}
		return v
	}
	e := newEnv(t)
	created := decode[kms.CreateKeyRingResult](t, e.do(t, "POST", "/ks/keyrings", e.root, body("/ks/keyrings")).want(t, http.StatusOK))
	if created.Ring.DataKeys != kms.DataKeysSplit {
		t.Fatalf("the first session's ring has dataKeys %q, want split", created.Ring.DataKeys)
	}
	enc := decode[kms.EncryptResult](t, e.do(t, "POST", "/ks/encrypt", e.root, body("/ks/encrypt")).want(t, http.StatusOK))
	if len(shareOf(t, enc.KeyShare)) != 32 {
		t.Fatalf("the first session's encrypt answered the share %q, want 32 bytes", enc.KeyShare)
	}
	if !strings.Contains(session, "keyShare") {
		t.Error("the first session does not show the encrypt's keyShare, which the data key needs")
	}
}

// shareOf decodes a keyShare (standard base64).
func shareOf(t testing.TB, share string) []byte {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(share)
	if err != nil {
		t.Fatalf("keyShare %q is not standard base64", share)
	}
	return b
}

// TestSplitSharesHoldNoSecret: after encrypts, decrypts (granted,
// refused, failed) and batch calls on a split ring, no share is in the
// log (the handler's and the Service's), in any value of the store or in
// any record of the activity trail, in any of its forms: raw, standard
// base64, URL-safe base64 with or without padding. The store holds the
// ring's share secret sealed, and only that.
func TestSplitSharesHoldNoSecret(t *testing.T) {
	e := newEnv(t, withServiceLog)
	e.do(t, "POST", "/ks/keyrings", e.root, map[string]any{"name": "docs", "kem": "x25519", "dataKeys": "split"}).want(t, http.StatusOK)
	var shares []string
	var hashes []map[string]any
	for range 3 {
		res := e.encrypt(t, "docs")
		shares = append(shares, res.KeyShare)
		hashes = append(hashes, map[string]any{"hash": res.Hash, "header": res.Header})
	}
	asset := e.encryptAsset(t, "docs", map[string]any{"data": map[string]any{"f": 1}})
	shares = append(shares, asset.KeyShare)
	batch := decode[kms.EncryptBatchResult](t, e.do(t, "POST", "/ks/encrypt/batch", e.root, map[string]any{"ringname": "docs", "count": 5}).want(t, http.StatusOK))
	for _, it := range batch.Items {
		shares = append(shares, it.KeyShare)
		hashes = append(hashes, map[string]any{"hash": it.Hash, "header": it.Header})
	}
	for _, h := range hashes[:2] {
		e.do(t, "POST", "/ks/decrypt", e.root, h).want(t, http.StatusOK)
	}
	e.do(t, "POST", "/ks/decrypt/batch", e.root, map[string]any{"items": hashes}).want(t, http.StatusOK)
	writer, _ := e.apiKey(t, "keyring.docs.encrypt")
	e.do(t, "POST", "/ks/decrypt", writer, hashes[0]).want(t, http.StatusForbidden)
	e.do(t, "POST", "/ks/decrypt", e.root, map[string]any{"hash": hashes[0]["hash"], "header": hashes[1]["header"]}).want(t, http.StatusUnprocessableEntity)

	type form struct {
		what string
		b    []byte
	}
	var forms []form
	for i, s := range shares {
		raw := shareOf(t, s)
		if len(raw) != 32 {
			t.Fatalf("share %d has %d bytes", i, len(raw))
		}
		for name, enc := range map[string]*base64.Encoding{"base64": base64.StdEncoding, "base64url": base64.URLEncoding, "raw base64url": base64.RawURLEncoding, "raw base64": base64.RawStdEncoding} {
			forms = append(forms, form{name, []byte(enc.EncodeToString(raw))})
		}
		forms = append(forms, form{"raw", raw})
	}
	scan := func(where string, b []byte) {
		for _, f := range forms {
			if bytes.Contains(b, f.b) {
				t.Errorf("%s holds a share (%s)", where, f.what)
			}
		}
	}

	if n := len(e.logs.Lines(t)); n < 10 {
		t.Fatalf("the log has %d lines; was it captured?", n)
	}
	scan("the log", []byte(e.logs.String()))
	sealed := 0
	err := e.store.View(context.Background(), func(tx kms.Txn) error {
		return tx.Scan(kms.ScanOptions{}, func(k, v []byte) (bool, error) {
			scan("store entry "+string(k), v)
			scan("a store key", k)
			if bytes.Contains(v, []byte(`"sealedShareSecret"`)) {
				sealed++
			}
			return true, nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if sealed != 1 {
		t.Errorf("the store holds %d sealed share secrets, want the ring's", sealed)
	}
	records := 0
	err = e.store.Trail().Scan(1, func(_ uint64, rec []byte) (bool, error) {
		records++
		scan("an activity record", rec)
		return true, nil
	})
	if err != nil || records < len(shares)+len(hashes) {
		t.Fatalf("the trail has %d records (%v); want those of every call", records, err)
	}
}
