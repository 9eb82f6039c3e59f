package client_test

import (
	"context"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/client"
	"github.com/ringkms/kms/httpapi"
	"github.com/ringkms/kms/kmstest"
)

// tlsEnv is the real handler over HTTPS, with a certificate of its own CA
// (httptest's), that no system trusts.
type tlsEnv struct {
	srv     *httptest.Server
	rootKey string
	caPEM   []byte // the CA certificate, PEM
	caFile  string // caPEM in a file
}

func newTLSEnv(t testing.TB) *tlsEnv {
	t.Helper()
	k := kmstest.New(t, kmstest.MemoryStore(t), kms.Options{})
	srv, caPEM, caFile := kmstest.ServeTLS(t, httpapi.New(k.Service, httpapi.Options{}))
	return &tlsEnv{srv: srv, rootKey: k.RootKey, caPEM: caPEM, caFile: caFile}
}

// TestTLS calls a server whose certificate comes from a private CA:
// refused, with an error that says so, until the client is given the CA.
func TestTLS(t *testing.T) {
	e := newTLSEnv(t)
	ctx := context.Background()

	t.Run("untrusted", func(t *testing.T) {
		c := check(client.New(e.srv.URL, client.WithAPIKey(e.rootKey)))(t, "New")
		err := c.Healthz(ctx)
		got := wantKind(t, "Healthz(untrusted certificate)", err, kms.KindInternal)
		if !strings.Contains(got.Message, "GET /healthz failed: the service's certificate is not trusted") {
			t.Errorf("Healthz(untrusted certificate) message = %q, want it to say the certificate is not trusted", got.Message)
		}
		var unknown x509.UnknownAuthorityError
		if !errors.As(err, &unknown) {
			t.Errorf("errors.As(%v, x509.UnknownAuthorityError) = false, want the cause in the chain", err)
		}
		if errors.Is(err, kms.ErrUnavailable) {
			t.Errorf("Healthz(untrusted certificate) = %v: Unavailable says try again, which does not help", err)
		}
	})

	t.Run("wrong host", func(t *testing.T) {
		// httptest's certificate names 127.0.0.1 and example.com.
		base := strings.Replace(e.srv.URL, "127.0.0.1", "localhost", 1)
		c := check(client.New(base, client.WithCACert(e.caPEM)))(t, "New")
		got := wantKind(t, "Healthz(localhost)", c.Healthz(ctx), kms.KindInternal)
		if !strings.Contains(got.Message, "certificate is not valid for localhost") {
			t.Errorf("Healthz(localhost) message = %q, want it to name the host", got.Message)
		}
	})

	trusted := []struct {
		name string
		opts []client.Option
	}{
		{"WithCACert", []client.Option{client.WithCACert(e.caPEM)}},
		{"WithRootCAs", []client.Option{client.WithRootCAs(e.srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs)}},
		{"WithCACert before WithHTTPClient", []client.Option{client.WithCACert(e.caPEM), client.WithHTTPClient(&http.Client{Timeout: time.Minute})}},
		{"WithCACert after WithHTTPClient", []client.Option{client.WithHTTPClient(&http.Client{Transport: &http.Transport{}}), client.WithCACert(e.caPEM)}},
	}
	for _, tt := range trusted {
		t.Run(tt.name, func(t *testing.T) {
			c := check(client.New(e.srv.URL, append(tt.opts, client.WithAPIKey(e.rootKey))...))(t, "New")
			if err := c.Healthz(ctx); err != nil {
				t.Fatalf("Healthz() = %v", err)
			}
			if _, err := c.ListKeyRings(ctx, kms.PageRequest{}); err != nil {
				t.Fatalf("ListKeyRings() = %v", err)
			}
		})
	}

	t.Run("the caller's http.Client is left alone", func(t *testing.T) {
		hc := &http.Client{Transport: &http.Transport{}}
		check(client.New(e.srv.URL, client.WithHTTPClient(hc), client.WithCACert(e.caPEM)))(t, "New")
		if tr := hc.Transport.(*http.Transport); tr.TLSClientConfig != nil && tr.TLSClientConfig.RootCAs != nil {
			t.Errorf("WithCACert set the roots of the http.Client given")
		}
	})
}

func TestWithCACertErrors(t *testing.T) {
	e := newTLSEnv(t)
	tests := []struct {
		name string
		opts []client.Option
		want string
	}{
		{"not PEM", []client.Option{client.WithCACert([]byte("not a certificate"))}, "no PEM certificate"},
		{"a transport of another kind", []client.Option{client.WithHTTPClient(&http.Client{Transport: roundTripper(nil)}), client.WithCACert(e.caPEM)}, "not an *http.Transport"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := client.New(e.srv.URL, tt.opts...)
			got := wantKind(t, "New", err, kms.KindInvalid)
			if !strings.Contains(got.Message, tt.want) {
				t.Errorf("New() = %v, want an error about %q", err, tt.want)
			}
		})
	}
}

// roundTripper is an http.RoundTripper that is not an *http.Transport.
type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
