package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/client"
)

// The http.Client of kmsctl's calls: a time limit on each, and over
// https:// the CA certificates of -ca-cert (or KMS_CACERT) as the only
// roots when one is given, else the system's. A certificate that no
// trusted CA signed fails the call with an error that says how to trust
// it.

// caSource is the file of CA certificates to trust and what named it
// (-ca-cert or KMS_CACERT); "" when none was given.
func (c *cli) caSource() (file, what string) {
	if c.caCert != "" {
		return c.caCert, "-ca-cert"
	}
	if f := c.getenv(client.EnvCACert); f != "" {
		return f, client.EnvCACert
	}
	return "", ""
}

// httpClient returns the http.Client of every call, made once.
func (c *cli) httpClient() (*http.Client, error) {
	if c.hc != nil {
		return c.hc, nil
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	hint := "if a private CA signed it, give kmsctl that CA's certificate: -ca-cert FILE or " + client.EnvCACert + "=FILE"
	if file, what := c.caSource(); file != "" {
		pem, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: %s holds no PEM certificate", what, file)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool}
		hint = fmt.Sprintf("no CA certificate of %s (%s) signed it", file, what)
	}
	c.hc = &http.Client{Timeout: requestTimeout, Transport: trustHint{rt: tr, hint: hint}}
	return c.hc, nil
}

// trustHint adds hint to the error of a call whose server presented a
// certificate that no trusted CA signed.
type trustHint struct {
	rt   http.RoundTripper
	hint string
}

func (h trustHint) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := h.rt.RoundTrip(r)
	if err != nil && untrusted(err) {
		return nil, &hintError{err: err, hint: h.hint}
	}
	return resp, err
}

// hintError is an error with advice on how to resolve it.
type hintError struct {
	err  error
	hint string
}

func (e *hintError) Error() string { return e.err.Error() + "; " + e.hint }
func (e *hintError) Unwrap() error { return e.err }

// untrusted reports whether err is a server certificate that no trusted
// CA signed.
func untrusted(err error) bool {
	var unknown x509.UnknownAuthorityError
	return errors.As(err, &unknown)
}

// certificateRefused reports whether err is kmsctl's refusal of the
// service's TLS certificate: not trusted, not valid for the host, or
// refused otherwise.
func certificateRefused(err error) bool {
	var refused *tls.CertificateVerificationError
	var host x509.HostnameError
	return untrusted(err) || errors.As(err, &refused) || errors.As(err, &host)
}

// unreachable reports whether err is a call that got no answer: the
// client's Unavailable error with a cause (a refused, lost or timed-out
// connection), as against the service's answer that it cannot serve.
func unreachable(err error) bool {
	e := kms.AsError(err)
	return e != nil && e.Kind == kms.KindUnavailable && e.Err != nil
}

// health is what kmsctl status says of the service, given the error of
// GET /healthz: "unhealthy" only when the service answered so.
func health(err error) string {
	switch {
	case err == nil:
		return "ok"
	case untrusted(err):
		return "not checked: the service's TLS certificate is not trusted"
	case certificateRefused(err):
		return "not checked: the service's TLS certificate was refused"
	case unreachable(err):
		return "not checked: the service cannot be reached"
	}
	return "unhealthy"
}
