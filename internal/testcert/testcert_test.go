package testcert

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"testing"
	"time"
)

// TestCerts: a self-signed server certificate verifies for 127.0.0.1 and
// localhost against its own pool; one a CA signed, against the CA's pool
// and not another's; the files written load as a key pair.
func TestCerts(t *testing.T) {
	self := SelfSigned(t)
	ca := NewCA(t)
	srv := ca.Server(t)
	for _, tc := range []struct {
		name string
		c    *Cert
		pool *x509.CertPool
		ok   bool
	}{
		{"self-signed", self, self.Pool(), true},
		{"signed by the CA", srv, ca.Pool(), true},
		{"signed by another CA", srv, NewCA(t).Pool(), false},
	} {
		for _, host := range []string{"127.0.0.1", "localhost"} {
			_, err := tc.c.Cert.Verify(x509.VerifyOptions{Roots: tc.pool, DNSName: host})
			if (err == nil) != tc.ok {
				t.Errorf("%s for %s: Verify = %v, want ok %v", tc.name, host, err, tc.ok)
			}
		}
	}
	certFile, keyFile := srv.WriteFiles(t)
	if _, err := tls.LoadX509KeyPair(certFile, keyFile); err != nil {
		t.Fatalf("the files written: %v", err)
	}
	if fi, err := os.Stat(keyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, %v", fi, err)
	}
	if c := self.TLS(); c.PrivateKey == nil || len(c.Certificate) != 1 {
		t.Fatalf("TLS() = %+v", c)
	}
}

// TestNew: a certificate of New is valid for as long as asked and
// verifies for ::1 as well, against its own pool.
func TestNew(t *testing.T) {
	c, err := New(24 * time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if left := time.Until(c.Cert.NotAfter); left < 23*time.Hour || left > 24*time.Hour {
		t.Errorf("New(24h) is valid for %v more, want 24h", left)
	}
	for _, host := range []string{"127.0.0.1", "::1", "localhost"} {
		if _, err := c.Cert.Verify(x509.VerifyOptions{Roots: c.Pool(), DNSName: host}); err != nil {
			t.Errorf("Verify for %s = %v", host, err)
		}
	}
}
