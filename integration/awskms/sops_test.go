package awskms_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	awskms "github.com/aws/aws-sdk-go-v2/service/kms"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/integration/internal/harness"
	"github.com/ringkms/kms/internal/kmsdtest"
)

// sopsRun runs the real sops command line with args in dir, as an AWS
// client of p signing with k, and returns what it printed.
func sopsRun(t *testing.T, p *kmsdtest.Proc, dir string, k *kms.APIKey, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	return harness.RunSOPS(t, dir, append(awsEnv(t, dir, k), "AWS_ENDPOINT_URL_KMS="+p.URL), args...)
}

// TestSOPS: the real sops (built from its Go module at a pinned version)
// encrypts a YAML file with --kms and a key ARN of kmsd -aws-kms, under
// an encryption context, and decrypts it again, but not under another
// context; with an API key that may encrypt but not decrypt, sops
// encrypts but cannot decrypt.
func TestSOPS(t *testing.T) {
	harness.SOPS(t) // built before kmsd starts, so that its first build does not count against kmsd's timeouts
	in := harness.New(t)
	p := in.Start(t, "-aws-kms")
	admin := in.NewAPIKey(t, p, "*")
	made, err := sdkClient(p, admin.KeyID, admin.Key).CreateKey(context.Background(), &awskms.CreateKeyInput{})
	if err != nil {
		t.Fatalf("CreateKey = %v", err)
	}
	keyARN := *made.KeyMetadata.Arn
	both := in.NewAPIKey(t, p, "keyring.*.encrypt", "keyring.*.decrypt")
	encOnly := in.NewAPIKey(t, p, "keyring.*.encrypt")

	dir := t.TempDir()
	const plain = "database:\n    user: app\n    password: hunter2-very-secret\n"
	if err := os.WriteFile(filepath.Join(dir, "secrets.yaml"), []byte(plain), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, who := range []struct {
		name string
		key  *kms.APIKey
	}{{"an API key that may encrypt and decrypt", both}, {"an encrypt-only API key", encOnly}} {
		t.Run("encrypt with "+who.name, func(t *testing.T) {
			enc, errOut, err := sopsRun(t, p, dir, who.key, "--encrypt", "--kms", keyARN, "--encryption-context", "app:sops,stage:test", "secrets.yaml")
			if err != nil {
				t.Fatalf("sops --encrypt: %v\n%s", err, errOut)
			}
			if strings.Contains(enc, "hunter2") || !strings.Contains(enc, keyARN) || !strings.Contains(enc, "stage: test") {
				t.Fatalf("sops --encrypt wrote:\n%s", enc)
			}
			if err := os.WriteFile(filepath.Join(dir, "secrets.enc.yaml"), []byte(enc), 0o600); err != nil {
				t.Fatal(err)
			}
			dec, errOut, err := sopsRun(t, p, dir, both, "--decrypt", "secrets.enc.yaml")
			if err != nil || dec != plain {
				t.Fatalf("sops --decrypt = %v, wrote:\n%s\n%s", err, dec, errOut)
			}
			moved := strings.Replace(enc, "stage: test", "stage: prod", 1)
			if err := os.WriteFile(filepath.Join(dir, "moved.enc.yaml"), []byte(moved), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, errOut, err := sopsRun(t, p, dir, both, "--decrypt", "moved.enc.yaml"); err == nil || !strings.Contains(errOut, "InvalidCiphertextException") {
				t.Errorf("sops --decrypt of the file with another encryption context = %v, saying:\n%s\nwant InvalidCiphertextException", err, errOut)
			}
			if _, errOut, err := sopsRun(t, p, dir, encOnly, "--decrypt", "secrets.enc.yaml"); err == nil {
				t.Fatal("sops --decrypt with an encrypt-only API key succeeded")
			} else if !strings.Contains(errOut, "AccessDeniedException") {
				t.Errorf("sops --decrypt with an encrypt-only API key failed saying:\n%s\nwant AccessDeniedException", errOut)
			}
		})
	}
}
