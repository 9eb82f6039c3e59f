package transit_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/transit"
)

// readRecorder is a request body that records whether it was read.
type readRecorder struct {
	io.Reader
	read bool
}

func (b *readRecorder) Read(p []byte) (int, error) {
	b.read = true
	return b.Reader.Read(p)
}

func (b *readRecorder) Close() error { return nil }

// TestRateLimitBeforeBody: a credential whose bucket is empty is refused
// 429, in Vault's shape, before its body is read, on every route (those
// that make a call per item of their body included): reading and parsing
// up to 4 MiB of JSON costs a call.
func TestRateLimitBeforeBody(t *testing.T) {
	e := newEnv(t, kms.Options{RateLimits: kms.RateLimits{PerAPIKey: kms.Rate{PerSecond: 1, Burst: 1}}})
	ct := e.root.mustWrite(t, "transit/encrypt/rl", map[string]any{"plaintext": b64("x")}).str("ciphertext")
	h := transit.New(e.Service, transit.Options{})
	for _, path := range []string{"encrypt/rl", "decrypt/rl", "rewrap/rl", "datakey/plaintext/rl", "keys/rl", "keys/rl/config"} {
		// The clock stands still: the bucket of one call, spent by the
		// encrypt above, stays empty.
		body := &readRecorder{Reader: strings.NewReader(`{"plaintext": "not json`)}
		r := httptest.NewRequest(http.MethodPost, "/v1/transit/"+path, nil)
		r.Body, r.ContentLength = body, -1
		r.Header.Set("X-Vault-Token", e.RootKey)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		var got struct{ Errors []string }
		json.Unmarshal(w.Body.Bytes(), &got)
		if w.Code != http.StatusTooManyRequests || len(got.Errors) != 1 || !strings.Contains(got.Errors[0], "rate limit") || w.Header().Get("Retry-After") == "" {
			t.Errorf("POST %s with an empty bucket = %d %v %q, want 429 in Vault's shape", path, w.Code, w.Header(), w.Body)
		}
		if body.read {
			t.Errorf("POST %s with an empty bucket read the body", path)
		}
	}
	// Over the wire, with a well-formed item: refused as well, and nothing
	// decrypted.
	before := records(t, e, "transit.decrypt")
	if a := e.root.do(t, http.MethodPost, "transit/decrypt/rl", map[string]any{"ciphertext": ct}); a.status != http.StatusTooManyRequests ||
		records(t, e, "transit.decrypt") != before {
		t.Errorf("decrypt with an empty bucket = %v, %d records", a, records(t, e, "transit.decrypt")-before)
	}
}

// TestRateLimitBatchCalls: a batch of n items costs n calls of each
// bucket, the one taken before its body was read among them: a batch of
// the burst is admitted on a full bucket and leaves it empty, on the
// credential's limit and on the client address's.
func TestRateLimitBatchCalls(t *testing.T) {
	for name, limits := range map[string]kms.RateLimits{
		"credential": {PerAPIKey: kms.Rate{PerSecond: 1, Burst: 3}},
		"address":    {PerAddr: kms.Rate{PerSecond: 1, Burst: 4}}, // and one for the credential's key creation
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, kms.Options{RateLimits: limits})
			c := e.root
			if name == "address" {
				c.mustWrite(t, "transit/keys/rl", nil)
			}
			batch := []any{}
			for range 3 {
				batch = append(batch, map[string]any{"plaintext": b64("x")})
			}
			if a := c.write(t, "transit/encrypt/rl", map[string]any{"batch_input": batch}); a.status != 200 {
				t.Fatalf("batch of the burst on a full bucket = %v", a)
			}
			if a := c.write(t, "transit/encrypt/rl", map[string]any{"plaintext": b64("x")}); a.status != 429 {
				t.Errorf("a call after a batch of the burst = %v, want 429", a)
			}
			if n := records(t, e, "transit.encrypt"); n != 3 {
				t.Errorf("%d transit.encrypt records, want the batch's 3", n)
			}
		})
	}
}

// TestRateLimits: each item of a batch is a call of the credential's
// limit; a batch past the burst is 400, a call past the rate 429.
func TestRateLimits(t *testing.T) {
	e := newEnv(t, kms.Options{RateLimits: kms.RateLimits{PerAPIKey: kms.Rate{PerSecond: 1, Burst: 3}}})
	c := e.root
	c.mustWrite(t, "transit/keys/rl", nil)
	many := []any{}
	for range 4 {
		many = append(many, map[string]any{"plaintext": b64("x")})
	}
	if a := c.write(t, "transit/encrypt/rl", map[string]any{"batch_input": many}); a.status != 400 || !strings.Contains(a.errs(), "burst") {
		t.Errorf("batch past the burst = %v", a)
	}
	var a *answer
	for range 5 {
		if a = c.write(t, "transit/encrypt/rl", map[string]any{"plaintext": b64("x")}); a.status != 200 {
			break
		}
	}
	if a.status != 429 {
		t.Errorf("calls past the rate = %v, want 429", a)
	}
}
