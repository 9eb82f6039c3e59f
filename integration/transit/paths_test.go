package transit_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"

	vault "github.com/hashicorp/vault/api"
	"github.com/ringkms/kms/integration/internal/harness"
)

// TestTransitVaultPaths: kmsd -transit answers Vault's paths outside the
// transit engine (what Vault's clients call besides it: sys/health,
// sys/mounts, auth/...) 404 in Vault's error shape, saying that only the
// engine at /v1/transit/ is served, while kmsd's own routes answer as
// ever; and a batch's partial_failure_response_code of 101 is refused
// with 400 before any item is encrypted.
func TestTransitVaultPaths(t *testing.T) {
	in := harness.New(t)
	p := in.Start(t, "-transit")
	for _, path := range []string{"/v1/sys/health", "/v1/sys/mounts", "/v1/auth/token/create", "/v1/secret/data/app"} {
		req, _ := http.NewRequest(http.MethodGet, p.URL+path, nil)
		req.Header.Set("X-Vault-Token", in.Bootstrap)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Errors []string `json:"errors"`
		}
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusNotFound || len(body.Errors) != 1 ||
			!strings.Contains(body.Errors[0], `"`+path+`" is not served`) || !strings.Contains(body.Errors[0], "transit engine, at /v1/transit/") {
			t.Errorf("GET %s = %d %+v (%v), want 404 in Vault's shape naming what is served", path, resp.StatusCode, body, err)
		}
	}
	c := vaultClient(t, p, in.Bootstrap)
	var re *vault.ResponseError
	if _, err := c.Sys().Health(); !errors.As(err, &re) || re.StatusCode != http.StatusNotFound || len(re.Errors) != 1 ||
		!strings.Contains(re.Errors[0], "only Vault's transit engine") {
		t.Errorf("Vault client Sys().Health() = %v, want 404 saying what is served", err)
	}
	// kmsd's own interface is beside it, as before.
	if resp, err := http.Get(p.URL + "/healthz"); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("GET /healthz = %v, %v", resp, err)
	} else {
		resp.Body.Close()
	}

	// A batch with a partial_failure_response_code of 101: 400, and no
	// item encrypted.
	b64 := base64.StdEncoding.EncodeToString([]byte("x"))
	batch, _ := json.Marshal(map[string]any{"batch_input": []any{map[string]any{"plaintext": b64}, map[string]any{"plaintext": "%%%"}},
		"partial_failure_response_code": 101})
	resp, err := c.Logical().WriteRawWithContext(context.Background(), "transit/encrypt/pf", batch)
	if resp == nil {
		t.Fatalf("batch with partial_failure_response_code 101: %v", err)
	}
	var out bytes.Buffer
	out.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(out.String(), "partial_failure_response_code") {
		t.Errorf("batch with partial_failure_response_code 101 = %d %s, want 400", resp.StatusCode, out.String())
	}
	if k, err := c.Logical().Read("transit/keys/pf"); err != nil || k != nil {
		t.Errorf("read of the key pf after the refused batch = %v, %v; want none made", k, err)
	}
	p.Stop(t)
}
