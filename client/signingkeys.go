package client

import (
	"context"
	"net/http"
	"sync"
	"time"

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
// the last fetch explains. Forged headers cannot make it a way to flood the
// service: it fetches at most once every MinRefetch, and checks that meet
// an unknown key meanwhile share that fetch (waiting for it, at most
// MinRefetch). A Verifier is safe for concurrent use.
type Verifier struct {
	c        *Client
	mu       sync.Mutex
	keys     *kms.SigningKeySet
	last     time.Time     // when the last fetch ended; zero before the first
	fetching chan struct{} // closed when the fetch under way ends; nil when none
}

// MinRefetch is the least time between two fetches of a Verifier.
const MinRefetch = time.Second

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
	if keys != nil {
		res, err := keys.VerifyHeader(header, asset)
		if err != nil || res.KnownKey {
			return res, err
		}
	}
	keys, err := v.refetch(ctx, keys)
	if err != nil {
		return nil, err
	}
	return keys.VerifyHeader(header, asset)
}

// refetch returns keys newer than had: those of a fetch that ended since
// had was read, or of a fetch of its own, made once MinRefetch has passed
// since the last; concurrent callers share one fetch.
func (v *Verifier) refetch(ctx context.Context, had *kms.SigningKeySet) (*kms.SigningKeySet, error) {
	for {
		v.mu.Lock()
		if v.keys != had {
			keys := v.keys
			v.mu.Unlock()
			return keys, nil
		}
		if ch := v.fetching; ch != nil {
			v.mu.Unlock()
			select {
			case <-ch:
				continue // its keys, or, when it failed, a fetch of this call's
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		ch := make(chan struct{})
		v.fetching = ch
		wait := time.Until(v.last.Add(MinRefetch))
		v.mu.Unlock()

		keys, asked, err := v.fetchAfter(ctx, wait)
		v.mu.Lock()
		v.fetching = nil
		if asked {
			v.last = time.Now()
		}
		if err == nil {
			v.keys = keys
		}
		v.mu.Unlock()
		close(ch)
		return keys, err
	}
}

// fetchAfter waits wait (when above 0), then gets the keys from the
// service; asked says whether it asked (ctx was not done first).
func (v *Verifier) fetchAfter(ctx context.Context, wait time.Duration) (keys *kms.SigningKeySet, asked bool, err error) {
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
	}
	keys, err = v.c.SigningKeys(ctx)
	return keys, true, err
}
