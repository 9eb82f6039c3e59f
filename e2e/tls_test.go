package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/client"
	"github.com/ringkms/kms/internal/kmsdtest"
	"github.com/ringkms/kms/internal/testcert"
)

// privateCA is a CA of the test's own and a server certificate for
// 127.0.0.1 that it signed, in files.
type privateCA struct {
	caFile, certFile, keyFile string
	caPEM                     []byte
}

func newPrivateCA(t *testing.T) *privateCA {
	t.Helper()
	ca := testcert.NewCA(t)
	p := &privateCA{caFile: filepath.Join(t.TempDir(), "ca.pem"), caPEM: ca.PEM()}
	p.certFile, p.keyFile = ca.Server(t).WriteFiles(t)
	if err := os.WriteFile(p.caFile, p.caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestKmsctlTLS runs kmsd over TLS with a certificate of a private CA,
// started in an environment set up for the clients (KMS_ADDR holds a
// URL), and kmsctl and the Go client against it: refused with a message
// that says the certificate is not trusted and how to trust it, until
// given the CA's certificate (KMS_CACERT, -ca-cert, WithCACert).
func TestKmsctlTLS(t *testing.T) {
	in := newInstance(t)
	ca := newPrivateCA(t)
	// kmsd in a shell set up for kmsctl: KMS_ADDR is the clients' URL.
	env := append(in.env(), "KMS_ADDR=https://127.0.0.1:8200")
	p := kmsdtest.Launch(t, kmsdPath, env, "-data", in.data, "-mail-outbox", in.outbox, "-log-level", "warn",
		"-tls-cert", ca.certFile, "-tls-key", ca.keyFile, "-addr", "127.0.0.1:0")
	p.Listen(t, startTimeout)
	if !strings.HasPrefix(p.URL, "https://127.0.0.1:") {
		t.Fatalf("kmsd listens on %s, want https://127.0.0.1:PORT", p.URL)
	}
	kenv := kmsdtest.Env("KMS_ADDR="+p.URL, "KMS_API_KEY="+in.bootstrap, "KMSCTL_CONFIG_DIR="+t.TempDir())

	r := kmsctl(t, kenv, nil, 1, "status")
	if strings.Contains(r.stdout, "unhealthy") || !strings.Contains(r.stdout, "TLS certificate is not trusted") {
		t.Errorf("status without the CA printed:\n%s", r.stdout)
	}
	if !strings.Contains(r.stderr, "certificate is not trusted") || !strings.Contains(r.stderr, "-ca-cert FILE or KMS_CACERT=FILE") {
		t.Errorf("status without the CA: stderr %q", r.stderr)
	}

	withCA := append(kenv, "KMS_CACERT="+ca.caFile)
	kmsctl(t, withCA, nil, 0, "status")
	kmsctl(t, withCA, nil, 0, "ring", "create", "payments")
	if r := kmsctl(t, kenv, nil, 0, "-ca-cert", ca.caFile, "ring", "list"); !strings.Contains(r.stdout, "payments") {
		t.Errorf("ring list -ca-cert printed:\n%s", r.stdout)
	}

	c, err := client.New(p.URL, client.WithAPIKey(in.bootstrap))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Healthz(bg); kms.ErrorKind(err) != kms.KindInternal || !strings.Contains(err.Error(), "not trusted") {
		t.Errorf("Healthz without the CA = %v, want the certificate not trusted", err)
	}
	if c, err = client.New(p.URL, client.WithAPIKey(in.bootstrap), client.WithCACert(ca.caPEM)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetKeyRing(bg, kms.RingRef{Name: "payments"}); err != nil {
		t.Errorf("GetKeyRing with the CA = %v", err)
	}
}
