package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// With -tls, kmsd and the baseline serve HTTPS with one certificate that
// kmsbench makes for the run: self-signed, ECDSA P-256 (the cheapest
// handshake and signature Go serves), for 127.0.0.1, valid for a day. The
// client trusts that certificate alone. Both servers and the client are
// Go's crypto/tls with its defaults (TLS 1.3, AES-GCM or ChaCha20 by the
// CPU), over HTTP/1.1 keep-alive connections, as without -tls: the
// targets differ in what they serve, not in how it is carried.

// tlsFiles is the certificate of a run, written to a temporary directory
// for kmsd's -tls-cert and -tls-key.
type tlsFiles struct {
	dir, cert, key string
	pool           *x509.CertPool // the client's roots: the certificate
}

// newTLSFiles makes the certificate and writes it, with its key (mode
// 0600), to a new temporary directory that remove deletes.
func newTLSFiles() (*tlsFiles, error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "kmsbench"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "kmsbench-tls-")
	if err != nil {
		return nil, err
	}
	f := &tlsFiles{dir: dir, cert: filepath.Join(dir, "cert.pem"), key: filepath.Join(dir, "key.pem"), pool: x509.NewCertPool()}
	f.pool.AddCert(cert)
	err = os.WriteFile(f.cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	if err == nil {
		err = os.WriteFile(f.key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600)
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return f, nil
}

func (f *tlsFiles) remove() { os.RemoveAll(f.dir) }

// baselineTLSEnv carries the certificate and key files of -tls to the
// baseline server, as "CERT:KEY".
const baselineTLSEnv = "KMSBENCH_BASELINE_TLS"
