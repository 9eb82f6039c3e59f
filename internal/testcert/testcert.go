// Package testcert makes the TLS certificates of tests: a server
// certificate for 127.0.0.1 and localhost, signed by itself or by a
// certificate authority of the test's own, with what each kind of test
// wants of it (files, a tls.Certificate, a pool that trusts it).
package testcert

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
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Cert is a certificate and its private key.
type Cert struct {
	Cert *x509.Certificate
	DER  []byte
	Key  *ecdsa.PrivateKey
}

// SelfSigned returns a server certificate for 127.0.0.1 and localhost,
// signed by its own key, valid for an hour either side of now.
func SelfSigned(t testing.TB) *Cert { return issue(t, nil, serverTemplate()) }

// NewCA returns the certificate of a new certificate authority, signed by
// its own key.
func NewCA(t testing.TB) *Cert {
	return issue(t, nil, &x509.Certificate{Subject: pkix.Name{CommonName: "test CA"},
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true})
}

// Server returns a server certificate for 127.0.0.1 and localhost that
// ca signs.
func (ca *Cert) Server(t testing.TB) *Cert { return issue(t, ca, serverTemplate()) }

func serverTemplate() *x509.Certificate {
	return &x509.Certificate{Subject: pkix.Name{CommonName: "test server"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
}

// issue signs tmpl, with a new key, by parent (nil: by the new key).
func issue(t testing.TB, parent *Cert, tmpl *x509.Certificate) *Cert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber, err = rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.Add(time.Hour)
	signer, signerCert := key, tmpl
	if parent != nil {
		signer, signerCert = parent.Key, parent.Cert
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signerCert, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &Cert{Cert: cert, DER: der, Key: key}
}

// PEM returns the certificate in PEM.
func (c *Cert) PEM() []byte { return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.DER}) }

// Pool returns a pool that trusts c alone.
func (c *Cert) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c.Cert)
	return p
}

// TLS returns c as a tls.Certificate, for a server of the test.
func (c *Cert) TLS() tls.Certificate {
	return tls.Certificate{Certificate: [][]byte{c.DER}, PrivateKey: c.Key}
}

// WriteFiles writes the certificate and its key (PKCS #8), in PEM, mode
// 0600, to a new temporary directory, and returns their paths.
func (c *Cert) WriteFiles(t testing.TB) (certFile, keyFile string) {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(c.Key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	for file, data := range map[string][]byte{certFile: c.PEM(), keyFile: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})} {
		if err := os.WriteFile(file, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return certFile, keyFile
}
