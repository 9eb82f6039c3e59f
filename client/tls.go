package client

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"

	"github.com/ringkms/kms"
)

// WithCACert makes the client trust the servers whose certificates the CA
// certificates in pemCerts (one or more, PEM) signed, in place of the
// system's roots: for a kmsd whose certificate comes from a private CA.
// It applies to the client's http.Client, the default one or the one of
// WithHTTPClient, whose Transport must then be nil or an *http.Transport
// (the client works on a copy of both). The last of WithCACert and
// WithRootCAs wins. New fails when pemCerts holds no certificate.
func WithCACert(pemCerts []byte) Option {
	return func(c *Client) {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pemCerts) {
			c.err = kms.Errorf(kms.KindInvalid, "WithCACert: no PEM certificate in the %d bytes given", len(pemCerts))
			return
		}
		c.roots = pool
	}
}

// WithRootCAs is WithCACert with the CA certificates as a pool.
func WithRootCAs(pool *x509.CertPool) Option { return func(c *Client) { c.roots = pool } }

// withRoots returns a copy of hc whose transport trusts roots alone.
func withRoots(hc *http.Client, roots *x509.CertPool) (*http.Client, error) {
	var tr *http.Transport
	switch t := hc.Transport.(type) {
	case nil:
		def, ok := http.DefaultTransport.(*http.Transport)
		if !ok {
			return nil, kms.Errorf(kms.KindInvalid, "WithCACert: http.DefaultTransport is a %T, not an *http.Transport: give WithHTTPClient a client whose transport trusts the CA", http.DefaultTransport)
		}
		tr = def.Clone()
	case *http.Transport:
		tr = t.Clone()
	default:
		return nil, kms.Errorf(kms.KindInvalid, "WithCACert: the transport of WithHTTPClient is a %T, not an *http.Transport: set the CA in its own TLS configuration instead", t)
	}
	if tr.TLSClientConfig == nil {
		tr.TLSClientConfig = &tls.Config{}
	}
	tr.TLSClientConfig.RootCAs = roots
	cp := *hc
	cp.Transport = tr
	return &cp, nil
}

// tlsProblem says what is wrong with the service's certificate when err,
// the failure of a request, is that the client refused it; "" when err is
// something else.
func tlsProblem(err error) string {
	var (
		unknown x509.UnknownAuthorityError
		host    x509.HostnameError
		verify  *tls.CertificateVerificationError
	)
	switch {
	case errors.As(err, &unknown):
		return "the service's certificate is not trusted"
	case errors.As(err, &host):
		return fmt.Sprintf("the service's certificate is not valid for %s", host.Host)
	case errors.As(err, &verify):
		return "the service's certificate was refused"
	}
	return ""
}
