package transit_test

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	wrapping "github.com/hashicorp/go-kms-wrapping/v2"
	transitwrapper "github.com/hashicorp/go-kms-wrapping/wrappers/transit/v2"

	"github.com/ringkms/kms/integration/internal/harness"
	"github.com/ringkms/kms/internal/kmsdtest"
)

// TestWrappingTransit: go-kms-wrapping's transit wrapper, the
// auto-unseal client of Vault, OpenBao and Boundary, configures against
// kmsd -transit (renewing its token at start, which kmsd answers),
// encrypts and decrypts, keeps opening what it sealed after the key
// rotates, and cannot open anything with an encrypt-only credential.
func TestWrappingTransit(t *testing.T) {
	in := harness.New(t)
	p := in.Start(t, "-transit")
	ctx := context.Background()
	newWrapper := func(t *testing.T, token string, logs *kmsdtest.Buffer) *transitwrapper.Wrapper {
		t.Helper()
		w := transitwrapper.NewWrapper()
		logger := hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Trace})
		if _, err := w.SetConfig(ctx, wrapping.WithDisallowEnvVars(true), transitwrapper.WithAddress(p.URL),
			transitwrapper.WithToken(token), transitwrapper.WithMountPath("transit/"), transitwrapper.WithKeyName("unseal"),
			transitwrapper.WithLogger(logger)); err != nil {
			t.Fatalf("SetConfig = %v\n%s", err, logs)
		}
		t.Cleanup(func() { w.Finalize(ctx) })
		return w
	}
	logs := &kmsdtest.Buffer{}
	both := in.APIKey(t, p, "keyring.unseal.create", "keyring.unseal.encrypt", "keyring.unseal.decrypt")
	w := newWrapper(t, both, logs)
	if strings.Contains(logs.String(), "unable to renew token") {
		t.Errorf("the wrapper could not renew its token at start:\n%s", logs)
	}
	if id, err := w.KeyId(ctx); err != nil || id == "" {
		t.Errorf("KeyId = %q, %v", id, err)
	}
	blob, err := w.Encrypt(ctx, []byte("the root key of a Vault"))
	if err != nil {
		t.Fatalf("Encrypt = %v", err)
	}
	if got, err := w.Decrypt(ctx, blob); err != nil || string(got) != "the root key of a Vault" {
		t.Fatalf("Decrypt = %q, %v", got, err)
	}
	if _, err := vaultClient(t, p, in.Bootstrap).Logical().Write("transit/keys/unseal/rotate", nil); err != nil {
		t.Fatal(err)
	}
	blob2, err := w.Encrypt(ctx, []byte("after rotation"))
	if err != nil || !strings.HasPrefix(string(blob2.Ciphertext), "vault:v2:") {
		t.Fatalf("Encrypt after rotation = %+v, %v", blob2, err)
	}
	if got, err := w.Decrypt(ctx, blob); err != nil || string(got) != "the root key of a Vault" {
		t.Errorf("Decrypt of version 1's blob after rotation = %q, %v", got, err)
	}

	sealer := newWrapper(t, in.APIKey(t, p, "keyring.unseal.encrypt"), &kmsdtest.Buffer{})
	sealed, err := sealer.Encrypt(ctx, []byte("x"))
	if err != nil {
		t.Fatalf("Encrypt with an encrypt-only credential = %v", err)
	}
	if _, err := sealer.Decrypt(ctx, sealed); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("Decrypt with an encrypt-only credential = %v, want a 403", err)
	}
	if _, err := w.Decrypt(ctx, sealed); err != nil {
		t.Errorf("Decrypt of its blob with a credential that may = %v", err)
	}
}
