// Package testcert makes the TLS certificates of tests: a server
// certificate for 127.0.0.1 and localhost, signed by itself or by a
// certificate authority of the test's own, with what each kind of test
// wants of it (files, a tls.Certificate, a pool that trusts it). New and
// WriteFilesIn serve a program that makes a throwaway certificate for a
// run outside a test (kmsbench's -tls).
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

// SelfSigned returns a server certificate for 127.0.0.1, ::1 and
// localhost, signed by its own key, valid for an hour either side of now.
func SelfSigned(t testing.TB) *Cert { return must(t)(issue(nil, serverTemplate(), time.Hour)) }

// New returns a server certificate as SelfSigned does, valid from an hour
// before now until validFor after it.
func New(validFor time.Duration) (*Cert, error) { return issue(nil, serverTemplate(), validFor) }

// NewCA returns the certificate of a new certificate authority, signed by
// its own key.
func NewCA(t testing.TB) *Cert {
	return must(t)(issue(nil, &x509.Certificate{Subject: pkix.Name{CommonName: "test CA"},
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}, time.Hour))
}

// Server returns a server certificate for 127.0.0.1, ::1 and localhost
// that ca signs.
func (ca *Cert) Server(t testing.TB) *Cert { return must(t)(issue(ca, serverTemplate(), time.Hour)) }

func serverTemplate() *x509.Certificate {
	return &x509.Certificate{Subject: pkix.Name{CommonName: "test server"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
}

// must returns the certificate of issue, failing t on its error.
func must(t testing.TB) func(*Cert, error) *Cert {
	return func(c *Cert, err error) *Cert {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
}

// issue signs tmpl, with a new key, by parent (nil: by the new key),
// valid from an hour before now until validFor after it.
func issue(parent *Cert, tmpl *x509.Certificate, validFor time.Duration) (*Cert, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber, err = rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.Add(validFor)
	signer, signerCert := key, tmpl
	if parent != nil {
		signer, signerCert = parent.Key, parent.Cert
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signerCert, &key.PublicKey, signer)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &Cert{Cert: cert, DER: der, Key: key}, nil
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
	certFile, keyFile, err := c.WriteFilesIn(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// WriteFilesIn writes the certificate and its key as WriteFiles does, to
// cert.pem and key.pem in dir.
func (c *Cert) WriteFilesIn(dir string) (certFile, keyFile string, err error) {
	der, err := x509.MarshalPKCS8PrivateKey(c.Key)
	if err != nil {
		return "", "", err
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	for file, data := range map[string][]byte{certFile: c.PEM(), keyFile: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})} {
		if err := os.WriteFile(file, data, 0o600); err != nil {
			return "", "", err
		}
	}
	return certFile, keyFile, nil
}
