package transit_test

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	vault "github.com/hashicorp/vault/api"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/client"
	"github.com/ringkms/kms/integration/internal/harness"
	"github.com/ringkms/kms/internal/kmsdtest"
	"github.com/ringkms/kms/internal/vaultct"
)

// vaultClient is HashiCorp's Vault client of the kmsd p, acting with
// secret, without retries or the environment's VAULT_ settings.
func vaultClient(t *testing.T, p *kmsdtest.Proc, secret string) *vault.Client {
	t.Helper()
	cfg := vault.DefaultConfig()
	cfg.Address, cfg.MaxRetries, cfg.Timeout = p.URL, 0, 30*time.Second
	c, err := vault.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.SetToken(secret)
	return c
}

// TestTransit: kmsd -transit serves Vault's transit interface at
// /v1/transit/ beside its own, to HashiCorp's client, with the same
// credentials, records and metrics; without -transit the path is not
// served. The OpenAPI document describes kmsd's own interface only:
// transit's is Vault's (docs/TRANSIT.md), so its calls do not go through
// the validating client.
func TestTransit(t *testing.T) {
	in := harness.New(t)
	p := in.Start(t, "-transit", "-metrics")
	c := vaultClient(t, p, in.Bootstrap)

	if _, err := c.Logical().Write("transit/keys/e2e", nil); err != nil {
		t.Fatalf("create key = %v", err)
	}
	enc, err := c.Logical().Write("transit/encrypt/e2e", map[string]any{"plaintext": base64.StdEncoding.EncodeToString([]byte("hello"))})
	if err != nil {
		t.Fatalf("encrypt = %v", err)
	}
	ct, _ := enc.Data["ciphertext"].(string)
	if !strings.HasPrefix(ct, "vault:v1:") {
		t.Fatalf("ciphertext = %q", ct)
	}
	if _, err := c.Logical().Write("transit/keys/e2e/rotate", nil); err != nil {
		t.Fatal(err)
	}
	rw, err := c.Logical().Write("transit/rewrap/e2e", map[string]any{"batch_input": []any{map[string]any{"ciphertext": ct}}})
	if err != nil {
		t.Fatal(err)
	}
	ct2, _ := rw.Data["batch_results"].([]any)[0].(map[string]any)["ciphertext"].(string)
	dec, err := c.Logical().Write("transit/decrypt/e2e", map[string]any{"ciphertext": ct2})
	if err != nil || dec.Data["plaintext"] != base64.StdEncoding.EncodeToString([]byte("hello")) || !strings.HasPrefix(ct2, "vault:v2:") {
		t.Fatalf("decrypt of the rewrapped %q = %v, %v", ct2, dec, err)
	}
	var re *vault.ResponseError
	if _, err := vaultClient(t, p, "rk_wrong").Logical().Write("transit/encrypt/e2e", map[string]any{"plaintext": ""}); !errors.As(err, &re) || re.StatusCode != 403 {
		t.Errorf("encrypt with a wrong credential = %v, want 403", err)
	}

	// The calls are in the activity trail, seen through kmsd's own API.
	kc := harness.Client(t, p, in.Bootstrap)
	if got := harness.Actions(t, kc, client.ActivityFilter{Ring: "e2e"}); got != "transit.key.create transit.encrypt transit.key.rotate transit.rewrap transit.decrypt" {
		t.Errorf("the trail of ring e2e = %s", got)
	}
	// And in the metrics, by route and by key operation.
	resp, err := http.Get(p.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`route="/v1/transit/encrypt/:name"`, `kms_key_operations_total{operation="transit.encrypt",ring="e2e"} 1`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	p.Stop(t)

	// Without -transit, /v1/transit is a path kmsd does not serve.
	p = in.Start(t)
	if _, err := vaultClient(t, p, in.Bootstrap).Logical().Write("transit/encrypt/e2e", map[string]any{"plaintext": ""}); !errors.As(err, &re) || re.StatusCode != 404 {
		t.Errorf("transit without -transit = %v, want 404", err)
	}
	p.Stop(t)
}

// TestTransitHeldKeys: over HTTP, against the real kmsd -transit, a
// credential with keyring.<name>.read, .rotate and .create gets no key
// of a transit key from the /asym routes (their answers carry its
// metadata without keyData.key), and nothing it got opens a ciphertext
// another credential made; the export of a key made exportable needs
// keyring.<name>.export, and its refusals are in the trail; a ring made
// by POST /asym/keyrings is no transit key (400).
func TestTransitHeldKeys(t *testing.T) {
	ctx := context.Background()
	in := harness.New(t)
	p := in.Start(t, "-transit")
	root := harness.Client(t, p, in.Bootstrap)
	apiKey := func(flags ...string) string { return in.APIKey(t, p, flags...) }
	app := vaultClient(t, p, apiKey("keyring.app.encrypt", "keyring.app.create"))
	if _, err := app.Logical().Write("transit/keys/app", nil); err != nil {
		t.Fatal(err)
	}
	enc, err := app.Logical().Write("transit/encrypt/app", map[string]any{"plaintext": base64.StdEncoding.EncodeToString([]byte("payroll"))})
	if err != nil {
		t.Fatal(err)
	}
	ct, _ := enc.Data["ciphertext"].(string)

	snoop := harness.Client(t, p, apiKey("keyring.app.read", "keyring.app.rotate", "keyring.app.create"))
	tk := readTransitKeyIDs(t, p, in.Bootstrap, "app")
	ak, err := snoop.GetAsymKey(ctx, kms.RingRef{Name: "app"}, tk[1])
	if err != nil || !ak.Held || ak.KeyData.Key != "" {
		t.Fatalf("GET /asym/keyrings/app/keys/{v1} = %+v, %v; want its metadata without its key", ak, err)
	}
	rot, err := snoop.RotateAsym(ctx, kms.RotateInput{RingName: "app"})
	if err != nil || !rot.Held || rot.KeyData.Key != "" {
		t.Fatalf("POST /asym/rotate = %+v, %v; want the new key's metadata without its key", rot, err)
	}
	_, err = snoop.CreateAsymKeyRing(ctx, kms.CreateAsymKeyRingInput{Name: "app"})
	if kms.ErrorKind(err) != kms.KindConflict {
		t.Errorf("POST /asym/keyrings over a transit key = %v, want a conflict", err)
	}
	_, err = snoop.ExportAsymKey(ctx, kms.RingRef{Name: "app"}, tk[1])
	if kms.ErrorKind(err) != kms.KindPermissionDenied {
		t.Errorf("export without keyring.app.export = %v, want permission denied", err)
	}
	for _, k := range []string{ak.KeyData.Key, rot.KeyData.Key} {
		if b, err := base64.StdEncoding.DecodeString(k); err == nil && len(b) == 32 && opensVaultCiphertext(ct, b) {
			t.Fatal("a key the /asym routes answered opens the transit ciphertext offline")
		}
	}

	// A ring made ahead by POST /asym/keyrings is no transit key.
	creator := harness.Client(t, p, apiKey("keyring.pre.create"))
	if _, err := creator.CreateAsymKeyRing(ctx, kms.CreateAsymKeyRingInput{Name: "pre"}); err != nil {
		t.Fatal(err)
	}
	var re *vault.ResponseError
	_, err = vaultClient(t, p, apiKey("keyring.pre.encrypt", "keyring.pre.create")).Logical().Write("transit/encrypt/pre",
		map[string]any{"plaintext": base64.StdEncoding.EncodeToString([]byte("x"))})
	if !errors.As(err, &re) || re.StatusCode != 400 || !strings.Contains(strings.Join(re.Errors, " "), "POST /asym/keyrings") {
		t.Errorf("transit encrypt with a ring made by POST /asym/keyrings = %v, want 400 saying why", err)
	}

	// An exportable key: the export needs the flag, and opens what the
	// key sealed.
	admin := vaultClient(t, p, in.Bootstrap)
	if _, err := admin.Logical().Write("transit/keys/app/config", map[string]any{"exportable": true}); err != nil {
		t.Fatal(err)
	}
	if _, err := vaultClient(t, p, apiKey("keyring.app.*")).Logical().Read("transit/export/encryption-key/app/1"); !errors.As(err, &re) || re.StatusCode != 403 {
		t.Errorf("export with keyring.app.* = %v, want 403", err)
	}
	exp, err := vaultClient(t, p, apiKey("keyring.app.export")).Logical().Read("transit/export/encryption-key/app/1")
	if err != nil || exp == nil {
		t.Fatalf("export with keyring.app.export = %v, %v", exp, err)
	}
	k1, _ := exp.Data["keys"].(map[string]any)["1"].(string)
	if b, err := base64.StdEncoding.DecodeString(k1); err != nil || !opensVaultCiphertext(ct, b) {
		t.Errorf("the exported version 1 does not open its ciphertext")
	}
	ek, err := harness.Client(t, p, apiKey("keyring.app.export")).ExportAsymKey(ctx, kms.RingRef{Name: "app"}, tk[1])
	if err != nil || ek.KeyData.Key != k1 {
		t.Errorf("GET /asym/keyrings/app/keys/{v1}/export = %+v, %v; want the key Vault's export answered", ek, err)
	}
	refusedOnly := false
	if got := harness.Actions(t, root, client.ActivityFilter{Ring: "app", Valid: &refusedOnly}); got != "asym.key.export transit.key.export" {
		t.Errorf("refused calls on app = %s, want the two exports without the flag", got)
	}
	p.Stop(t)
	in.VerifyAudit(t)
}

// readTransitKeyIDs returns the key IDs of the versions of the transit
// key name, from the trail's records of its versions: the create and
// rotate records name each new key.
func readTransitKeyIDs(t *testing.T, p *kmsdtest.Proc, secret, name string) map[int]string {
	t.Helper()
	recs, err := harness.Client(t, p, secret).SearchActivity(context.Background(), client.ActivityFilter{Ring: name}, kms.PageRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[int]string{}
	for _, a := range recs.Data {
		if id, _ := a.Props["keyId"].(string); id != "" && (a.Action == "transit.key.create" || a.Action == "transit.key.rotate") {
			ids[len(ids)+1] = id
		}
	}
	return ids
}

// opensVaultCiphertext reports whether key opens ct (vault:v<N>:...)
// offline, as AES-256-GCM as Vault frames it (internal/vaultct).
func opensVaultCiphertext(ct string, key []byte) bool {
	_, blob, err := vaultct.Parse(ct)
	if err != nil {
		return false
	}
	aead, err := vaultct.NewAEAD(key)
	if err != nil {
		return false
	}
	_, err = vaultct.Open(aead, blob)
	return err == nil
}
