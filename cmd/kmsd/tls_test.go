package main

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ringkms/kms/internal/testcert"
)

// writeCert writes a self-signed certificate for 127.0.0.1 and its key,
// and returns their paths and a pool that trusts the certificate.
func writeCert(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	c := testcert.SelfSigned(t)
	certFile, keyFile = c.WriteFiles(t)
	return certFile, keyFile, c.Pool()
}

func TestRunTLS(t *testing.T) {
	certFile, keyFile, pool := writeCert(t)
	s := startRun(t, []string{"-data", t.TempDir(), "-addr", "127.0.0.1:0", "-tls-cert", certFile},
		env{"KMS_MASTER_KEY": newKey(), "KMS_TLS_KEY": keyFile})
	if !strings.HasPrefix(s.url, "https://") {
		t.Fatalf("listening on %s, want https", s.url)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	if code, body := call(t, client, "GET", s.url+"/healthz", "", nil); code != 200 {
		t.Errorf("GET /healthz over TLS = %d %v", code, body)
	}
	// Plain HTTP to the TLS port gets no JSON answer.
	if resp, err := http.Get("http" + strings.TrimPrefix(s.url, "https") + "/healthz"); err == nil {
		if resp.StatusCode == 200 {
			t.Errorf("plain HTTP to the TLS port answered 200")
		}
		resp.Body.Close()
	}
}

func TestRunTLSErrors(t *testing.T) {
	certFile, _, _ := writeCert(t)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"cert only", []string{"-tls-cert", certFile}, "-tls-key"},
		{"key only", []string{"-tls-key", certFile}, "-tls-cert"},
		{"missing files", []string{"-tls-cert", certFile, "-tls-key", filepath.Join(t.TempDir(), "nope.pem")}, "TLS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"-data", t.TempDir(), "-addr", "127.0.0.1:0"}, tt.args...)
			err, _ := runErr(t, args, env{"KMS_MASTER_KEY": newKey()})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("run(%q) = %v, want an error about %s", tt.args, err, tt.want)
			}
		})
	}
}
