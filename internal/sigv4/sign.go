package sigv4

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Verify checks that the signature q was parsed from is the one secret
// makes for the request with body (the whole of it, which the caller read
// under its cap). When the client sent X-Amz-Content-Sha256, it must be
// body's hash, signed or not. secret is used for the call only: Verify
// keeps no reference to it nor to the keys derived from it, and clears the
// buffers it derives them in. An empty secret verifies nothing. Its errors
// are *Error.
func (q *Request) Verify(body, secret []byte) error {
	if q.canonical == "" || len(secret) == 0 {
		return refuse(KindInvalid, "%s", MismatchMessage)
	}
	payload := payloadHash(body)
	for _, v := range q.contentSHA256 {
		if v != payload {
			return refuse(KindInvalid, "The provided 'x-amz-content-sha256' header does not match what was computed.")
		}
	}
	sig := signature(secret, q.Scope, q.Time, q.canonical+payload)
	if !hmac.Equal(sig[:], q.signature[:]) {
		return refuse(KindInvalid, "%s", MismatchMessage)
	}
	return nil
}

// ignored are the headers Sign leaves out of the signature, as AWS's SDKs
// do: the signature itself, and what a client's transport or a proxy on
// the way may add or change.
var ignored = []string{"authorization", "expect", "transfer-encoding", "user-agent", "x-amzn-trace-id"}

// Sign signs req, whose body is body, for service in region as of now, as
// AWS's SDKs sign: it sets X-Amz-Date and Authorization, the signature
// covering host, content-length when req.ContentLength is positive, and
// every header of req but those a transport or proxy may touch
// (Authorization, Expect, Transfer-Encoding, User-Agent,
// X-Amzn-Trace-Id). Set X-Amz-Security-Token or X-Amz-Content-Sha256
// before Sign to send and sign them. The caller gives req the same body.
func Sign(req *http.Request, body []byte, accessKeyID, secret, region, service string, now time.Time) error {
	switch {
	case accessKeyID == "" || strings.ContainsAny(accessKeyID, ", \t"):
		return errors.New("sigv4: an access key ID is needed, without commas or spaces")
	case region == "" || strings.ContainsAny(region, "/, \t"):
		return errors.New("sigv4: a region is needed, without slashes, commas or spaces")
	case service == "" || strings.ContainsAny(service, "/, \t"):
		return errors.New("sigv4: a service is needed, without slashes, commas or spaces")
	case secret == "":
		return errors.New("sigv4: a secret is needed")
	}
	if req.Header == nil {
		req.Header = http.Header{}
	}
	t := now.UTC().Truncate(time.Second)
	scope := Scope{Date: t.Format(DateFormat), Region: region, Service: service}
	req.Header.Del("Authorization")
	req.Header.Set("X-Amz-Date", t.Format(TimeFormat))
	names := []string{"host"}
	if req.ContentLength > 0 {
		names = append(names, "content-length")
	}
	for k := range req.Header {
		if name := strings.ToLower(k); !slices.Contains(ignored, name) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	prefix, err := canonicalPrefix(req, names)
	if err != nil {
		return err
	}
	sig := signature([]byte(secret), scope, t, prefix+payloadHash(body))
	req.Header.Set("Authorization", Algorithm+" Credential="+accessKeyID+"/"+scope.String()+
		", SignedHeaders="+strings.Join(names, ";")+", Signature="+hex.EncodeToString(sig[:]))
	return nil
}

// payloadHash is the last line of a canonical request: the hexadecimal
// SHA-256 of the body.
func payloadHash(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}

// stringToSign is the algorithm, the request's time, the scope and the
// hexadecimal SHA-256 of the canonical request, one a line.
func stringToSign(scope Scope, t time.Time, canonical string) string {
	sum := sha256.Sum256([]byte(canonical))
	return Algorithm + "\n" + t.UTC().Format(TimeFormat) + "\n" + scope.String() + "\n" + hex.EncodeToString(sum[:])
}

// signature is the HMAC-SHA256 of the string to sign under the signing
// key that secret derives for scope.
func signature(secret []byte, scope Scope, t time.Time, canonical string) [sha256.Size]byte {
	key := signingKey(secret, scope)
	defer clear(key[:])
	return mac(key[:], stringToSign(scope, t, canonical))
}

// signingKey derives the key of a scope from a secret: an HMAC-SHA256
// chain from "AWS4"+secret over the date, the region, the service and
// "aws4_request". No derived key is kept (nor cached): the four HMACs
// cost 4 to 9 µs on a busy two-core machine (BenchmarkSigningKey), half of
// Parse and Verify (BenchmarkVerify), little beside a KMS call's store
// access and audit record. A cache would save them at the price of
// holding keys derived from every caller's secret, and of a rule to
// forget them when a secret changes.
func signingKey(secret []byte, scope Scope) [sha256.Size]byte {
	k := make([]byte, 0, 4+len(secret))
	k = append(append(k, "AWS4"...), secret...)
	key := mac(k, scope.Date)
	clear(k)
	for _, part := range []string{scope.Region, scope.Service, terminator} {
		key = mac(key[:], part)
	}
	return key
}

func mac(key []byte, data string) [sha256.Size]byte {
	h := hmac.New(sha256.New, key)
	h.Write([]byte(data))
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}
