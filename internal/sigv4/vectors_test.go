package sigv4

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The credentials and the time of AWS's published examples.
const (
	exampleKeyID  = "AKIDEXAMPLE"
	exampleSecret = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
)

var exampleTime = time.Date(2015, 8, 30, 12, 36, 0, 0, time.UTC)

// received returns req as a server receives it: written on the wire and
// read back by net/http, which promotes Host, keeps Content-Length in the
// header and parses the request line.
func received(t testing.TB, req *http.Request) *http.Request {
	t.Helper()
	var wire bytes.Buffer
	if err := req.Write(&wire); err != nil {
		t.Fatalf("Write: %v", err)
	}
	r, err := http.ReadRequest(bufio.NewReader(&wire))
	if err != nil {
		t.Fatalf("ReadRequest: %v", err)
	}
	return r
}

func newRequest(t testing.TB, method, url string, body []byte) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if body == nil {
		req, err = http.NewRequest(method, url, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// TestDocumentedExample follows AWS's worked example of Signature Version
// 4 (IAM's ListUsers) step by step: its canonical request, string to sign,
// signing key and signature are the published ones.
func TestDocumentedExample(t *testing.T) {
	const (
		wantCanonical = "GET\n/\nAction=ListUsers&Version=2010-05-08\n" +
			"content-type:application/x-www-form-urlencoded; charset=utf-8\n" +
			"host:iam.amazonaws.com\n" +
			"x-amz-date:20150830T123600Z\n\n" +
			"content-type;host;x-amz-date\n" +
			"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
		wantStringToSign = "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/iam/aws4_request\n" +
			"f536975d06c0309214f805bb90ccff089219ecd68b2577efef23edd43b7e1a59"
		wantKey           = "c4afb1cc5771d871763a393e44b703571b55cc28424d1a5e86da6ed3c154a4b9"
		wantAuthorization = "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/iam/aws4_request, " +
			"SignedHeaders=content-type;host;x-amz-date, " +
			"Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7"
	)
	req := newRequest(t, "GET", "https://iam.amazonaws.com/?Action=ListUsers&Version=2010-05-08", nil)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	if err := Sign(req, nil, exampleKeyID, exampleSecret, "us-east-1", "iam", exampleTime); err != nil {
		t.Fatalf("Sign: %v", err)
	}
	if got := req.Header.Get("Authorization"); got != wantAuthorization {
		t.Errorf("Sign: Authorization = %q, want %q", got, wantAuthorization)
	}
	if got := req.Header.Get("X-Amz-Date"); got != "20150830T123600Z" {
		t.Errorf("Sign: X-Amz-Date = %q, want 20150830T123600Z", got)
	}

	q, err := Parse(received(t, req), "iam", exampleTime)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	canonical := q.canonical + payloadHash(nil)
	if canonical != wantCanonical {
		t.Errorf("canonical request = %q, want %q", canonical, wantCanonical)
	}
	if got := stringToSign(q.Scope, q.Time, canonical); got != wantStringToSign {
		t.Errorf("string to sign = %q, want %q", got, wantStringToSign)
	}
	if key := signingKey([]byte(exampleSecret), q.Scope); hex.EncodeToString(key[:]) != wantKey {
		t.Errorf("signing key = %x, want %s", key, wantKey)
	}
	if err := q.Verify(nil, []byte(exampleSecret)); err != nil {
		t.Errorf("Verify: %v", err)
	}
}

// TestSuiteVectors signs the requests of AWS's Signature Version 4 test
// suite (service "service", us-east-1, 20150830T123600Z) and checks the
// published signatures, then verifies them as a server receives them.
// The suite's cases whose path holds bytes that go escaped on the wire
// (get-space, get-utf8) are TestCanonicalURI's.
func TestSuiteVectors(t *testing.T) {
	const token = "AQoDYXdzEPT//////////wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQWLWsKWHGBuFqwAeMicRXmxfpSPfIeoIYRqTflfKD8YUuwthAx7mSEI/" +
		"qkPpKPi/kMcGdQrmGdeehM4IC1NtBmUpp2wUE8phUZampKsburEDy0KPkyQDYwT7WZ0wq5VSXDvp75YU9HFvlRd8Tx6q6fE8YQcHNVXAkiY9q6d+xo0rKwT38xVqr7ZD0u0iPPkUL64lIZbqBAz+" +
		"scqKmlzm8FDrypNC9Yjc8fPOLn9FX9KSYvKTr4rvx3iSIlTJabIQwj2ICCR/oLxBA=="
	const formHash = "9095672bbd1f56dfc5b65f3e153adc8731a4a654192329106275f4c7b24d0b6e"
	for _, c := range []struct {
		name, method, path string
		headers            [][2]string // added in this order
		body               string
		signed             string
		signature          string
	}{
		{"get-vanilla", "GET", "/", nil, "", "host;x-amz-date",
			"5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"},
		{"post-vanilla", "POST", "/", nil, "", "host;x-amz-date",
			"5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b"},
		{"get-vanilla-query-order-key-case", "GET", "/?Param2=value2&Param1=value1", nil, "", "host;x-amz-date",
			"b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500"},
		{"get-vanilla-query-order-encoded", "GET", "/?Param-3=Value3&Param=Value2&%E1%88%B4=Value1", nil, "", "host;x-amz-date",
			"371d3713e185cc334048618a97f809c9ffe339c62934c032af5a0e595648fcac"},
		{"get-vanilla-query-unreserved", "GET",
			"/?-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz=-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
			nil, "", "host;x-amz-date", "9c3e54bfcdf0b19771a7f523ee5669cdf59bc7cc0884027167c21bb143a40197"},
		{"post-vanilla-query", "POST", "/?Param1=value1", nil, "", "host;x-amz-date",
			"28038455d6de14eafc1f9222cf5aa6f1a96197d7deb8263271d420d138af7f11"},
		{"get-unreserved", "GET", "/-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", nil, "", "host;x-amz-date",
			"07ef7494c76fa4850883e2b006601f940f8a34d404d0cfa977f52a65bbf5f24f"},
		{"get-slashes-normalized", "GET", "//example//", nil, "", "host;x-amz-date",
			"9a624bd73a37c9a373b5312afbebe7a714a789de108f0bdfe846570885f57e84"},
		{"get-relative-relative-normalized", "GET", "/example1/example2/../..", nil, "", "host;x-amz-date",
			"5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"},
		{"get-slash-pointless-dot-normalized", "GET", "/./example", nil, "", "host;x-amz-date",
			"ef75d96142cf21edca26f06005da7988e4f8dc83a165a80865db7089db637ec5"},
		{"get-header-key-duplicate", "GET", "/", [][2]string{{"My-Header1", "value2"}, {"My-Header1", "value2"}, {"My-Header1", "value1"}},
			"", "host;my-header1;x-amz-date", "c9d5ea9f3f72853aea855b47ea873832890dbdd183b4468f858259531a5138ea"},
		{"get-header-value-order", "GET", "/",
			[][2]string{{"My-Header1", "value4"}, {"My-Header1", "value1"}, {"My-Header1", "value3"}, {"My-Header1", "value2"}},
			"", "host;my-header1;x-amz-date", "08c7e5a9acfcfeb3ab6b2185e75ce8b1deb5e634ec47601a50643f830c755c01"},
		{"get-header-value-trim", "GET", "/", [][2]string{{"My-Header1", " value1"}, {"My-Header2", `"a   b   c"`}},
			"", "host;my-header1;my-header2;x-amz-date", "acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736"},
		{"post-header-key-sort", "POST", "/", [][2]string{{"My-Header1", "value1"}},
			"", "host;my-header1;x-amz-date", "c5410059b04c1ee005303aed430f6e6645f61f4dc9e1461ec8f8916fdf18852c"},
		{"post-header-value-case", "POST", "/", [][2]string{{"My-Header1", "VALUE1"}},
			"", "host;my-header1;x-amz-date", "cdbc9802e29d2942e5e10b5bccfdd67c5f22c7c4e8ae67b53629efa58b974b7d"},
		{"get-vanilla-with-session-token", "GET", "/",
			[][2]string{{"X-Amz-Security-Token", "6e86291e8372ff2a2260956d9b8aae1d763fbf315fa00fa31553b73ebf194267"}},
			"", "host;x-amz-date;x-amz-security-token", "07ec1639c89043aa0e3e2de82b96708f198cceab042d4a97044c66dd9f74e7f8"},
		{"post-sts-header-before", "POST", "/", [][2]string{{"X-Amz-Security-Token", token}},
			"", "host;x-amz-date;x-amz-security-token", "85d96828115b5dc0cfc3bd16ad9e210dd772bbebba041836c64533a82be05ead"},
		{"post-x-www-form-urlencoded", "POST", "/",
			[][2]string{{"Content-Type", "application/x-www-form-urlencoded"}, {"X-Amz-Content-Sha256", formHash}},
			"Param1=value1", "content-length;content-type;host;x-amz-content-sha256;x-amz-date",
			"d3875051da38690788ef43de4db0d8f280229d82040bfac253562e56c3f20e0b"},
		{"post-x-www-form-urlencoded-parameters", "POST", "/",
			[][2]string{{"Content-Type", "application/x-www-form-urlencoded; charset=utf-8"}, {"X-Amz-Content-Sha256", formHash}},
			"Param1=value1", "content-length;content-type;host;x-amz-content-sha256;x-amz-date",
			"328d1b9eaadca9f5818ef05e8392801e091653bafec24fcab71e7344e7f51422"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var body []byte
			if c.body != "" {
				body = []byte(c.body)
			}
			req := newRequest(t, c.method, "https://example.amazonaws.com"+c.path, body)
			for _, h := range c.headers {
				req.Header.Add(h[0], h[1])
			}
			if err := Sign(req, body, exampleKeyID, exampleSecret, "us-east-1", "service", exampleTime); err != nil {
				t.Fatalf("Sign: %v", err)
			}
			want := "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=" +
				c.signed + ", Signature=" + c.signature
			if got := req.Header.Get("Authorization"); got != want {
				t.Errorf("Sign: Authorization = %q, want %q", got, want)
			}
			q, err := Parse(received(t, req), "service", exampleTime)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if q.Signature != c.signature || strings.Join(q.SignedHeaders, ";") != c.signed {
				t.Errorf("Parse: Signature %s, SignedHeaders %q; want %s, %q", q.Signature, q.SignedHeaders, c.signature, c.signed)
			}
			if err := q.Verify(body, []byte(exampleSecret)); err != nil {
				t.Errorf("Verify: %v", err)
			}
		})
	}
}

// TestCanonicalURI checks the canonical URI of escaped paths: the suite's
// normalization cases, its raw paths (get-space, get-utf8: the path as the
// client holds it, encoded once), and the specification's example of a
// path that goes escaped on the wire and is signed encoded twice.
func TestCanonicalURI(t *testing.T) {
	for _, c := range []struct{ path, want string }{
		{"", "/"},
		{"/", "/"},
		{"//", "/"},
		{"/./", "/"},
		{"/example/..", "/"},
		{"/example1/example2/../..", "/"},
		{"/..", "/"},
		{"/./example", "/example"},
		{"//example//", "/example/"},
		{"/a/b/../c/./d/", "/a/c/d/"},
		{"/example space/", "/example%20space/"},
		{"/\u1234", "/%E1%88%B4"},
		{"/documents%20and%20settings/", "/documents%2520and%2520settings/"},
		{"/%E1%88%B4", "/%25E1%2588%25B4"},
		{"/a+b:c@d!$&'()*,;=", "/a%2Bb%3Ac%40d%21%24%26%27%28%29%2A%2C%3B%3D"},
		{"/-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", "/-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"},
	} {
		if got := canonicalURI(c.path); got != c.want {
			t.Errorf("canonicalURI(%q) = %q, want %q", c.path, got, c.want)
		}
	}
}

// TestCanonicalQuery checks the canonical query string: sorted by encoded
// name (so "%E1..." before "P"), then by value, every byte but the
// unreserved ones encoded, "+" read as a space.
func TestCanonicalQuery(t *testing.T) {
	for _, c := range []struct{ raw, want string }{
		{"", ""},
		{"Param2=value2&Param1=value1", "Param1=value1&Param2=value2"},
		{"Param-3=Value3&Param=Value2&%E1%88%B4=Value1", "%E1%88%B4=Value1&Param=Value2&Param-3=Value3"},
		{"a=2&a=1&a=10", "a=1&a=10&a=2"},
		{"b&a=", "a=&b="},
		{"a=x+y&c=x%20y&d=%2B", "a=x%20y&c=x%20y&d=%2B"},
		{"k=%7e%2f/:", "k=~%2F%2F%3A"},
		{"&&a=1&", "a=1"},
	} {
		got, err := canonicalQuery(c.raw)
		if err != nil || got != c.want {
			t.Errorf("canonicalQuery(%q) = %q, %v, want %q", c.raw, got, err, c.want)
		}
	}
	for _, raw := range []string{"a=%zz", "%=1", "a=%"} {
		if got, err := canonicalQuery(raw); err == nil {
			t.Errorf("canonicalQuery(%q) = %q, want an error", raw, got)
		}
	}
}

// TestRequestCanonicalURI: a request's canonical URI is made from its path
// as it goes on the wire, escaped, so that what was escaped there is
// encoded twice, on the client's side as on the server's.
func TestRequestCanonicalURI(t *testing.T) {
	opaque := newRequest(t, "GET", "http://h.test/", nil)
	opaque.URL.Opaque = "//h.test/x%20y"
	for _, c := range []struct {
		req  *http.Request
		want string
	}{
		{newRequest(t, "GET", "http://h.test/documents%20and%20settings/", nil), "/documents%2520and%2520settings/"},
		{newRequest(t, "GET", "http://h.test/documents and settings/", nil), "/documents%2520and%2520settings/"},
		{newRequest(t, "GET", "http://h.test/a%2Fb/%7e", nil), "/a%252Fb/%257e"},
		{newRequest(t, "GET", "http://h.test", nil), "/"},
		{opaque, "/x%2520y"},
	} {
		for side, r := range map[string]*http.Request{"client": c.req, "server": received(t, c.req.Clone(c.req.Context()))} {
			prefix, err := canonicalPrefix(r, []string{"host"})
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Split(prefix, "\n")[1]; got != c.want {
				t.Errorf("%s's canonical URI of %s = %q, want %q", side, c.req.URL, got, c.want)
			}
		}
	}
}

// TestHeaderValues: the headers net/http keeps out of r.Header are read
// where it keeps them, on the client's side and on the server's.
func TestHeaderValues(t *testing.T) {
	sized := func() *http.Request { return newRequest(t, "POST", "http://h.test:8080/", []byte("13 bytes long")) }
	chunked := func() *http.Request {
		req := newRequest(t, "POST", "http://h.test/", nil)
		req.Body = io.NopCloser(strings.NewReader("of a length unknown"))
		req.ContentLength = -1
		return req
	}
	for _, c := range []struct {
		req        *http.Request
		name, want string
	}{
		{sized(), "host", "h.test:8080"},
		{sized(), "content-length", "13"},
		{received(t, sized()), "host", "h.test:8080"},
		{received(t, sized()), "content-length", "13"},
		{received(t, chunked()), "transfer-encoding", "chunked"},
		{received(t, chunked()), "content-length", ""},
	} {
		if got := strings.Join(headerValues(c.req, c.name), ","); got != c.want {
			t.Errorf("headerValues(%s) = %q, want %q", c.name, got, c.want)
		}
	}
}
