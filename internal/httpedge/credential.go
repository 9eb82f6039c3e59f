package httpedge

import (
	"net/http"
	"strings"

	"github.com/ringkms/kms/internal/base"
)

// Bearer is the credential of the request's one
// "Authorization: Bearer <secret>" header (BearerToken). Without one, or
// with another form, it is an error of kind Unauthenticated that says
// what to send.
func Bearer(r *http.Request) (string, error) {
	values := r.Header.Values("Authorization")
	switch len(values) {
	case 0:
		return "", base.Errorf(base.KindUnauthenticated, "missing credential: send Authorization: Bearer <API key>")
	case 1:
	default:
		return "", base.Errorf(base.KindUnauthenticated, "send one Authorization header, not %d", len(values))
	}
	secret, ok := BearerToken(values[0])
	if !ok {
		return "", base.Errorf(base.KindUnauthenticated, "malformed Authorization header: use Bearer <API key>")
	}
	return secret, nil
}

// BearerToken returns the token of an Authorization header value of the
// form "Bearer <token>": the scheme compared case-insensitively (RFC 7235),
// then exactly one space and a non-empty token.
func BearerToken(value string) (string, bool) {
	const scheme = "Bearer"
	if len(value) < len(scheme)+2 || !strings.EqualFold(value[:len(scheme)], scheme) || value[len(scheme)] != ' ' {
		return "", false
	}
	token := value[len(scheme)+1:]
	if token[0] == ' ' || token[0] == '\t' {
		return "", false
	}
	return token, true
}

// TokenOrBearer returns a Config.Credential that takes the secret of the
// request header named header, sent once and as it is (Vault's
// X-Vault-Token), and else of Bearer. A secret with space around it is
// refused.
func TokenOrBearer(header string) func(r *http.Request) (string, error) {
	header = http.CanonicalHeaderKey(header)
	return func(r *http.Request) (string, error) {
		var secret string
		switch tokens := r.Header.Values(header); len(tokens) {
		case 0:
			var err error
			if secret, err = Bearer(r); err != nil {
				return "", err
			}
		case 1:
			secret = tokens[0]
		default:
			return "", base.Errorf(base.KindUnauthenticated, "send one %s header, not %d", header, len(tokens))
		}
		if secret == "" || strings.TrimSpace(secret) != secret {
			return "", base.Errorf(base.KindUnauthenticated, "malformed credential: send it without space around it")
		}
		return secret, nil
	}
}
