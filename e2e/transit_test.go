package e2e

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
)

// vaultClient is HashiCorp's Vault client of the kmsd p, acting with
// secret, without retries or the environment's VAULT_ settings.
func vaultClient(t *testing.T, p *proc, secret string) *vault.Client {
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
	in := newInstance(t)
	p := in.start(t, "-transit", "-metrics")
	c := vaultClient(t, p, in.bootstrap)

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
	kc, err := client.New(p.URL, client.WithAPIKey(in.bootstrap))
	if err != nil {
		t.Fatal(err)
	}
	recs, err := kc.SearchActivity(context.Background(), client.ActivityFilter{Ring: "e2e"}, kms.PageRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, a := range recs.Data {
		actions = append(actions, a.Action)
	}
	if got := strings.Join(actions, " "); got != "transit.key.create transit.encrypt transit.key.rotate transit.rewrap transit.decrypt" {
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
	p = in.start(t)
	if _, err := vaultClient(t, p, in.bootstrap).Logical().Write("transit/encrypt/e2e", map[string]any{"plaintext": ""}); !errors.As(err, &re) || re.StatusCode != 404 {
		t.Errorf("transit without -transit = %v, want 404", err)
	}
	p.Stop(t)
}
