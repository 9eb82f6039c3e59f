package httpapi

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"

	"github.com/julienschmidt/httprouter"
)

// signingKeysMaxAge is how long a cache may keep the answer of GET
// /ks/signing-keys. A verifier that meets a header signed with a key it
// does not know fetches the keys again (docs/API.md).
const signingKeysMaxAge = 300

// GET /ks/signing-keys: public, like a JWKS document.
func (a *api) signingKeys(r *http.Request, _ httprouter.Params) (any, error) {
	set, err := a.svc.SigningKeys(r.Context())
	if err != nil {
		return nil, err
	}
	return cacheable{body: set, maxAge: signingKeysMaxAge}, nil
}

// cacheable is an answer that is the same for every caller, which caches
// may keep for maxAge seconds (httpedge.Conditional): answers sends it
// with Cache-Control and an ETag, or answers 304 to a request that names
// the ETag.
type cacheable struct {
	body   any
	maxAge int
}

func (c cacheable) Body() any { return c.body }

// NotModified sets the cache headers of the answer b in h, replacing
// no-store, and reports whether the request's If-None-Match names its ETag
// (or "*"; RFC 9110 section 13.1.2, weak comparison): then the answer is
// 304 with no body.
func (c cacheable) NotModified(h http.Header, r *http.Request, b []byte) bool {
	sum := sha256.Sum256(b)
	etag := `"` + hex.EncodeToString(sum[:16]) + `"`
	h.Set("Cache-Control", "public, max-age="+strconv.Itoa(c.maxAge))
	h.Set("ETag", etag)
	for _, line := range r.Header.Values("If-None-Match") {
		for tag := range strings.SplitSeq(line, ",") {
			tag = strings.TrimPrefix(strings.TrimSpace(tag), "W/")
			if tag == etag || tag == "*" {
				return true
			}
		}
	}
	return false
}
