package main

import (
	"crypto/x509"
	"os"
	"time"

	"github.com/ringkms/kms/internal/testcert"
)

// With -tls, kmsd and the baseline serve HTTPS with one certificate that
// kmsbench makes for the run (internal/testcert's): self-signed, ECDSA
// P-256 (the cheapest handshake and signature Go serves), for 127.0.0.1,
// valid for a day. The client trusts that certificate alone. Both servers
// and the client are Go's crypto/tls with its defaults (TLS 1.3, AES-GCM
// or ChaCha20 by the CPU), over HTTP/1.1 keep-alive connections, as
// without -tls: the targets differ in what they serve, not in how it is
// carried.

// tlsFiles is the certificate of a run, written to a temporary directory
// for kmsd's -tls-cert and -tls-key.
type tlsFiles struct {
	dir, cert, key string
	pool           *x509.CertPool // the client's roots: the certificate
}

// newTLSFiles makes the certificate and writes it, with its key (mode
// 0600), to a new temporary directory that remove deletes.
func newTLSFiles() (*tlsFiles, error) {
	c, err := testcert.New(24 * time.Hour)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "kmsbench-tls-")
	if err != nil {
		return nil, err
	}
	cert, key, err := c.WriteFilesIn(dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &tlsFiles{dir: dir, cert: cert, key: key, pool: c.Pool()}, nil
}

func (f *tlsFiles) remove() { os.RemoveAll(f.dir) }

// baselineTLSEnv carries the certificate and key files of -tls to the
// baseline server, as "CERT:KEY".
const baselineTLSEnv = "KMSBENCH_BASELINE_TLS"
