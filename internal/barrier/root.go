package barrier

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/ringkms/kms/internal/base"
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

// KeyRoot holds the root secret sealed under the RootKey (rootRecord). A
// store that has never had one is a store of a MasterKey from before root
// secrets: its root secret is the master key's 32 bytes themselves.
var KeyRoot = []byte("sys/root")

// rootRecord is the value under KeyRoot.
type rootRecord struct {
	V      int    `json:"v"`
	Sealed []byte `json:"sealed"`
}

// rootSecretSize is the size of the root secret.
const rootSecretSize = 32

// readRoot returns the value under KeyRoot in st and the sealed root
// secret it holds, or nils when st has none.
func readRoot(ctx context.Context, st base.Store) (value, sealed []byte, err error) {
	if value, err = readValue(ctx, st, KeyRoot); err != nil || value == nil {
		return nil, nil, err
	}
	var rec rootRecord
	if err := unmarshalRoot(value, &rec); err != nil {
		return nil, nil, err
	}
	return value, rec.Sealed, nil
}

// unmarshalRoot parses the value under KeyRoot.
func unmarshalRoot(v []byte, rec *rootRecord) error {
	if err := json.Unmarshal(v, rec); err != nil || rec.V != 1 || len(rec.Sealed) == 0 {
		return base.Errorf(base.KindInternal, "the store's root secret record is malformed")
	}
	return nil
}

// openRoot opens the sealed root secret under rk.
func openRoot(rk RootKey, sealed []byte) ([]byte, error) {
	secret, err := rk.Open(sealed, KeyRoot)
	if err != nil || len(secret) != rootSecretSize {
		clear(secret)
		return nil, &base.Error{Kind: base.KindUnauthenticated, Err: err,
			Message: "the master key is not this store's: the store's root secret does not open under it"}
	}
	return secret, nil
}

// sealRoot seals a root secret under rk, as the value of KeyRoot.
func sealRoot(rk RootKey, secret []byte) ([]byte, error) {
	sealed, err := rk.Seal(secret, KeyRoot)
	if err != nil {
		return nil, &base.Error{Kind: base.KindUnavailable, Err: err, Message: "the master key could not seal the root secret"}
	}
	return json.Marshal(rootRecord{V: 1, Sealed: sealed})
}

// newRootSecret returns a new random root secret.
func newRootSecret() []byte {
	b := make([]byte, rootSecretSize)
	rand.Read(b)
	return b
}

// RootSecret returns the root secret of the store under rk, and the value
// under KeyRoot it comes from: the one KeyRoot holds, opened; for a store
// without one, a MasterKey's own bytes (and no value); for a new store and
// a key that is no MasterKey, a new one, which it writes. The caller
// clears the secret after use.
func (b *Barrier) RootSecret(ctx context.Context, rk RootKey) (secret, value []byte, err error) {
	st := b.cfg.Store
	value, sealed, err := readRoot(ctx, st)
	if err != nil {
		return nil, nil, base.InternalError("read the root secret", err)
	}
	if value != nil {
		secret, err = openRoot(rk, sealed)
		return secret, value, err
	}
	if k, ok := plainKey(rk); ok {
		return append([]byte(nil), k...), nil, nil
	}
	fresh, err := b.isNewStore(ctx)
	if err != nil {
		return nil, nil, err
	}
	if !fresh {
		return nil, nil, base.Errorf(base.KindUnauthenticated, "this store is sealed under a plain master key, not the one given; rekey it to that key first (kmsd rekey)")
	}
	secret = newRootSecret()
	v, err := sealRoot(rk, secret)
	if err != nil {
		return nil, nil, err
	}
	// Nodes of a cluster that start together on a new store each make
	// one; the first written wins, and the others open it.
	err = st.Update(ctx, func(tx base.Txn) error {
		if _, err := tx.Get(KeyRoot); !isNotFound(err) {
			return err // nil: another node's is there
		}
		return tx.Set(KeyRoot, v)
	})
	clear(secret)
	if err != nil {
		return nil, nil, err
	}
	if value, sealed, err = readRoot(ctx, st); err != nil || value == nil {
		return nil, nil, base.InternalError("read the root secret", err)
	}
	secret, err = openRoot(rk, sealed)
	return secret, value, err
}

// isNewStore reports whether the store holds nothing a service wrote:
// none of the domain's marks (Config.Marks), no rekeyed keys.
func (b *Barrier) isNewStore(ctx context.Context) (bool, error) {
	fresh := true
	var reading []byte
	err := b.cfg.Store.View(ctx, func(tx base.Txn) error {
		for _, k := range append(append([][]byte(nil), b.cfg.Marks...), KeyMACKeys) {
			reading = k
			if _, err := tx.Get(k); err == nil {
				fresh = false
			} else if !isNotFound(err) {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return false, base.InternalError(fmt.Sprintf("read %s", reading), err)
	}
	return fresh, nil
}

// getIfAny returns the value under k in tx, or nil when there is none.
func getIfAny(tx base.Txn, k []byte) ([]byte, error) {
	v, err := tx.Get(k)
	if isNotFound(err) {
		return nil, nil
	}
	return v, err
}

// readValue returns the value under k in st, or nil.
func readValue(ctx context.Context, st base.Store, k []byte) ([]byte, error) {
	var v []byte
	err := st.View(ctx, func(tx base.Txn) error {
		var err error
		v, err = getIfAny(tx, k)
		return err
	})
	return v, err
}

// isNotFound reports whether err is the store's answer for a key it lacks.
func isNotFound(err error) bool { return errors.Is(err, base.ErrNotFound) }
