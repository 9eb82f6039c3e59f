package sigv4

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

const (
	testKeyID  = "ak_0123456789abcdef"
	testSecret = "the-secret-of-ak_0123456789abcdef"
)

// verifier is a server that answers what Parse read of each request, or
// its refusal's kind and message, as JSON.
func verifier(t testing.TB, service string, now time.Time) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		q, err := Parse(r, service, now)
		if err == nil {
			err = q.Verify(body, []byte(testSecret))
		}
		var e *Error
		if errors.As(err, &e) {
			w.WriteHeader(http.StatusBadRequest)
			json.NewEncoder(w).Encode(e)
			return
		}
		json.NewEncoder(w).Encode(q)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestRoundTrip signs requests with Sign and sends them to a real server,
// which must verify each and read back what was signed.
func TestRoundTrip(t *testing.T) {
	now := time.Date(2024, 3, 10, 12, 0, 0, 0, time.UTC)
	srv := verifier(t, "kms", now)
	jsonBody := []byte(`{"KeyId":"alias/app","Plaintext":"aGVsbG8="}`)
	for _, c := range []struct {
		name, method, path string
		body               []byte
		region             string
		headers            [][2]string
		wantSigned         string
		wantToken          string
	}{
		{name: "POST / as AWS KMS's JSON protocol", method: "POST", path: "/", body: jsonBody, region: "us-east-1",
			headers:    [][2]string{{"Content-Type", "application/x-amz-json-1.1"}, {"X-Amz-Target", "TrentService.Encrypt"}},
			wantSigned: "content-length;content-type;host;x-amz-date;x-amz-target"},
		{name: "session token", method: "POST", path: "/", body: jsonBody, region: "eu-west-3",
			headers: [][2]string{{"Content-Type", "application/x-amz-json-1.1"}, {"X-Amz-Target", "TrentService.Decrypt"},
				{"X-Amz-Security-Token", "FwoGZXIvYXdzEXAMPLE//token+with/slashes=="}},
			wantSigned: "content-length;content-type;host;x-amz-date;x-amz-security-token;x-amz-target",
			wantToken:  "FwoGZXIvYXdzEXAMPLE//token+with/slashes=="},
		{name: "query string", method: "POST", path: "/?b=2&a=1&a=0&c=x%20y+z&d=%E2%82%AC&e", body: jsonBody, region: "us-west-2",
			wantSigned: "content-length;host;x-amz-date"},
		{name: "odd spacing and repeated values", method: "POST", path: "/", body: jsonBody, region: "us-east-1",
			headers: [][2]string{{"X-Custom", "  a   b  \t c  "}, {"X-Custom", "second   value"}, {"X-Other", "\t x  y"},
				{"x-lower-case-key", "v"}},
			wantSigned: "content-length;host;x-amz-date;x-custom;x-lower-case-key;x-other"},
		{name: "content hash", method: "POST", path: "/", body: jsonBody, region: "us-east-1",
			headers:    [][2]string{{"X-Amz-Content-Sha256", payloadHash(jsonBody)}},
			wantSigned: "content-length;host;x-amz-content-sha256;x-amz-date"},
		{name: "escaped path", method: "PUT", path: "/a%20b/c%2Fd/./%E2%82%AC//", body: jsonBody, region: "us-east-1",
			wantSigned: "content-length;host;x-amz-date"},
		{name: "GET without body", method: "GET", path: "/", region: "ap-southeast-2", wantSigned: "host;x-amz-date"},
	} {
		t.Run(c.name, func(t *testing.T) {
			req := newRequest(t, c.method, srv.URL+c.path, c.body)
			for _, h := range c.headers {
				if strings.ToLower(h[0]) == h[0] {
					req.Header[h[0]] = append(req.Header[h[0]], h[1]) // a key as a map spells it
				} else {
					req.Header.Add(h[0], h[1])
				}
			}
			if err := Sign(req, c.body, testKeyID, testSecret, c.region, "kms", now); err != nil {
				t.Fatalf("Sign: %v", err)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			answer, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("server: %s %s", resp.Status, answer)
			}
			var q Request
			if err := json.Unmarshal(answer, &q); err != nil {
				t.Fatal(err)
			}
			want := Scope{Date: "20240310", Region: c.region, Service: "kms"}
			if q.AccessKeyID != testKeyID || q.Scope != want || !q.Time.Equal(now) ||
				strings.Join(q.SignedHeaders, ";") != c.wantSigned || q.SecurityToken != c.wantToken {
				t.Errorf("Parse = %+v; want key %s, scope %v, time %v, signed %s, token %q",
					q, testKeyID, want, now, c.wantSigned, c.wantToken)
			}
		})
	}
}

// TestVerifyAfterHeadersChange: what Parse read is kept, so that headers
// changed between Parse and Verify change nothing.
func TestVerifyAfterHeadersChange(t *testing.T) {
	body := []byte("{}")
	req := newRequest(t, "POST", "http://kms.test/", body)
	req.Header.Set("X-Amz-Target", "TrentService.Encrypt")
	if err := Sign(req, body, testKeyID, testSecret, "us-east-1", "kms", exampleTime); err != nil {
		t.Fatal(err)
	}
	r := received(t, req)
	q, err := Parse(r, "kms", exampleTime)
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("X-Amz-Target", "TrentService.Decrypt")
	r.Host = "elsewhere.test"
	if err := q.Verify(body, []byte(testSecret)); err != nil {
		t.Errorf("Verify after the headers changed: %v", err)
	}
	if err := new(Request).Verify(body, []byte(testSecret)); err == nil {
		t.Errorf("Verify of a Request that Parse did not make = nil, want an error")
	}
}

func TestSignRefuses(t *testing.T) {
	for _, c := range []struct {
		name, url, keyID, secret, region, service string
	}{
		{"no access key ID", "http://kms.test/", "", testSecret, "us-east-1", "kms"},
		{"comma in the access key ID", "http://kms.test/", "a,b", testSecret, "us-east-1", "kms"},
		{"no secret", "http://kms.test/", testKeyID, "", "us-east-1", "kms"},
		{"no region", "http://kms.test/", testKeyID, testSecret, "", "kms"},
		{"slash in the region", "http://kms.test/", testKeyID, testSecret, "us/east", "kms"},
		{"no service", "http://kms.test/", testKeyID, testSecret, "us-east-1", ""},
		{"malformed query", "http://kms.test/?a=%zz", testKeyID, testSecret, "us-east-1", "kms"},
	} {
		req := newRequest(t, "POST", c.url, nil)
		if err := Sign(req, nil, c.keyID, c.secret, c.region, c.service, exampleTime); err == nil {
			t.Errorf("Sign with %s = nil, want an error", c.name)
		}
		if req.Header.Get("Authorization") != "" {
			t.Errorf("Sign with %s set Authorization", c.name)
		}
	}
}

func TestSignedHeadersSorted(t *testing.T) {
	req := newRequest(t, "POST", "http://kms.test/", []byte("x"))
	for _, k := range []string{"Zeta", "Alpha", "X-Amz-Target", "User-Agent", "Expect", "X-Amzn-Trace-Id"} {
		req.Header.Set(k, "v")
	}
	if err := Sign(req, []byte("x"), testKeyID, testSecret, "us-east-1", "kms", exampleTime); err != nil {
		t.Fatal(err)
	}
	q, err := Parse(received(t, req), "kms", exampleTime)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"alpha", "content-length", "host", "x-amz-date", "x-amz-target", "zeta"}
	if !slices.Equal(q.SignedHeaders, want) {
		t.Errorf("SignedHeaders = %q, want %q", q.SignedHeaders, want)
	}
	if err := q.Verify([]byte("x"), []byte(testSecret)); err != nil {
		t.Errorf("Verify: %v", err)
	}
}
