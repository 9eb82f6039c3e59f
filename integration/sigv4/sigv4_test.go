// Package sigv4 checks internal/sigv4 against AWS's own signer, the AWS
// SDK for Go v2's: what it signs, a server built on internal/sigv4
// accepts, and refuses once the secret or the body is not the one signed;
// and internal/sigv4's Sign writes the very Authorization header it does.
package sigv4

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/ringkms/kms/internal/sigv4"
)

const (
	keyID  = "ak_01HZX3F4Q2J8W9K7M5N6P3R2T1"
	secret = "sk_Zm9yIHRoZSB0ZXN0cyBvZiBTaWdWNCBvbmx5LCBub3QgYSByZWFsIG9uZQ"
)

// answer is what the server says of a request: AWS's "__type" and
// "message" when it refuses, what it read of the signature when not.
type answer struct {
	Type    string `json:"__type,omitempty"`
	Message string `json:"message,omitempty"`
	KeyID   string `json:"keyId,omitempty"`
	Region  string `json:"region,omitempty"`
	Token   string `json:"token,omitempty"`
	Target  string `json:"target,omitempty"`
}

// server verifies each request with internal/sigv4 against the server's
// clock, with the secret of the one access key ID it knows.
func server(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		refuse := func(typ, message string) {
			w.WriteHeader(http.StatusBadRequest)
			json.NewEncoder(w).Encode(answer{Type: typ, Message: message})
		}
		q, err := sigv4.Parse(r, "kms", time.Now())
		if err == nil {
			if q.AccessKeyID != keyID {
				refuse("UnrecognizedClientException", "The security token included in the request is invalid.")
				return
			}
			var body []byte
			if body, err = io.ReadAll(io.LimitReader(r.Body, 1<<20)); err != nil {
				refuse("InternalFailure", err.Error())
				return
			}
			err = q.Verify(body, []byte(secret))
		}
		var e *sigv4.Error
		if errors.As(err, &e) {
			refuse(string(e.Kind), e.Message)
			return
		}
		json.NewEncoder(w).Encode(answer{KeyID: q.AccessKeyID, Region: q.Scope.Region, Token: q.SecurityToken,
			Target: r.Header.Get("X-Amz-Target")})
	}))
	t.Cleanup(srv.Close)
	return srv
}

type variation struct {
	name, method, path, region, token string
	headers                           [][2]string
	body                              []byte
}

func (v variation) request(t *testing.T, base string, body []byte) *http.Request {
	t.Helper()
	req, err := http.NewRequest(v.method, base+v.path, bytes.NewReader(body))
	if body == nil {
		req, err = http.NewRequest(v.method, base+v.path, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range v.headers {
		req.Header.Add(h[0], h[1])
	}
	return req
}

// sdkSign signs req as the AWS SDK for Go v2 signs a KMS call.
func sdkSign(t *testing.T, req *http.Request, body []byte, secretKey, token, region string, at time.Time) {
	t.Helper()
	creds := aws.Credentials{AccessKeyID: keyID, SecretAccessKey: secretKey, SessionToken: token}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, hashOf(body), "kms", region, at); err != nil {
		t.Fatalf("SignHTTP: %v", err)
	}
}

func send(t *testing.T, req *http.Request) (int, answer) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a answer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		t.Fatalf("the server's answer: %v", err)
	}
	return resp.StatusCode, a
}

var generateBody = []byte(`{"KeyId":"alias/app","KeySpec":"AES_256"}`)

func hashOf(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}

var variations = []variation{
	{name: "Encrypt", method: "POST", path: "/", region: "us-east-1",
		headers: [][2]string{{"Content-Type", "application/x-amz-json-1.1"}, {"X-Amz-Target", "TrentService.Encrypt"}},
		body:    []byte(`{"KeyId":"alias/app","Plaintext":"aGVsbG8gd29ybGQ="}`)},
	{name: "Decrypt with a session token", method: "POST", path: "/", region: "eu-west-3",
		token:   "IQoJb3JpZ2luX2VjEXAMPLE//////////wEaCXVzLWVhc3QtMSJHMEUCIQ+token/with+slashes==",
		headers: [][2]string{{"Content-Type", "application/x-amz-json-1.1"}, {"X-Amz-Target", "TrentService.Decrypt"}},
		body:    []byte(`{"CiphertextBlob":"AQIDBAUGBwgJCgsMDQ4PEA==","EncryptionContext":{"app":"a b"}}`)},
	{name: "GenerateDataKey with its payload hash sent", method: "POST", path: "/", region: "ap-northeast-1",
		headers: [][2]string{{"Content-Type", "application/x-amz-json-1.1"}, {"X-Amz-Target", "TrentService.GenerateDataKey"},
			{"X-Amz-Content-Sha256", hashOf(generateBody)}},
		body: generateBody},
	{name: "escaped path, query, odd spacing and repeated values", method: "POST",
		path: "/a%20b/c%2Fd/%E2%82%AC?b=2&a=1&a=0&c=x%20y+z&e", region: "us-west-2",
		headers: [][2]string{{"Content-Type", "application/x-amz-json-1.1"}, {"X-Amz-Target", "TrentService.ListKeys"},
			{"X-Custom", "  one   two  "}, {"X-Custom", "three"}},
		body: []byte(`{}`)},
	{name: "GET without a body", method: "GET", path: "/", region: "us-east-1"},
}

// TestSDKSigner: requests signed by the AWS SDK for Go v2 are accepted as
// signed, and refused when signed with another secret or when their body
// changed on the way; Sign signs as the SDK does, byte for byte.
func TestSDKSigner(t *testing.T) {
	srv := server(t)
	for _, v := range variations {
		t.Run(v.name, func(t *testing.T) {
			body := v.body
			now := time.Now().UTC().Truncate(time.Second)

			req := v.request(t, srv.URL, body)
			sdkSign(t, req, body, secret, v.token, v.region, now)
			status, a := send(t, req)
			want := answer{KeyID: keyID, Region: v.region, Token: v.token, Target: req.Header.Get("X-Amz-Target")}
			if status != http.StatusOK || a != want {
				t.Fatalf("signed by the SDK: %d %+v, want 200 %+v", status, a, want)
			}

			// internal/sigv4's Sign writes the SDK's Authorization header.
			ours := v.request(t, srv.URL, body)
			ours.URL.RawQuery = req.URL.RawQuery // the SDK writes the query in its canonical order
			if v.token != "" {
				ours.Header.Set("X-Amz-Security-Token", v.token)
			}
			if err := sigv4.Sign(ours, body, keyID, secret, v.region, "kms", now); err != nil {
				t.Fatalf("Sign: %v", err)
			}
			if got, want := ours.Header.Get("Authorization"), req.Header.Get("Authorization"); got != want {
				t.Errorf("Sign: Authorization\n %s\nwant the SDK's\n %s", got, want)
			}

			wrong := v.request(t, srv.URL, body)
			sdkSign(t, wrong, body, secret[:len(secret)-1]+"x", v.token, v.region, now)
			if status, a := send(t, wrong); status != http.StatusBadRequest ||
				a.Type != string(sigv4.KindInvalid) || a.Message != sigv4.MismatchMessage {
				t.Errorf("signed with another secret: %d %+v, want 400 %s", status, a, sigv4.KindInvalid)
			}

			// The same length if it can be, so that only the hash differs.
			changed := append([]byte(nil), body...)
			if len(changed) > 0 {
				changed[len(changed)-1] ^= 1
			} else {
				changed = []byte{' '}
			}
			tampered := v.request(t, srv.URL, changed)
			signed := v.request(t, srv.URL, body)
			sdkSign(t, signed, body, secret, v.token, v.region, now)
			tampered.Header = signed.Header
			tampered.URL.RawQuery = signed.URL.RawQuery
			if status, a := send(t, tampered); status != http.StatusBadRequest || a.Type != string(sigv4.KindInvalid) {
				t.Errorf("body changed after signing: %d %+v, want 400 %s", status, a, sigv4.KindInvalid)
			}
		})
	}
}

// TestSDKSignerSkew: the SDK's signature of a request made more than five
// minutes before or after the server's clock is refused as AWS refuses it.
func TestSDKSignerSkew(t *testing.T) {
	srv := server(t)
	v := variations[0]
	for _, c := range []struct {
		name   string
		offset time.Duration
		prefix string
	}{
		{"made 6 minutes ago", -6 * time.Minute, "Signature expired: "},
		{"made 6 minutes ahead", 6 * time.Minute, "Signature not yet current: "},
	} {
		req := v.request(t, srv.URL, v.body)
		sdkSign(t, req, v.body, secret, "", v.region, time.Now().Add(c.offset))
		status, a := send(t, req)
		if status != http.StatusBadRequest || a.Type != string(sigv4.KindInvalid) || len(a.Message) < len(c.prefix) ||
			a.Message[:len(c.prefix)] != c.prefix {
			t.Errorf("%s: %d %+v, want 400 %s %q...", c.name, status, a, sigv4.KindInvalid, c.prefix)
		}
	}
}
