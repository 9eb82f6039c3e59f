package sigv4

import (
	"encoding/hex"
	"net/http"
	"slices"
	"strings"
	"time"
)

const (
	// Algorithm is the only algorithm the package signs and verifies.
	Algorithm = "AWS4-HMAC-SHA256"
	// TimeFormat is X-Amz-Date's: ISO 8601 basic format, in UTC.
	TimeFormat = "20060102T150405Z"
	// DateFormat is the credential scope's date.
	DateFormat = "20060102"
	// MaxSkew is how far a request's time may be from the server's clock,
	// either way.
	MaxSkew = 5 * time.Minute

	terminator = "aws4_request"
)

// Scope is a signature's credential scope: the day, the region and the
// service its signing key is derived for.
type Scope struct {
	Date    string // YYYYMMDD
	Region  string
	Service string
}

// String is the scope as the string to sign and the Credential write it:
// "20150830/us-east-1/iam/aws4_request".
func (s Scope) String() string {
	return s.Date + "/" + s.Region + "/" + s.Service + "/" + terminator
}

// Request is a request's signature as Parse read it, and what Verify
// needs of the request besides its body. It holds no reference to the
// *http.Request: headers changed after Parse change nothing.
type Request struct {
	// AccessKeyID is the key the client says it signed with.
	AccessKeyID string
	Scope       Scope
	// Time is X-Amz-Date's.
	Time time.Time
	// SignedHeaders are the names of the headers the signature covers, in
	// lower case, in the order given.
	SignedHeaders []string
	// Signature is the signature as sent, in hexadecimal. It is no
	// secret, but it admits this one request again for as long as its
	// time is within MaxSkew: keep it out of logs.
	Signature string
	// SecurityToken is X-Amz-Security-Token's value, as it is, whether
	// or not the signature covers it; empty when absent.
	SecurityToken string

	canonical     string // the canonical request up to the payload's hash
	contentSHA256 []string
	signature     [32]byte
}

// Parse reads the signature of r (its Authorization header, as AWS's
// SDKs send it) for a service and checks all that can be checked without
// the secret and the body: the header is complete and well formed, the
// signature covers host, x-amz-date and the headers that the service
// names in required (lower case: the headers whose value says what the
// request does, which an unsigned copy could change), the credential is scoped to
// service and to the day of X-Amz-Date, and that time is within MaxSkew
// of now. Its errors are *Error. r's body is neither read nor kept.
func Parse(r *http.Request, service string, now time.Time, required ...string) (*Request, error) {
	auths := r.Header.Values("Authorization")
	if len(auths) == 0 || len(auths) == 1 && strings.TrimSpace(auths[0]) == "" {
		return nil, refuse(KindMissing, "Missing Authentication Token")
	}
	if len(auths) > 1 {
		return nil, refuse(KindIncomplete, "The request has more than one Authorization header.")
	}
	params, err := authParams(auths[0])
	if err != nil {
		return nil, err
	}
	q := &Request{SecurityToken: r.Header.Get("X-Amz-Security-Token")}
	if err := q.parseCredential(params[0], service); err != nil {
		return nil, err
	}
	if err := q.parseSignedHeaders(params[1], required); err != nil {
		return nil, err
	}
	if len(params[2]) != 2*len(q.signature) {
		return nil, refuse(KindIncomplete, "The Signature must be %d hexadecimal digits.", 2*len(q.signature))
	}
	if _, err := hex.Decode(q.signature[:], []byte(params[2])); err != nil {
		return nil, refuse(KindIncomplete, "The Signature must be %d hexadecimal digits.", 2*len(q.signature))
	}
	q.Signature = params[2]
	if err := q.parseTime(r.Header.Values("X-Amz-Date"), now); err != nil {
		return nil, err
	}
	if q.canonical, err = canonicalPrefix(r, q.SignedHeaders); err != nil {
		return nil, err
	}
	q.contentSHA256 = lookup(r.Header, "x-amz-content-sha256")
	return q, nil
}

// authParams splits the Authorization header's value into its
// Credential, SignedHeaders and Signature, each required once.
func authParams(v string) ([3]string, error) {
	var params [3]string
	alg, rest, _ := strings.Cut(strings.TrimSpace(v), " ")
	if alg != Algorithm {
		// The value is not echoed: a client that sent something else in
		// this header may have sent a secret.
		return params, refuse(KindIncomplete, "The Authorization header's algorithm must be %s.", Algorithm)
	}
	names := [3]string{"Credential", "SignedHeaders", "Signature"}
	var seen [3]bool
	for piece := range strings.SplitSeq(rest, ",") {
		piece = strings.TrimSpace(piece)
		if piece == "" {
			continue
		}
		name, value, ok := strings.Cut(piece, "=")
		i := indexOf(names, name)
		switch {
		case !ok || i < 0:
			return params, refuse(KindIncomplete, "The Authorization header has a parameter other than Credential, SignedHeaders and Signature.")
		case seen[i]:
			return params, refuse(KindIncomplete, "The Authorization header has more than one '%s' parameter.", name)
		}
		params[i], seen[i] = value, true
	}
	var missing []string
	for i, name := range names {
		if !seen[i] || params[i] == "" {
			missing = append(missing, "Authorization header requires '"+name+"' parameter.")
		}
	}
	if missing != nil {
		return params, refuse(KindIncomplete, "%s", strings.Join(missing, " "))
	}
	return params, nil
}

func indexOf(names [3]string, name string) int {
	for i, n := range names {
		if n == name {
			return i
		}
	}
	return -1
}

// parseCredential reads "AKID/DATE/REGION/SERVICE/aws4_request". The
// scope is the last four parts, so that an access key ID could hold a
// slash.
func (q *Request) parseCredential(cred, service string) error {
	parts := strings.Split(cred, "/")
	n := len(parts)
	if n < 5 {
		return refuse(KindIncomplete, "The Credential must be of the form <access key ID>/<YYYYMMDD>/<region>/<service>/%s.", terminator)
	}
	q.AccessKeyID = strings.Join(parts[:n-4], "/")
	q.Scope = Scope{Date: parts[n-4], Region: parts[n-3], Service: parts[n-2]}
	switch {
	case q.AccessKeyID == "":
		return refuse(KindIncomplete, "The Credential must begin with an access key ID.")
	case parts[n-1] != terminator:
		return refuse(KindIncomplete, "Credential should be scoped with a valid terminator: '%s'.", terminator)
	case !digits(q.Scope.Date, len(DateFormat)):
		return refuse(KindIncomplete, "Credential should be scoped to a valid date, in the form YYYYMMDD.")
	case q.Scope.Region == "":
		return refuse(KindIncomplete, "Credential should be scoped to a valid region.")
	case q.Scope.Service != service:
		return refuse(KindInvalid, "Credential should be scoped to correct service: '%s'.", service)
	}
	return nil
}

// parseSignedHeaders reads SignedHeaders: names in lower case, separated
// by ";", host, x-amz-date and those of required among them.
func (q *Request) parseSignedHeaders(list string, required []string) error {
	q.SignedHeaders = strings.Split(list, ";")
	var host, date bool
	for _, name := range q.SignedHeaders {
		if name == "" || name != strings.ToLower(name) {
			return refuse(KindIncomplete, "SignedHeaders must be header names in lower case, separated by ';'.")
		}
		host = host || name == "host"
		date = date || name == "x-amz-date"
	}
	if !host {
		return refuse(KindIncomplete, "'Host' must be a 'SignedHeader' in the AWS Authorization.")
	}
	if !date {
		return refuse(KindIncomplete, "'X-Amz-Date' must be a 'SignedHeader' in the AWS Authorization.")
	}
	for _, name := range required {
		if !slices.Contains(q.SignedHeaders, name) {
			return refuse(KindIncomplete, "'%s' must be a 'SignedHeader' in the AWS Authorization.", http.CanonicalHeaderKey(name))
		}
	}
	return nil
}

// parseTime reads X-Amz-Date, which the credential's day must be the day
// of, and which must be within MaxSkew of now.
func (q *Request) parseTime(values []string, now time.Time) error {
	switch {
	case len(values) == 0:
		return refuse(KindIncomplete, "Authorization header requires existence of a 'X-Amz-Date' header.")
	case len(values) > 1:
		return refuse(KindIncomplete, "The request has more than one 'X-Amz-Date' header.")
	}
	v := values[0]
	t, err := time.Parse(TimeFormat, v)
	if err != nil || len(v) != len(TimeFormat) || !digits(v[:8], 8) || !digits(v[9:15], 6) {
		return refuse(KindIncomplete, "X-Amz-Date must be in ISO 8601 basic format, as in 20150830T123600Z.")
	}
	q.Time = t
	if q.Scope.Date != v[:8] {
		return refuse(KindInvalid, "Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: '%s' != '%s', from '%s'.",
			q.Scope.Date, v[:8], v)
	}
	now = now.UTC()
	if t.Before(now.Add(-MaxSkew)) {
		return refuse(KindInvalid, "Signature expired: %s is now earlier than %s (%s - 5 min.)",
			v, now.Add(-MaxSkew).Format(TimeFormat), now.Format(TimeFormat))
	}
	if t.After(now.Add(MaxSkew)) {
		return refuse(KindInvalid, "Signature not yet current: %s is still later than %s (%s + 5 min.)",
			v, now.Add(MaxSkew).Format(TimeFormat), now.Format(TimeFormat))
	}
	return nil
}

// digits reports whether s is n ASCII digits.
func digits(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < n; i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
