package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/httpapi"
	"github.com/ringkms/kms/internal/testcert"
	"github.com/ringkms/kms/kmstest"
)

// newTLSServer serves the real handler over HTTPS with httptest's
// certificate, which no system trusts, and returns the environment of
// kmsctl against it and a file that holds the certificate of its CA.
func newTLSServer(t testing.TB) (env, string) {
	t.Helper()
	k := kmstest.New(t, kmstest.MemoryStore(t), kms.Options{})
	srv, _, caFile := kmstest.ServeTLS(t, httpapi.New(k.Service, httpapi.Options{}))
	return env{"KMS_ADDR": srv.URL, "KMS_API_KEY": k.RootKey, "KMSCTL_CONFIG_DIR": t.TempDir()}, caFile
}

// TestTLS runs kmsctl against a kmsd whose certificate a private CA
// signed: without the CA's certificate, it says the certificate is not
// trusted and how to trust it; with it (-ca-cert or KMS_CACERT), it works.
func TestTLS(t *testing.T) {
	e, caFile := newTLSServer(t)

	t.Run("untrusted", func(t *testing.T) {
		r := kmsctl(t, e, "", "status").want(t, 1, "status without the CA")
		if strings.Contains(r.stdout, "unhealthy") || !strings.Contains(r.stdout, "TLS certificate is not trusted") {
			t.Errorf("status without the CA printed:\n%s", r.stdout)
		}
		for _, args := range [][]string{{"status"}, {"ring", "list"}} {
			r := kmsctl(t, e, "", args...).want(t, 1, strings.Join(args, " ")+" without the CA")
			for _, want := range []string{"certificate is not trusted", "-ca-cert FILE", "KMS_CACERT=FILE"} {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("%v without the CA: stderr %q, want %q in it", args, r.stderr, want)
				}
			}
		}
		var st status
		if err := json.Unmarshal([]byte(kmsctl(t, e, "", "status", "-json").want(t, 1, "status -json").stdout), &st); err != nil {
			t.Fatal(err)
		}
		if st.Healthy || !strings.Contains(st.Message, "not trusted") {
			t.Errorf("status -json = %+v, want unhealthy, the certificate not trusted", st)
		}
	})

	t.Run("-ca-cert", func(t *testing.T) {
		r := kmsctl(t, e, "", "status", "-ca-cert", caFile).want(t, 0, "status -ca-cert")
		if !strings.Contains(r.stdout, "ok") {
			t.Errorf("status -ca-cert printed:\n%s", r.stdout)
		}
		kmsctl(t, e, "", "-ca-cert", caFile, "ring", "create", "payments").want(t, 0, "ring create -ca-cert")
	})

	t.Run("KMS_CACERT", func(t *testing.T) {
		r := kmsctl(t, e.with("KMS_CACERT", caFile), "", "ring", "list").want(t, 0, "ring list with KMS_CACERT")
		if !strings.Contains(r.stdout, "payments") {
			t.Errorf("ring list printed:\n%s", r.stdout)
		}
	})

	t.Run("another CA", func(t *testing.T) {
		otherCA := filepath.Join(t.TempDir(), "other.pem")
		if err := os.WriteFile(otherCA, testcert.NewCA(t).PEM(), 0o644); err != nil {
			t.Fatal(err)
		}
		r := kmsctl(t, e.with("KMS_CACERT", otherCA), "", "status").want(t, 1, "status with another CA")
		if !strings.Contains(r.stderr, "no CA certificate of "+otherCA+" (KMS_CACERT) signed it") {
			t.Errorf("status with another CA: stderr %q", r.stderr)
		}
	})

	t.Run("unusable CA file", func(t *testing.T) {
		notPEM := filepath.Join(t.TempDir(), "not.pem")
		os.WriteFile(notPEM, []byte("not a certificate"), 0o600)
		r := kmsctl(t, e, "", "ring", "list", "-ca-cert", filepath.Join(t.TempDir(), "nope")).want(t, 1, "a missing -ca-cert")
		if !strings.Contains(r.stderr, "-ca-cert") {
			t.Errorf("a missing -ca-cert: stderr %q", r.stderr)
		}
		r = kmsctl(t, e.with("KMS_CACERT", notPEM), "", "ring", "list").want(t, 1, "KMS_CACERT not PEM")
		if !strings.Contains(r.stderr, "KMS_CACERT: "+notPEM+" holds no PEM certificate") {
			t.Errorf("KMS_CACERT not PEM: stderr %q", r.stderr)
		}
	})
}
