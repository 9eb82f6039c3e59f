package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeCert writes a self-signed certificate for 127.0.0.1 and its key,
// and returns their paths and a pool that trusts the certificate.
func writeCert(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "kmsd test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600)
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
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
