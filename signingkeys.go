package kms

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"slices"
	"time"

	"github.com/ringkms/kms/internal/headersign"
	"github.com/ringkms/kms/internal/seal"
)

// Header signing keys. Every header is signed with an Ed25519 key of the
// service (internal/headersign); the public halves are published (SigningKeys, GET
// /ks/signing-keys), so that anyone can check a header without asking the
// service (SigningKeySet.VerifyHeader). One key is active: it signs new
// headers. RotateSigningKey makes a new one active in one store
// transaction; the keys before it stay in the store and stay published,
// so the headers they signed keep verifying, here and elsewhere. A key
// may also be held outside the store, in a PKCS#11 token
// (Options.SigningKey): the store then has its public key only, and it
// is published the same way. Which key a process signs with, and how it
// follows a rotation, is in signer.go.
//
// No process ever signs with a key that is not published: a key is
// published (stored) in the transaction that makes it active, and no key
// is ever removed. In a cluster, the other processes learn of a rotation
// from the store's Watch, milliseconds after its commit, or at the latest
// at their next coherence tick (cacheMaxAge, coherence.go); until then
// they sign with the key before, which verifies as well.

// signingKeyMeta is the stored record of pfxSigningMeta.
type signingKeyMeta struct {
	CreatedAt time.Time `json:"createdAt"`
}

// SigningKey is a public header signing key.
type SigningKey struct {
	// ID is the key's ID as headers carry it (bytes 2..9): the first 8
	// bytes of SHA-256 of the public key, as 16 lower-case hex characters.
	ID string `json:"id"`
	// Algorithm is "Ed25519".
	Algorithm string `json:"algorithm"`
	// PublicKey is the 32-byte Ed25519 public key, in standard base64.
	PublicKey string `json:"publicKey"`
	// CreatedAt is when the key was made; zero (absent in JSON) for a key
	// made before the service recorded it.
	CreatedAt time.Time `json:"createdAt,omitzero"`
	// Active is true for the key that signs new headers.
	Active bool `json:"active"`
}

// SigningKeyAlgorithm is the Algorithm of every SigningKey.
const SigningKeyAlgorithm = "Ed25519"

// SigningKeySet is every header signing key of the service, oldest first.
type SigningKeySet struct {
	Keys []SigningKey `json:"keys"`
}

// FlagSigningKeyRotate is the flag RotateSigningKey needs: the root flag,
// since the signing key vouches for every header of every ring.
const FlagSigningKeyRotate = FlagRoot

// SigningKeys returns every header signing key, as the store holds them:
// a key is here from the commit that made it, on every process of a
// cluster. It needs no principal and records nothing: the keys are
// public, like a JWKS document.
func (s *Service) SigningKeys(ctx context.Context) (*SigningKeySet, error) {
	set := &SigningKeySet{Keys: []SigningKey{}}
	err := s.store.View(ctx, func(tx Txn) error {
		set.Keys = set.Keys[:0]
		active, err := tx.Get(keySigningActive)
		if err != nil && !isNotFound(err) {
			return err
		}
		created := map[string]time.Time{}
		err = tx.Scan(ScanOptions{Prefix: pfxSigningMeta}, func(k, v []byte) (bool, error) {
			var m signingKeyMeta
			if err := json.Unmarshal(v, &m); err != nil {
				return false, Errorf(KindInternal, "signing key record %q is malformed", k)
			}
			created[string(k[len(pfxSigningMeta):])] = m.CreatedAt
			return true, nil
		})
		if err != nil {
			return err
		}
		return tx.Scan(ScanOptions{Prefix: pfxSigning}, func(k, v []byte) (bool, error) {
			id, pub, err := s.openSigningKey(k, v)
			if err != nil {
				return false, err
			}
			hexID := hex.EncodeToString(id[:])
			set.Keys = append(set.Keys, SigningKey{ID: hexID, Algorithm: SigningKeyAlgorithm,
				PublicKey: base64.StdEncoding.EncodeToString(pub), CreatedAt: created[hexID], Active: hexID == string(active)})
			return true, nil
		})
	})
	if err != nil {
		return nil, internalError("read signing keys", err)
	}
	slices.SortFunc(set.Keys, func(a, b SigningKey) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return set, nil
}

// openSigningKey returns the ID and the public half of the signing key
// stored under k, from the verify keys when it is there.
func (s *Service) openSigningKey(k, sealed []byte) ([8]byte, ed25519.PublicKey, error) {
	id, err := signingKeyID(k)
	if err != nil {
		return id, nil, err
	}
	s.verifyMu.RLock()
	pub, ok := s.verify[id]
	s.verifyMu.RUnlock()
	if ok {
		return id, pub, nil
	}
	sk, err := openStoredKey(s.barrier.Open, k, sealed)
	if err != nil {
		return id, nil, err
	}
	s.addVerifyKey(id, sk.pub)
	return id, sk.pub, nil
}

// addVerifyKey keeps pub, the public key of signing key id, for checks.
func (s *Service) addVerifyKey(id [8]byte, pub ed25519.PublicKey) {
	s.verifyMu.Lock()
	s.verify[id] = pub
	s.verifyMu.Unlock()
}

// signingKeyID returns the ID of the signing key stored under k.
func signingKeyID(k []byte) ([8]byte, error) {
	var id [8]byte
	hexID := k[len(pfxSigning):]
	if n, err := hex.Decode(id[:], hexID); err != nil || n != len(id) || len(hexID) != 2*len(id) {
		return id, Errorf(KindInternal, "signing key ID %q is malformed", hexID)
	}
	return id, nil
}

// A signing key is stored under pfxSigning + its ID (hex) sealed, the
// value bound to that key: for a key of the store's own, its 32-byte
// seed; for a key held outside the store (Options.SigningKey), a
// heldKeyRecord, its public key and where it is held, and never a
// private key. Either way the public key a process finds there is the
// one the master key's holder stored: the store cannot swap in one of its
// own, nor move a key to another ID. A store of an older version, which
// knows seeds only, refuses to start on a store whose active key is held
// outside it ("active signing key ... is missing" at worst), and never
// signs with another key meanwhile.

// heldKeyRecord is the sealed value of a key held outside the store. It
// is JSON, longer than a seed, which tells the two apart.
type heldKeyRecord struct {
	V         int    `json:"v"`             // heldKeyVersion
	PublicKey []byte `json:"publicKey"`     // the Ed25519 public key, 32 bytes (base64 in JSON)
	URI       string `json:"uri,omitempty"` // where the key is held: Options.SigningKeyURI
}

// heldKeyVersion is the version of heldKeyRecord.
const heldKeyVersion = 1

// storedKey is a signing key as the store holds it.
type storedKey struct {
	id   [8]byte
	pub  ed25519.PublicKey
	priv ed25519.PrivateKey // a key of the store's own: its seed, opened; nil for a key held outside
	uri  string             // where a key held outside the store is, as recorded
}

// held reports whether the key is held outside the store: the store has
// its public key only.
func (k *storedKey) held() bool { return k.priv == nil }

// knownVerifyKey reports whether the Service holds the public key of
// signing key id.
func (s *Service) knownVerifyKey(id [8]byte) bool {
	s.verifyMu.RLock()
	_, ok := s.verify[id]
	s.verifyMu.RUnlock()
	return ok
}

// readSigningKeys reads the signing keys of st: each must open with open
// (which checks the master key), but for one that known (when not nil)
// says was opened before. It hands each key it opens to add (when not
// nil), and returns the active one: nil on a new store, which has none
// yet.
func readSigningKeys(ctx context.Context, st Store, open func(sealed, aad []byte) ([]byte, error), known func([8]byte) bool, add func(*storedKey)) (*storedKey, error) {
	var activeHex []byte
	var active *storedKey
	err := st.View(ctx, func(tx Txn) error {
		var err error
		active = nil
		activeHex, err = tx.Get(keySigningActive)
		if isNotFound(err) {
			activeHex = nil
			return nil
		} else if err != nil {
			return err
		}
		return tx.Scan(ScanOptions{Prefix: pfxSigning}, func(k, v []byte) (bool, error) {
			isActive := string(k[len(pfxSigning):]) == string(activeHex)
			if !isActive && known != nil {
				if id, err := signingKeyID(k); err == nil && known(id) {
					return true, nil
				}
			}
			sk, err := openStoredKey(open, k, v)
			if err != nil {
				return false, err
			}
			if add != nil {
				add(sk)
			}
			if isActive {
				active = sk
			}
			return true, nil
		})
	})
	if err != nil {
		return nil, internalError("load signing key", err)
	}
	if activeHex != nil && active == nil {
		return nil, Errorf(KindInternal, "active signing key %s is missing", activeHex)
	}
	return active, nil
}

// openStoredKey opens the signing key sealed under k, with open.
func openStoredKey(open func(sealed, aad []byte) ([]byte, error), k, sealed []byte) (*storedKey, error) {
	id, err := signingKeyID(k)
	if err != nil {
		return nil, err
	}
	plain, err := open(sealed, k)
	if err != nil {
		return nil, Errorf(KindUnauthenticated, "the master key is not the one this store was created with: signing key %s does not open under it", k[len(pfxSigning):])
	}
	defer clear(plain)
	sk := &storedKey{id: id}
	if len(plain) == ed25519.SeedSize {
		sk.priv = ed25519.NewKeyFromSeed(plain)
		sk.pub = sk.priv.Public().(ed25519.PublicKey)
		return sk, nil
	}
	var rec heldKeyRecord
	if err := json.Unmarshal(plain, &rec); err != nil || rec.V != heldKeyVersion || len(rec.PublicKey) != ed25519.PublicKeySize {
		return nil, Errorf(KindInternal, "signing key record %s is malformed", k[len(pfxSigning):])
	}
	if headersign.KeyID(rec.PublicKey) != id {
		return nil, Errorf(KindInternal, "signing key record %s holds the public key of another key", k[len(pfxSigning):])
	}
	sk.pub, sk.uri = rec.PublicKey, rec.URI
	return sk, nil
}

// HeaderVerification is what an offline check of a header found
// (SigningKeySet.VerifyHeader).
type HeaderVerification struct {
	// Valid is true when the header's signature verifies under one of
	// the keys and, when an Asset was given, that Asset is the one the
	// header signs, with the same data and parents.
	Valid bool `json:"valid"`
	// Message says which check failed, when Valid is false.
	Message string `json:"message,omitempty"`

	Version  int       `json:"version"`
	KeyID    string    `json:"keyId"`    // the signing key the header names
	IssuedAt time.Time `json:"issuedAt"` // when the service issued it
	Hash     string    `json:"hash"`     // the hash it belongs to
	// KnownKey is false when KeyID is not among the keys: fetch them
	// again (the service may have rotated its key since they were
	// fetched), and if it is still missing, the service did not sign it.
	KnownKey bool `json:"knownKey"`
	// AssetID is the Asset the header signs; empty when it signs none.
	AssetID string `json:"assetId,omitempty"`
	// AssetChecked is true when an Asset was given and compared.
	AssetChecked bool `json:"assetChecked"`
}

// VerifyHeader checks, with the public keys of ks alone and no call to
// the service, that the service issued header unchanged: its Ed25519
// signature (docs/FORMAT.md section 4) verifies under the key it names.
// When asset is not nil, it also checks that the header signs that Asset
// (its ID) with that data and those parents (the Asset digest of
// docs/FORMAT.md section 4.1). The Asset's data is encoded as the service
// encodes it: numbers decoded as float64 or json.Number re-encode to the
// text the service wrote. A header that is not one (bad encoding, wrong
// length, unknown version) and an Asset whose parents are not Asset IDs
// are Invalid errors; every other failure is Valid false with a Message.
func (ks *SigningKeySet) VerifyHeader(header string, asset *Asset) (*HeaderVerification, error) {
	h, _, err := decodeHeader(header)
	if err != nil {
		return nil, err
	}
	res := &HeaderVerification{Version: h.version, KeyID: hex.EncodeToString(h.signID[:]),
		IssuedAt: time.UnixMilli(h.issuedMs).UTC(), Hash: b64String(h.hash)}
	if h.asset != nil {
		res.AssetID = hex.EncodeToString(h.asset.id[:])
	}
	var data json.RawMessage
	var parents []string
	if asset != nil {
		if data, err = canonicalData(asset.Data); err != nil {
			return nil, err
		}
		if parents, err = cleanParents(asset.Parents); err != nil {
			return nil, err
		}
	}
	var pub ed25519.PublicKey
	for _, k := range ks.Keys {
		if k.ID == res.KeyID {
			b, err := base64.StdEncoding.DecodeString(k.PublicKey)
			if err != nil || len(b) != ed25519.PublicKeySize {
				return nil, Errorf(KindInvalid, "signing key %s: publicKey is not a base64 Ed25519 public key", k.ID)
			}
			pub, res.KnownKey = b, true
			break
		}
	}
	switch {
	case !res.KnownKey:
		res.Message = "header names signing key " + res.KeyID + ", which is not among the keys given"
	case !h.signedBy(pub):
		res.Message = "header signature does not verify: it was altered or not issued by this service"
	case asset == nil:
		res.Valid = true
	case h.asset == nil:
		res.AssetChecked = true
		res.Message = "header signs no asset"
	case res.AssetID != asset.ID:
		res.AssetChecked = true
		res.Message = "header signs asset " + res.AssetID + ", not " + asset.ID
	default:
		res.AssetChecked = true
		if assetDigest(data, parents) != h.asset.digest {
			res.Message = "asset failed verification: the data or parents of asset " + res.AssetID + " differ from those the header signed"
		} else {
			res.Valid = true
		}
	}
	return res, nil
}

// signingKeyOpens checks that the active header signing key of st, if it
// has one yet, opens under sealer: the proof that a master key's own
// bytes are those of a store without a root secret of its own (barrierOf).
func signingKeyOpens(ctx context.Context, st Store, sealer *seal.Sealer) error {
	var active, sealed []byte
	err := st.View(ctx, func(tx Txn) error {
		var err error
		if active, err = tx.Get(keySigningActive); err != nil {
			return err
		}
		sealed, err = tx.Get(join(pfxSigning, active))
		return err
	})
	if isNotFound(err) {
		return nil
	}
	if err != nil {
		return internalError("read the signing key", err)
	}
	seed, err := sealer.Open(sealed, join(pfxSigning, active))
	clear(seed)
	if err != nil {
		return Errorf(KindUnauthenticated, "the master key is not the one this store was created with: signing key %s does not open under it", active)
	}
	return nil
}
