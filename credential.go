package kms

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"slices"
	"strings"
	"time"
)

// What a caller may learn of its own credential, and the login of an API
// key by its ID and secret, for protocols whose clients ask: the clients
// of a token-based API look up and renew the token they hold, and machine
// clients log in with a pair of identifiers (an AppRole of Vault's).
//
// A description is the holder's own: it needs nothing but the credential,
// which is the proof, and answers only what the holder may know already
// (its flags, its lifetime). It is not recorded, as authenticating a call
// is not. A login is recorded (apikey.login), granted or refused.

// Credential describes a credential to its holder.
type Credential struct {
	Kind      PrincipalKind
	ID        string // the API key's ID, or the User's
	AccountID string
	Flags     []string // the flags it holds, sorted
	// IssuedAt is the API key's creation, or the access token's issue.
	IssuedAt time.Time
	// ExpiresAt is when an access token stops being accepted; zero for an
	// API key, which holds until it is deactivated or deleted.
	ExpiresAt time.Time
	// TTL is what was left of its life when it was described, by the
	// service's clock: zero for an API key.
	TTL time.Duration
}

// DescribeCredential authenticates secret, as Authenticate does, and
// describes it: an Unauthenticated error that says nothing of why for a
// secret that is no credential.
func (s *Service) DescribeCredential(ctx context.Context, secret string) (*Credential, error) {
	p, err := s.Authenticate(ctx, secret)
	if err != nil {
		return nil, err
	}
	c := &Credential{Kind: p.Kind, ID: p.ID, AccountID: p.AccountID, Flags: flagNames(p.flags)}
	err = s.store.View(ctx, func(tx Txn) error {
		if p.Kind == PrincipalAPIKey {
			k, err := getAPIKey(tx, p.ID)
			if err != nil {
				return err
			}
			c.IssuedAt = k.CreatedAt
			return nil
		}
		v, err := tx.Get(join(pfxSession, []byte(secretDigest(secret))))
		if err != nil {
			return err
		}
		var sess session
		if err := json.Unmarshal(v, &sess); err != nil {
			return err
		}
		c.IssuedAt, c.ExpiresAt = sess.CreatedAt, sess.ExpiresAt
		c.TTL = max(sess.ExpiresAt.Sub(s.now()), 0)
		return nil
	})
	if isNotFound(err) {
		return nil, errBadCredential // gone since it was authenticated
	}
	if err != nil {
		return nil, internalError("describe credential", err)
	}
	return c, nil
}

// flagNames returns the names of the flags that f grants, sorted.
func flagNames(f Flags) []string {
	var out []string
	for name, on := range f {
		if on {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// LoginAPIKey is the login of an API key by its ID and its secret: the
// secret must be that of an active API key whose ID is keyID. It answers
// the key's description; any mismatch is an Unauthenticated error that
// says nothing of why, recorded as a refused apikey.login (under the key
// whose secret was given, when it is one; the ID given is not recorded,
// since a caller may have put a secret there). The secret stays the
// credential: a login issues no other.
func (s *Service) LoginAPIKey(ctx context.Context, keyID, secret string) (*Credential, error) {
	if strings.TrimSpace(keyID) == "" || len(keyID) > 512 || secret == "" {
		return nil, Errorf(KindInvalid, "an API key's ID and its secret are required")
	}
	p, err := s.Authenticate(ctx, secret)
	switch {
	case ErrorKind(err) == KindUnauthenticated:
		return nil, s.refuse(anonymous, apiKeyLoginAction, "", map[string]any{"reason": "invalid credential"}, errBadCredential)
	case err != nil:
		return nil, err
	case p.Kind != PrincipalAPIKey || subtle.ConstantTimeCompare([]byte(p.ID), []byte(keyID)) != 1:
		return nil, s.refuse(p, apiKeyLoginAction, "", map[string]any{"reason": "key mismatch"}, errBadCredential)
	}
	c, err := s.DescribeCredential(ctx, secret)
	if err != nil {
		return nil, err
	}
	if err := s.record(p, apiKeyLoginAction, "", nil, nil); err != nil {
		return nil, err
	}
	return c, nil
}
