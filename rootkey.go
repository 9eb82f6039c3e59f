package kms

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"

	"github.com/ringkms/kms/internal/seal"
)

// RootKey is the root of trust: the key that seals the store's root
// secret, the 32 bytes from which every key of the service is derived
// (docs/FORMAT.md section 8). The service asks it to seal or open that
// secret when it starts and when the store is rekeyed, never per call.
//
// A MasterKey, 32 bytes the process holds, is one RootKey; a key that
// never leaves a token (internal/hsm, kmsd -master-key-pkcs11) is another,
// and an embedding application may bring its own (a cloud KMS, say).
// Seal must bind its output to aad (an AEAD's associated data) and Open
// must refuse a sealed value that was altered or sealed with another aad
// or another key. Neither may log or keep the plaintext.
type RootKey interface {
	Seal(plaintext, aad []byte) ([]byte, error)
	Open(sealed, aad []byte) ([]byte, error)
}

// keyRoot holds the root secret sealed under the RootKey (rootRecord). A
// store that has never had one is a store of a MasterKey from before root
// secrets: its root secret is the master key's 32 bytes themselves.
var keyRoot = []byte("sys/root")

// rootRecord is the value under keyRoot.
type rootRecord struct {
	V      int    `json:"v"`
	Sealed []byte `json:"sealed"`
}

// rootSecretSize is the size of the root secret.
const rootSecretSize = 32

// Seal seals plaintext under a key derived from k (AES-256-GCM), bound
// to aad: the MasterKey as a RootKey.
func (k MasterKey) Seal(plaintext, aad []byte) ([]byte, error) {
	if k.IsZero() {
		return nil, Errorf(KindInvalid, "the master key is not set")
	}
	return seal.New(seal.Derive(k.b[:], "root-seal")).Seal(plaintext, aad), nil
}

// Open opens what Seal sealed with the same key and aad.
func (k MasterKey) Open(sealed, aad []byte) ([]byte, error) {
	if k.IsZero() {
		return nil, Errorf(KindInvalid, "the master key is not set")
	}
	return seal.New(seal.Derive(k.b[:], "root-seal")).Open(sealed, aad)
}

// plainKey returns the bytes of rk when it is a MasterKey.
func plainKey(rk RootKey) ([]byte, bool) {
	switch k := rk.(type) {
	case MasterKey:
		return k.b[:], k.set
	case *MasterKey:
		if k != nil {
			return k.b[:], k.set
		}
	}
	return nil, false
}

// noRootKey reports whether rk is no key at all: nil, or a zero MasterKey.
func noRootKey(rk RootKey) bool {
	switch k := rk.(type) {
	case nil:
		return true
	case MasterKey:
		return k.IsZero()
	case *MasterKey:
		return k == nil || k.IsZero()
	}
	return false
}

// readRoot returns the value under keyRoot in st and the sealed root
// secret it holds, or nils when st has none.
func readRoot(ctx context.Context, st Store) (value, sealed []byte, err error) {
	if value, err = readRootValue(ctx, st); err != nil || value == nil {
		return nil, nil, err
	}
	var rec rootRecord
	if err := unmarshalRoot(value, &rec); err != nil {
		return nil, nil, err
	}
	return value, rec.Sealed, nil
}

// unmarshalRoot parses the value under keyRoot.
func unmarshalRoot(v []byte, rec *rootRecord) error {
	if err := json.Unmarshal(v, rec); err != nil || rec.V != 1 || len(rec.Sealed) == 0 {
		return Errorf(KindInternal, "the store's root secret record is malformed")
	}
	return nil
}

// openRoot opens the sealed root secret under rk.
func openRoot(rk RootKey, sealed []byte) ([]byte, error) {
	secret, err := rk.Open(sealed, keyRoot)
	if err != nil || len(secret) != rootSecretSize {
		clear(secret)
		return nil, &Error{Kind: KindUnauthenticated, Err: err,
			Message: "the master key is not this store's: the store's root secret does not open under it"}
	}
	return secret, nil
}

// sealRoot seals a root secret under rk, as the value of keyRoot.
func sealRoot(rk RootKey, secret []byte) ([]byte, error) {
	sealed, err := rk.Seal(secret, keyRoot)
	if err != nil {
		return nil, &Error{Kind: KindUnavailable, Err: err, Message: "the master key could not seal the root secret"}
	}
	return json.Marshal(rootRecord{V: 1, Sealed: sealed})
}

// newRootSecret returns a new random root secret.
func newRootSecret() []byte {
	b := make([]byte, rootSecretSize)
	rand.Read(b)
	return b
}

// rootSecret returns the root secret of st under rk, and the value under
// keyRoot it comes from: the one keyRoot holds, opened; for a store
// without one, a MasterKey's own bytes (and no value); for a new store and
// a key that is no MasterKey, a new one, which it writes. The caller
// clears the secret after use.
func rootSecret(ctx context.Context, st Store, rk RootKey) (secret, value []byte, err error) {
	value, sealed, err := readRoot(ctx, st)
	if err != nil {
		return nil, nil, internalError("read the root secret", err)
	}
	if value != nil {
		secret, err = openRoot(rk, sealed)
		return secret, value, err
	}
	if b, ok := plainKey(rk); ok {
		return append([]byte(nil), b...), nil, nil
	}
	fresh, err := isNewStore(ctx, st)
	if err != nil {
		return nil, nil, err
	}
	if !fresh {
		return nil, nil, Errorf(KindUnauthenticated, "this store is sealed under a plain master key, not the one given; rekey it to that key first (kmsd rekey)")
	}
	secret = newRootSecret()
	v, err := sealRoot(rk, secret)
	if err != nil {
		return nil, nil, err
	}
	// Nodes of a cluster that start together on a new store each make
	// one; the first written wins, and the others open it.
	err = st.Update(ctx, func(tx Txn) error {
		if _, err := tx.Get(keyRoot); !isNotFound(err) {
			return err // nil: another node's is there
		}
		return tx.Set(keyRoot, v)
	})
	clear(secret)
	if err != nil {
		return nil, nil, err
	}
	if value, sealed, err = readRoot(ctx, st); err != nil || value == nil {
		return nil, nil, internalError("read the root secret", err)
	}
	secret, err = openRoot(rk, sealed)
	return secret, value, err
}

// isNewStore reports whether st holds nothing a service wrote: no header
// signing key, no rekeyed keys.
func isNewStore(ctx context.Context, st Store) (bool, error) {
	fresh := true
	err := st.View(ctx, func(tx Txn) error {
		for _, k := range [][]byte{keySigningActive, keyMACKeys} {
			if _, err := tx.Get(k); err == nil {
				fresh = false
			} else if !isNotFound(err) {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return false, internalError(fmt.Sprintf("read %s", keySigningActive), err)
	}
	return fresh, nil
}
