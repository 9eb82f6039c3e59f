package client

import (
	"context"
	"net/http"
	"sync"

	"github.com/ringkms/kms"
)

// SigningKeys returns the public keys that sign headers (GET
// /ks/signing-keys). It needs no credential. With them, anyone checks a
// header offline, without the service and without a credential:
//
//	keys, err := c.SigningKeys(ctx)
//	...
//	v, err := keys.VerifyHeader(enc.Header, enc.Asset) // the Asset may be nil
//	if err == nil && !v.Valid && !v.KnownKey {
//		// a key made after keys were fetched: fetch them again
//	}
//
// v.Valid says whether the service issued the header unchanged and, when
// an Asset is given, whether it is the Asset the header signs, with the
// same data and parents. Keep the keys: they change only when the service
// rotates its signing key, and the old ones stay published.
func (c *Client) SigningKeys(ctx context.Context) (*kms.SigningKeySet, error) {
	return call[kms.SigningKeySet](c, ctx, req{method: http.MethodGet, path: "/ks/signing-keys"})
}

// Verifier checks headers with the published signing keys, offline: it
// fetches the keys at its first check (unless given them) and again only
// for a header that names a key it does not know, which a rotation since
// the last fetch explains (a forged header costs that one fetch too). A
// Verifier is safe for concurrent use.
type Verifier struct {
	c    *Client
	mu   sync.Mutex
	keys *kms.SigningKeySet
}

// NewVerifier returns a Verifier that fetches keys with c. keys, when not
// nil, are the keys it starts with (fetched earlier, or kept).
func (c *Client) NewVerifier(keys *kms.SigningKeySet) *Verifier {
	return &Verifier{c: c, keys: keys}
}

// VerifyHeader checks header, and asset when not nil, as
// kms.SigningKeySet.VerifyHeader does, with the keys the Verifier holds.
func (v *Verifier) VerifyHeader(ctx context.Context, header string, asset *kms.Asset) (*kms.HeaderVerification, error) {
	v.mu.Lock()
	keys := v.keys
	v.mu.Unlock()
	fetched := false
	if keys == nil {
		var err error
		if keys, err = v.fetch(ctx); err != nil {
			return nil, err
		}
		fetched = true
	}
	res, err := keys.VerifyHeader(header, asset)
	if err != nil || res.KnownKey || fetched {
		return res, err
	}
	if keys, err = v.fetch(ctx); err != nil {
		return nil, err
	}
	return keys.VerifyHeader(header, asset)
}

// fetch gets the keys from the service and keeps them.
func (v *Verifier) fetch(ctx context.Context) (*kms.SigningKeySet, error) {
	keys, err := v.c.SigningKeys(ctx)
	if err != nil {
		return nil, err
	}
	v.mu.Lock()
	v.keys = keys
	v.mu.Unlock()
	return keys, nil
}
