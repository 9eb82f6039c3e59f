package sigv4

import (
	"cmp"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// canonicalPrefix returns the canonical request of r without its last
// line, the payload's hash: the method, the canonical URI, the canonical
// query string, the canonical headers of names (in that order) and the
// signed headers, each followed by a newline.
func canonicalPrefix(r *http.Request, names []string) (string, error) {
	query, err := canonicalQuery(r.URL.RawQuery)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(r.Method)
	b.WriteByte('\n')
	b.WriteString(canonicalURI(requestPath(r.URL)))
	b.WriteByte('\n')
	b.WriteString(query)
	b.WriteByte('\n')
	for _, name := range names {
		b.WriteString(name)
		b.WriteByte(':')
		for i, v := range headerValues(r, name) {
			if i > 0 {
				b.WriteByte(',')
			}
			writeTrimmed(&b, v)
		}
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	b.WriteString(strings.Join(names, ";"))
	b.WriteByte('\n')
	return b.String(), nil
}

// requestPath is the path of u as it goes on the wire, escaped: what a
// server receives and what a client sends.
func requestPath(u *url.URL) string {
	if u.Opaque == "" {
		return u.EscapedPath()
	}
	// An opaque "//host/path" is sent as an absolute URI, whose path a
	// server sees; any other opaque text is sent as it is.
	if rest, ok := strings.CutPrefix(u.Opaque, "//"); ok {
		if i := strings.IndexByte(rest, '/'); i >= 0 {
			return rest[i:]
		}
		return "/"
	}
	return u.Opaque
}

// canonicalURI is the canonical URI of an escaped path, as AWS makes it
// for every service but S3: the path normalized (empty and "." segments
// dropped, each ".." removing the segment before it; a trailing slash
// kept), then each segment URI-encoded once more. Since the path is
// already escaped, a byte that needs escaping ends encoded twice: the
// path "/documents and settings/" goes on the wire as
// "/documents%20and%20settings/" and is signed as
// "/documents%2520and%2520settings/".
func canonicalURI(path string) string {
	var segs []string
	for seg := range strings.SplitSeq(path, "/") {
		switch seg {
		case "", ".":
		case "..":
			if len(segs) > 0 {
				segs = segs[:len(segs)-1]
			}
		default:
			segs = append(segs, seg)
		}
	}
	var b strings.Builder
	for _, seg := range segs {
		b.WriteByte('/')
		writeEncoded(&b, seg)
	}
	if len(segs) == 0 || strings.HasSuffix(path, "/") {
		b.WriteByte('/')
	}
	return b.String()
}

// canonicalQuery is the canonical query string of a raw query: each name
// and value decoded ("+" is a space, as in a form) and URI-encoded, the
// pairs sorted by encoded name, then by encoded value, and joined with
// "&"; a name without "=" has an empty value. A piece that does not
// decode is an error: no two readings of such a query could agree.
func canonicalQuery(raw string) (string, error) {
	if raw == "" {
		return "", nil
	}
	type pair struct{ name, value string }
	var pairs []pair
	for piece := range strings.SplitSeq(raw, "&") {
		if piece == "" {
			continue
		}
		name, value, _ := strings.Cut(piece, "=")
		n, err := url.QueryUnescape(name)
		if err != nil {
			return "", refuse(KindInvalid, "The request's query string is malformed: a parameter name does not decode.")
		}
		v, err := url.QueryUnescape(value)
		if err != nil {
			return "", refuse(KindInvalid, "The request's query string is malformed: a parameter value does not decode.")
		}
		pairs = append(pairs, pair{encode(n), encode(v)})
	}
	slices.SortFunc(pairs, func(a, b pair) int {
		return cmp.Or(strings.Compare(a.name, b.name), strings.Compare(a.value, b.value))
	})
	var b strings.Builder
	for i, p := range pairs {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(p.name)
		b.WriteByte('=')
		b.WriteString(p.value)
	}
	return b.String(), nil
}

// headerValues returns the values of the header named name (lower case)
// in r, in the order they came. Go keeps three headers out of r.Header:
// Host (in r.Host, on a client's request in r.URL.Host when r.Host is
// empty), and on a client's request Content-Length (r.ContentLength) and
// Transfer-Encoding (r.TransferEncoding); a server's request keeps
// Content-Length in r.Header.
func headerValues(r *http.Request, name string) []string {
	switch name {
	case "host":
		if r.Host != "" {
			return []string{r.Host}
		}
		return []string{r.URL.Host}
	case "content-length":
		if vs := lookup(r.Header, name); len(vs) > 0 || r.ContentLength <= 0 {
			return vs
		}
		return []string{strconv.FormatInt(r.ContentLength, 10)}
	case "transfer-encoding":
		if vs := lookup(r.Header, name); len(vs) > 0 {
			return vs
		}
		return r.TransferEncoding
	}
	return lookup(r.Header, name)
}

// lookup returns the values of a header by its name in any letter case:
// those under its canonical key, then (in a header built as a map by
// hand) those under other spellings, in their sorted order so that the
// answer never depends on the map's.
func lookup(h http.Header, name string) []string {
	key := textproto.CanonicalMIMEHeaderKey(name)
	vs := h[key]
	var others []string
	for k := range h {
		if k != key && strings.EqualFold(k, name) {
			others = append(others, k)
		}
	}
	if len(others) == 0 {
		return vs
	}
	slices.Sort(others)
	vs = slices.Clone(vs)
	for _, k := range others {
		vs = append(vs, h[k]...)
	}
	return vs
}

// writeTrimmed writes v without its leading and trailing spaces and tabs,
// each run of spaces within it written as one.
func writeTrimmed(b *strings.Builder, v string) {
	v = strings.Trim(v, " \t")
	for i := 0; i < len(v); i++ {
		if v[i] == ' ' && i > 0 && v[i-1] == ' ' {
			continue
		}
		b.WriteByte(v[i])
	}
}

// encode is AWS's URI encoding: every byte but the unreserved characters
// of RFC 3986 (A-Z, a-z, 0-9, '-', '.', '_', '~') as %XX, in upper-case
// hexadecimal.
func encode(s string) string {
	var b strings.Builder
	writeEncoded(&b, s)
	return b.String()
}

func writeEncoded(b *strings.Builder, s string) {
	const hexDigits = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if unreserved(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
}

func unreserved(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}
