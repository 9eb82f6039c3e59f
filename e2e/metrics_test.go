package e2e

import (
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/promtest"
)

// TestMetrics: kmsd serves its Prometheus metrics on the main listener
// and on one of their own, behind their bearer token, and they count the
// calls made.
func TestMetrics(t *testing.T) {
	in := newInstance(t)
	v := newValidator(t)
	const token = "metrics-token-of-the-e2e-test"
	// A free port for the metrics' own listener.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := ln.Addr().String()
	ln.Close()
	p, c := in.with("KMS_METRICS_TOKEN="+token).serve(t, v, "-metrics", "-metrics-addr", metricsAddr)
	must[*kms.CreateKeyRingResult](t, "CreateKeyRing")(c.CreateKeyRing(bg, kms.CreateKeyRingInput{Name: "metered"}))
	for range 5 {
		must[*kms.EncryptResult](t, "Encrypt")(c.Encrypt(bg, kms.EncryptInput{RingName: "metered"}))
	}

	get := func(url, bearer string) (*http.Response, promtest.Families) {
		t.Helper()
		req, _ := http.NewRequest("GET", url, nil)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return resp, nil
		}
		f, err := promtest.Parse(resp.Body)
		if err != nil {
			t.Fatalf("parse %s: %v", url, err)
		}
		return resp, f
	}
	// A refused credential counts as a denial; the scrapes refused below
	// are no calls of the API, and do not.
	if resp, _ := get(p.URL+"/ks/keyrings", "rk_not_a_key_at_all_0000000000000000"); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET /ks/keyrings with an unknown key = %d, want 401", resp.StatusCode)
	}
	for _, url := range []string{p.URL + "/metrics", "http://" + metricsAddr + "/metrics"} {
		if resp, _ := get(url, ""); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("GET %s without the token = %d, want 401", url, resp.StatusCode)
		}
		if resp, _ := get(url, "wrong-token-wrong-token"); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("GET %s with a wrong token = %d, want 401", url, resp.StatusCode)
		}
		_, f := get(url, token)
		if f == nil {
			t.Fatalf("GET %s with the token failed", url)
		}
		if got := f.Value("kms_key_operations_total", "operation=encrypt", "ring=metered"); got != 5 {
			t.Fatalf("%s: kms_key_operations_total{encrypt, metered} = %v, want 5", url, got)
		}
		if got := f.Value("kms_http_requests_total", "route=/ks/encrypt", "code=200"); got != 5 {
			t.Fatalf("%s: kms_http_requests_total{/ks/encrypt, 200} = %v, want 5", url, got)
		}
		if got := f.Value("kms_denied_total", "action=authenticate", "reason=unauthenticated"); got != 1 {
			t.Fatalf("%s: kms_denied_total{authenticate, unauthenticated} = %v, want 1", url, got)
		}
	}
	p.Stop(t)
	// The token never reaches kmsd's output.
	if strings.Contains(p.Stdout.String()+p.Stderr.String(), token) {
		t.Fatal("kmsd's output holds the metrics token")
	}
}
