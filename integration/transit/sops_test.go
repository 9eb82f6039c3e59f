package transit_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/integration/internal/harness"
)

// sopsRun runs the real sops command line with args, as the holder of
// the credential token, in dir, and returns what it printed.
func sopsRun(t *testing.T, dir, token string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	// Vault's own variables and a ~/.vault-token of the machine stay out:
	// the credential is the one given.
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "VAULT_") {
			env = append(env, kv)
		}
	}
	return harness.RunSOPS(t, dir, append(env, "VAULT_TOKEN="+token), args...)
}

// TestSOPS: the real sops (built from its Go module at a pinned version)
// encrypts a YAML file with --hc-vault-transit against kmsd -transit and
// decrypts it again; with a credential that may encrypt but not decrypt,
// sops encrypts but cannot decrypt, and the refusal is in the activity
// trail.
func TestSOPS(t *testing.T) {
	harness.SOPS(t) // built before kmsd starts, so that its first build does not count against kmsd's timeouts
	in := harness.New(t)
	p := in.Start(t, "-transit")
	if _, err := vaultClient(t, p, in.Bootstrap).Logical().Write("transit/keys/sops", nil); err != nil {
		t.Fatalf("create the transit key = %v", err)
	}
	both := in.APIKey(t, p, "keyring.sops.encrypt", "keyring.sops.decrypt")
	encOnly := in.APIKey(t, p, "keyring.sops.encrypt")

	dir := t.TempDir()
	const plain = "database:\n    user: app\n    password: hunter2-very-secret\n"
	if err := os.WriteFile(filepath.Join(dir, "secrets.yaml"), []byte(plain), 0o600); err != nil {
		t.Fatal(err)
	}
	uri := p.URL + "/v1/transit/keys/sops"
	for _, who := range []struct{ name, token string }{{"a credential that may encrypt and decrypt", both}, {"an encrypt-only credential", encOnly}} {
		t.Run("encrypt with "+who.name, func(t *testing.T) {
			enc, errOut, err := sopsRun(t, dir, who.token, "--encrypt", "--hc-vault-transit", uri, "secrets.yaml")
			if err != nil {
				t.Fatalf("sops --encrypt: %v\n%s", err, errOut)
			}
			if strings.Contains(enc, "hunter2") || !strings.Contains(enc, "vault:v1:") || !strings.Contains(enc, "hc_vault") {
				t.Fatalf("sops --encrypt wrote:\n%s", enc)
			}
			if err := os.WriteFile(filepath.Join(dir, "secrets.enc.yaml"), []byte(enc), 0o600); err != nil {
				t.Fatal(err)
			}
			dec, errOut, err := sopsRun(t, dir, both, "--decrypt", "secrets.enc.yaml")
			if err != nil || dec != plain {
				t.Fatalf("sops --decrypt = %v, wrote:\n%s\n%s", err, dec, errOut)
			}
			if _, errOut, err := sopsRun(t, dir, encOnly, "--decrypt", "secrets.enc.yaml"); err == nil {
				t.Fatal("sops --decrypt with an encrypt-only credential succeeded")
			} else if !strings.Contains(errOut, "403") && !strings.Contains(strings.ToLower(errOut), "permission") {
				t.Errorf("sops --decrypt with an encrypt-only credential failed saying:\n%s\nwant a refusal (403)", errOut)
			}
		})
	}
	l, err := harness.Client(t, p, in.Bootstrap).SearchActivity(context.Background(), kms.ActivityFilter{Action: "transit.decrypt"}, kms.PageRequest{})
	if err != nil {
		t.Fatal(err)
	}
	refused := 0
	for _, a := range l.Data {
		if !a.Valid {
			refused++
		}
	}
	if refused == 0 {
		t.Errorf("no refused transit.decrypt record among %d", len(l.Data))
	}
}
