package sigv4

import (
	"encoding/hex"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// editAuth returns an edit of the received request's Authorization header.
func editAuth(old, new string) func(*http.Request) {
	return func(r *http.Request) {
		r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), old, new, 1))
	}
}

// TestRefusals signs a request as AWS KMS's JSON protocol sends it, changes
// one thing on the way or at the server, and checks the answer: accepted,
// or refused with the right kind (and, where AWS words it so, message).
func TestRefusals(t *testing.T) {
	t0 := time.Date(2024, 3, 10, 12, 0, 0, 0, time.UTC)
	const signedBody = `{"KeyId":"alias/app","Plaintext":"aGVsbG8="}`
	const day = "/20240310/"
	for _, c := range []struct {
		name     string
		before   func(req *http.Request) // before Sign
		edit     func(r *http.Request)   // on the request as received
		body     string                  // the body received, if not the one signed ("-": none)
		secret   string                  // the server's secret, if not the right one ("-": empty)
		signWith string                  // the client's secret, if not the right one ("-": empty)
		now      time.Time               // the server's clock, if not t0
		service  string                  // the server's service, if not kms
		required []string                // the headers the server wants signed, beside host and x-amz-date
		want     Kind                    // "": accepted
		message  string                  // the whole message, where it matters
	}{
		{name: "as signed"},
		{name: "unsigned headers added", edit: func(r *http.Request) {
			r.Header.Set("X-Forwarded-For", "192.0.2.1")
			r.Header.Set("User-Agent", "another")
			r.Header.Set("X-Amz-Security-Token", "unsigned")
		}},
		{name: "body's hash sent unsigned", edit: func(r *http.Request) {
			r.Header.Set("X-Amz-Content-Sha256", payloadHash([]byte(signedBody)))
		}},
		{name: "a required header signed", required: []string{"x-amz-target", "content-type"}},
		{name: "a required header added unsigned", required: []string{"x-amz-target"},
			before: func(req *http.Request) { req.Header.Del("X-Amz-Target") },
			edit:   func(r *http.Request) { r.Header.Set("X-Amz-Target", "TrentService.DisableKey") },
			want:   KindIncomplete, message: "'X-Amz-Target' must be a 'SignedHeader' in the AWS Authorization."},
		{name: "server 5 minutes ahead", now: t0.Add(MaxSkew)},
		{name: "server 5 minutes behind", now: t0.Add(-MaxSkew)},

		{name: "server 5 minutes and 1 second ahead", now: t0.Add(MaxSkew + time.Second), want: KindInvalid,
			message: "Signature expired: 20240310T120000Z is now earlier than 20240310T120001Z (20240310T120501Z - 5 min.)"},
		{name: "server 5 minutes and 1 second behind", now: t0.Add(-MaxSkew - time.Second), want: KindInvalid,
			message: "Signature not yet current: 20240310T120000Z is still later than 20240310T115959Z (20240310T115459Z + 5 min.)"},
		{name: "wrong secret", secret: testSecret + "x", want: KindInvalid, message: MismatchMessage},
		{name: "secret's prefix", secret: testSecret[:len(testSecret)-1], want: KindInvalid, message: MismatchMessage},
		{name: "body changed", body: `{"KeyId":"alias/app","Plaintext":"aGVsbG9="}`, want: KindInvalid, message: MismatchMessage},
		{name: "body emptied", body: "-", want: KindInvalid, message: MismatchMessage},
		{name: "signed header changed", edit: func(r *http.Request) { r.Header.Set("X-Amz-Target", "TrentService.Decrypt") },
			want: KindInvalid, message: MismatchMessage},
		{name: "signed header removed", edit: func(r *http.Request) { r.Header.Del("Content-Type") },
			want: KindInvalid, message: MismatchMessage},
		{name: "signed header repeated", edit: func(r *http.Request) { r.Header.Add("X-Amz-Target", "TrentService.Encrypt") },
			want: KindInvalid, message: MismatchMessage},
		{name: "method changed", edit: func(r *http.Request) { r.Method = "PUT" }, want: KindInvalid, message: MismatchMessage},
		{name: "path changed", edit: func(r *http.Request) { r.URL.Path = "/other" }, want: KindInvalid, message: MismatchMessage},
		{name: "query added", edit: func(r *http.Request) { r.URL.RawQuery = "a=1" }, want: KindInvalid, message: MismatchMessage},
		{name: "host changed", edit: func(r *http.Request) { r.Host = "kms.other.test" }, want: KindInvalid, message: MismatchMessage},
		{name: "time changed within the day", edit: func(r *http.Request) { r.Header.Set("X-Amz-Date", "20240310T120001Z") },
			want: KindInvalid, message: MismatchMessage},
		{name: "another request's signature", edit: withSignature(strings.Repeat("0", 64)),
			want: KindInvalid, message: MismatchMessage},
		{name: "empty secret", signWith: "-", secret: "-", want: KindInvalid, message: MismatchMessage},
		{name: "signed hash not the body's", before: func(req *http.Request) {
			req.Header.Set("X-Amz-Content-Sha256", payloadHash([]byte("other")))
		}, want: KindInvalid, message: "The provided 'x-amz-content-sha256' header does not match what was computed."},
		{name: "unsigned hash not the body's", edit: func(r *http.Request) {
			r.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
		}, want: KindInvalid, message: "The provided 'x-amz-content-sha256' header does not match what was computed."},
		{name: "malformed query", edit: func(r *http.Request) { r.URL.RawQuery = "a=%zz" }, want: KindInvalid},
		{name: "scoped to another service", service: "s3", want: KindInvalid,
			message: "Credential should be scoped to correct service: 's3'."},
		{name: "scoped to another day", edit: editAuth(day, "/20240309/"), want: KindInvalid,
			message: "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: '20240309' != '20240310', from '20240310T120000Z'."},

		{name: "no Authorization", edit: func(r *http.Request) { r.Header.Del("Authorization") }, want: KindMissing,
			message: "Missing Authentication Token"},
		{name: "empty Authorization", edit: func(r *http.Request) { r.Header.Set("Authorization", " ") }, want: KindMissing},
		{name: "two Authorization headers", edit: func(r *http.Request) { r.Header.Add("Authorization", r.Header.Get("Authorization")) },
			want: KindIncomplete},
		{name: "another algorithm", edit: editAuth("AWS4-HMAC-SHA256", "AWS4-HMAC-SHA512"), want: KindIncomplete},
		{name: "a bearer token", edit: func(r *http.Request) { r.Header.Set("Authorization", "Bearer sekrit-token") }, want: KindIncomplete},
		{name: "a bare token", edit: func(r *http.Request) { r.Header.Set("Authorization", "sekrit-token") }, want: KindIncomplete},
		{name: "no Credential", edit: dropParam("Credential"), want: KindIncomplete,
			message: "Authorization header requires 'Credential' parameter."},
		{name: "an unknown parameter", edit: editAuth("Credential=", "Credentials="), want: KindIncomplete},
		{name: "no parameters", edit: func(r *http.Request) { r.Header.Set("Authorization", Algorithm) }, want: KindIncomplete,
			message: "Authorization header requires 'Credential' parameter. Authorization header requires 'SignedHeaders' parameter. " +
				"Authorization header requires 'Signature' parameter."},
		{name: "no SignedHeaders", edit: dropParam("SignedHeaders"), want: KindIncomplete,
			message: "Authorization header requires 'SignedHeaders' parameter."},
		{name: "no Signature", edit: dropParam("Signature"), want: KindIncomplete,
			message: "Authorization header requires 'Signature' parameter."},
		{name: "a parameter without =", edit: editAuth(", Signature=", ", Signature, Signature="), want: KindIncomplete},
		{name: "empty Signature", edit: withSignature(""), want: KindIncomplete,
			message: "Authorization header requires 'Signature' parameter."},
		{name: "Signature twice", edit: editAuth(", Signature=", ", Signature="+strings.Repeat("0", 64)+", Signature="), want: KindIncomplete},
		{name: "short Signature", edit: withSignature(strings.Repeat("0", 63)), want: KindIncomplete},
		{name: "long Signature", edit: withSignature(strings.Repeat("0", 65)), want: KindIncomplete},
		{name: "Signature not hexadecimal", edit: withSignature(strings.Repeat("z", 64)), want: KindIncomplete},
		{name: "credential without scope", edit: editAuth(day+"us-east-1/kms/aws4_request", ""), want: KindIncomplete},
		{name: "credential of four parts", edit: editAuth("/aws4_request", ""), want: KindIncomplete},
		{name: "credential without access key ID", edit: editAuth("Credential="+testKeyID, "Credential="), want: KindIncomplete},
		{name: "credential's terminator", edit: editAuth("/aws4_request", "/aws4_reques"), want: KindIncomplete,
			message: "Credential should be scoped with a valid terminator: 'aws4_request'."},
		{name: "credential's date malformed", edit: editAuth(day, "/2024031/"), want: KindIncomplete},
		{name: "credential without region", edit: editAuth("/us-east-1/", "//"), want: KindIncomplete},
		{name: "host not signed", edit: editAuth("host;", ""), want: KindIncomplete,
			message: "'Host' must be a 'SignedHeader' in the AWS Authorization."},
		{name: "date not signed", edit: editAuth(";x-amz-date", ""), want: KindIncomplete,
			message: "'X-Amz-Date' must be a 'SignedHeader' in the AWS Authorization."},
		{name: "upper-case signed header", edit: editAuth("host;", "Host;"), want: KindIncomplete},
		{name: "empty signed header name", edit: editAuth("host;", "host;;"), want: KindIncomplete},
		{name: "no X-Amz-Date", edit: func(r *http.Request) { r.Header.Del("X-Amz-Date") }, want: KindIncomplete,
			message: "Authorization header requires existence of a 'X-Amz-Date' header."},
		{name: "X-Amz-Date twice", edit: func(r *http.Request) { r.Header.Add("X-Amz-Date", "20240310T120000Z") }, want: KindIncomplete},
		{name: "X-Amz-Date in extended format", edit: func(r *http.Request) { r.Header.Set("X-Amz-Date", "2024-03-10T12:00:00Z") },
			want: KindIncomplete},
		{name: "X-Amz-Date's month 13", edit: func(r *http.Request) { r.Header.Set("X-Amz-Date", "20241310T120000Z") },
			want: KindIncomplete},
		{name: "X-Amz-Date with a one-digit hour", edit: func(r *http.Request) { r.Header.Set("X-Amz-Date", "20240310T10000Z") },
			want: KindIncomplete},
	} {
		t.Run(c.name, func(t *testing.T) {
			body := []byte(signedBody)
			req := newRequest(t, "POST", "http://kms.test:8080/", body)
			req.Header.Set("Content-Type", "application/x-amz-json-1.1")
			req.Header.Set("X-Amz-Target", "TrentService.Encrypt")
			signWith := testSecret
			if c.before != nil {
				c.before(req)
			}
			switch c.signWith {
			case "":
			case "-":
				signWith = ""
			default:
				signWith = c.signWith
			}
			if err := signForTest(req, body, signWith, t0); err != nil {
				t.Fatalf("Sign: %v", err)
			}
			authorization := req.Header.Get("Authorization")
			r := received(t, req)
			if c.edit != nil {
				c.edit(r)
			}
			now, service, secret := t0, "kms", testSecret
			if !c.now.IsZero() {
				now = c.now
			}
			if c.service != "" {
				service = c.service
			}
			switch c.secret {
			case "":
			case "-":
				secret = ""
			default:
				secret = c.secret
			}
			switch c.body {
			case "":
			case "-":
				body = nil
			default:
				body = []byte(c.body)
			}
			q, err := Parse(r, service, now, c.required...)
			if err == nil {
				err = q.Verify(body, []byte(secret))
			}
			if c.want == "" {
				if err != nil {
					t.Fatalf("Parse and Verify = %v, want nil", err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Parse and Verify = %v, want an *Error of kind %s", err, c.want)
			}
			if e.Kind != c.want || c.message != "" && e.Message != c.message {
				t.Errorf("Parse and Verify = %s %q, want %s %q", e.Kind, e.Message, c.want, c.message)
			}
			sig := authorization[strings.Index(authorization, "Signature=")+len("Signature="):]
			for _, secretish := range []string{testSecret, sig, "sekrit"} {
				if strings.Contains(e.Error(), secretish) {
					t.Errorf("the error %q holds %q", e.Error(), secretish)
				}
			}
		})
	}
}

// signForTest is Sign, except that it signs with an empty secret too, as
// a careless client could: Sign itself refuses to.
func signForTest(req *http.Request, body []byte, secret string, now time.Time) error {
	if secret != "" {
		return Sign(req, body, testKeyID, secret, "us-east-1", "kms", now)
	}
	if err := Sign(req, body, testKeyID, "placeholder", "us-east-1", "kms", now); err != nil {
		return err
	}
	a := req.Header.Get("Authorization")
	list, _, _ := strings.Cut(a[strings.Index(a, "SignedHeaders=")+len("SignedHeaders="):], ",")
	prefix, err := canonicalPrefix(req, strings.Split(list, ";"))
	if err != nil {
		return err
	}
	scope := Scope{Date: now.UTC().Format(DateFormat), Region: "us-east-1", Service: "kms"}
	sig := signature(nil, scope, now, prefix+payloadHash(body))
	setSignature(req, hex.EncodeToString(sig[:]))
	return nil
}

// setSignature replaces the Signature of a signed request.
func setSignature(r *http.Request, sig string) {
	a := r.Header.Get("Authorization")
	r.Header.Set("Authorization", a[:strings.Index(a, "Signature=")+len("Signature=")]+sig)
}

// dropParam is an edit that removes a parameter from Authorization.
func dropParam(name string) func(*http.Request) {
	return func(r *http.Request) {
		alg, rest, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		var kept []string
		for _, p := range strings.Split(rest, ", ") {
			if !strings.HasPrefix(p, name+"=") {
				kept = append(kept, p)
			}
		}
		r.Header.Set("Authorization", alg+" "+strings.Join(kept, ", "))
	}
}

// withSignature is an edit that sets the Signature.
func withSignature(sig string) func(*http.Request) {
	return func(r *http.Request) { setSignature(r, sig) }
}
