package kms

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"time"
)

// APIKey is a credential of an Account. Key, the secret, is set only in the
// answer to its creation; the service keeps only its SHA-256 digest.
type APIKey struct {
	Key        string         `json:"key,omitempty"`
	KeyID      string         `json:"keyid"`
	Active     bool           `json:"active"`
	AccountID  string         `json:"accountId"`
	References APIKeyRefs     `json:"references"`
	Flags      Flags          `json:"flags"`
	Props      map[string]any `json:"props"`
	CreatedAt  time.Time      `json:"createdAt"`
	UpdatedAt  time.Time      `json:"updatedAt"`
}

// APIKeyRefs are the references of an API key.
type APIKeyRefs struct {
	AccountID string `json:"accountId"`
}

// apiKeyRecord is an APIKey as stored: the digest in place of the secret.
type apiKeyRecord struct {
	APIKey
	Digest string `json:"digest"`
}

// APIKeyInput creates an API key.
type APIKeyInput struct {
	// AccountID names the Account; with AccountByUID it is the Account's
	// UID instead.
	AccountID    string
	AccountByUID bool
	Flags        Flags
	Props        map[string]any
}

// apiKeyPrefix starts every generated API key secret.
const apiKeyPrefix = "rk_"

// minSecretLen is the shortest API key secret accepted (bootstrap keys).
const minSecretLen = 32

func newSecret(prefix string) string {
	var b [32]byte
	rand.Read(b[:])
	return prefix + base64.RawURLEncoding.EncodeToString(b[:])
}

func secretDigest(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// CreateAPIKey creates an API key for an Account and returns it in full,
// with its secret: the only time the secret is shown. It needs the flag
// apikeys.write, and the caller may grant only flags it holds itself.
func (s *Service) CreateAPIKey(ctx context.Context, in APIKeyInput) (*APIKey, error) {
	p, err := s.authorize(ctx, "apikey.create", "", FlagAPIKeysWrite)
	if err != nil {
		return nil, err
	}
	flags, err := in.Flags.normalize()
	if err != nil {
		return nil, err
	}
	for name, granted := range flags {
		if granted && !p.Can(name) {
			return nil, Errorf(KindPermissionDenied, "cannot grant flag %q: the caller does not hold it", name)
		}
	}
	return s.createAPIKey(p, in, flags, newSecret(apiKeyPrefix))
}

func (s *Service) createAPIKey(p *Principal, in APIKeyInput, flags Flags, secret string) (*APIKey, error) {
	if in.AccountID == "" {
		return nil, Errorf(KindInvalid, "accountId is required")
	}
	now := s.now()
	k := &apiKeyRecord{
		APIKey: APIKey{KeyID: newID(now), Active: true, Flags: flags, Props: orEmpty(in.Props), CreatedAt: now, UpdatedAt: now},
		Digest: secretDigest(secret),
	}
	act := s.newActivity(p, "apikey.create", "", true, map[string]any{"apikeyId": k.KeyID})
	err := s.journal.submit(act, func(tx Txn) error {
		a, err := getAccount(tx, in.AccountID, in.AccountByUID)
		if err != nil {
			return err
		}
		k.AccountID, k.References.AccountID = a.ID, a.ID
		return putAPIKey(tx, k)
	}, nil)
	if err != nil {
		return nil, err
	}
	out := k.APIKey
	out.Key = secret
	return &out, nil
}

func putAPIKey(tx Txn, k *apiKeyRecord) error {
	v, err := json.Marshal(k)
	if err != nil {
		return err
	}
	if err := tx.Set(join(pfxAPIKey, []byte(k.KeyID)), v); err != nil {
		return err
	}
	if err := tx.Set(join(pfxAPIDigest, []byte(k.Digest)), []byte(k.KeyID)); err != nil {
		return err
	}
	for _, ring := range k.Flags.rings() {
		if err := tx.Set(join(pfxAPIRing, []byte(ring), sep, []byte(k.KeyID)), nil); err != nil {
			return err
		}
	}
	return nil
}

func getAPIKey(tx Txn, id string) (*apiKeyRecord, error) {
	v, err := tx.Get(join(pfxAPIKey, []byte(id)))
	if isNotFound(err) {
		return nil, Errorf(KindNotFound, "API key not found")
	} else if err != nil {
		return nil, err
	}
	var k apiKeyRecord
	if err := json.Unmarshal(v, &k); err != nil {
		return nil, err
	}
	return &k, nil
}
