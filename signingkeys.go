package kms

import (
	"cmp"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"slices"
	"time"

	"github.com/ringkms/kms/internal/headersign"
)

// Header signing keys. Every header is signed with an Ed25519 key of the
// service (internal/headersign); the public halves are published (SigningKeys, GET
// /ks/signing-keys), so that anyone can check a header without asking the
// service (SigningKeySet.VerifyHeader). One key is active: it signs new
// headers. RotateSigningKey makes a new one active in one store
// transaction; the keys before it stay in the store and stay published,
// so the headers they signed keep verifying, here and elsewhere.
//
// No process ever signs with a key that is not published: a key is
// published (stored) in the transaction that makes it active, and no key
// is ever removed. In a cluster, the other processes learn of a rotation
// from the store's Watch, milliseconds after its commit, or at the latest
// at their next coherence tick (cacheMaxAge, coherence.go); until then
// they sign with the key before, which verifies as well.

// pfxSigningMeta holds what is public of a signing key beside its sealed
// seed (pfxSigning): signing key ID (hex) -> signingKeyMeta JSON. Keys made
// before it existed have none; they are published without a creation time.
var pfxSigningMeta = []byte("sys/signmeta/")

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

// openSigningKey returns the ID and the public half of the sealed signing
// key stored under k, from the verify keys when it is there.
func (s *Service) openSigningKey(k, sealed []byte) ([8]byte, ed25519.PublicKey, error) {
	var id [8]byte
	hexID := k[len(pfxSigning):]
	if n, err := hex.Decode(id[:], hexID); err != nil || n != len(id) || len(hexID) != 2*len(id) {
		return id, nil, Errorf(KindInternal, "signing key ID %q is malformed", hexID)
	}
	s.verifyMu.RLock()
	pub, ok := s.verify[id]
	s.verifyMu.RUnlock()
	if ok {
		return id, pub, nil
	}
	priv, err := s.openSeed(k, sealed)
	if err != nil {
		return id, nil, err
	}
	pub = priv.Public().(ed25519.PublicKey)
	s.verifyMu.Lock()
	s.verify[id] = pub
	s.verifyMu.Unlock()
	return id, pub, nil
}

// openSeed opens the sealed seed stored under k into its private key.
func (s *Service) openSeed(k, sealed []byte) (ed25519.PrivateKey, error) {
	seed, err := s.open(sealed, k)
	if err != nil {
		return nil, Errorf(KindUnauthenticated, "the master key is not the one this store was created with: signing key %s does not open under it", k[len(pfxSigning):])
	}
	defer clear(seed)
	return ed25519.NewKeyFromSeed(seed), nil
}

// newSigningKey is a new signing key and the store records that publish
// it: under key, its seed sealed (by sealIn, in the transaction that
// writes it); under metaKey, its signingKeyMeta.
type newSigningKey struct {
	signer        *headersign.Signer
	hexID         []byte
	key           []byte
	metaKey, meta []byte
	sealIn        func(tx Txn, plain, aad []byte) ([]byte, error)
}

func (s *Service) makeSigningKey(now time.Time) (*newSigningKey, error) {
	seed := make([]byte, ed25519.SeedSize)
	rand.Read(seed)
	defer clear(seed)
	priv := ed25519.NewKeyFromSeed(seed)
	sum := sha256.Sum256(priv.Public().(ed25519.PublicKey))
	n := &newSigningKey{signer: &headersign.Signer{Key: priv}}
	copy(n.signer.ID[:], sum[:8])
	n.hexID = []byte(hex.EncodeToString(n.signer.ID[:]))
	n.key = join(pfxSigning, n.hexID)
	n.sealIn = s.sealIn
	n.metaKey = join(pfxSigningMeta, n.hexID)
	var err error
	if n.meta, err = json.Marshal(signingKeyMeta{CreatedAt: now.UTC()}); err != nil {
		return nil, err
	}
	return n, nil
}

// write stores the key, sealed in tx, and makes it the active one.
func (n *newSigningKey) write(tx Txn) error {
	seed := n.signer.Key.Seed()
	defer clear(seed)
	sealed, err := n.sealIn(tx, seed, n.key)
	if err != nil {
		return err
	}
	if err := tx.Set(n.key, sealed); err != nil {
		return err
	}
	if err := tx.Set(n.metaKey, n.meta); err != nil {
		return err
	}
	return tx.Set(keySigningActive, n.hexID)
}

// public is the key as SigningKeys lists it.
func (n *newSigningKey) public(now time.Time) *SigningKey {
	return &SigningKey{ID: string(n.hexID), Algorithm: SigningKeyAlgorithm, Active: true, CreatedAt: now.UTC(),
		PublicKey: base64.StdEncoding.EncodeToString(n.signer.Key.Public().(ed25519.PublicKey))}
}

// useSigner makes g the signer of new headers, and its public key one
// that verifies.
func (s *Service) useSigner(g *headersign.Signer) {
	s.verifyMu.Lock()
	s.verify[g.ID] = g.Key.Public().(ed25519.PublicKey)
	s.verifyMu.Unlock()
	s.signer.Store(g)
}

// loadSigningKey reads the sealed Ed25519 keys that sign headers: the
// active one signs, older ones stay readable for verification. On a new
// store there is none yet (createSigningKey).
func (s *Service) loadSigningKey(ctx context.Context) error {
	var active []byte
	var signer *headersign.Signer
	err := s.store.View(ctx, func(tx Txn) error {
		var err error
		active, err = tx.Get(keySigningActive)
		if isNotFound(err) {
			active = nil
			return nil
		} else if err != nil {
			return err
		}
		return tx.Scan(ScanOptions{Prefix: pfxSigning}, func(k, v []byte) (bool, error) {
			if string(k[len(pfxSigning):]) != string(active) {
				_, _, err := s.openSigningKey(k, v)
				return err == nil, err
			}
			priv, err := s.openSeed(k, v)
			if err != nil {
				return false, err
			}
			signer = &headersign.Signer{Key: priv}
			hex.Decode(signer.ID[:], active)
			return true, nil
		})
	})
	if err != nil {
		return internalError("load signing key", err)
	}
	if active != nil && signer == nil {
		return Errorf(KindInternal, "active signing key %s is missing", active)
	}
	if signer != nil {
		s.useSigner(signer)
	}
	return nil
}

// createSigningKey makes the first header signing key and stores it,
// sealed, through the journal.
func (s *Service) createSigningKey() error {
	now := s.now()
	n, err := s.makeSigningKey(now)
	if err != nil {
		return internalError("make signing key", err)
	}
	// Nodes that start together on a new shared store each try; the
	// first to commit makes the key, and the others load it.
	made := false
	err = s.submit(nil, func(tx Txn) error {
		made = false
		if _, err := tx.Get(keySigningActive); err == nil || !isNotFound(err) {
			return err
		}
		made = true
		return n.write(tx)
	}, nil)
	if err != nil {
		return internalError("store signing key", err)
	}
	if !made {
		return s.loadSigningKey(context.Background())
	}
	s.useSigner(n.signer)
	return nil
}

// RotateSigningKey makes a new header signing key and makes it the one
// that signs new headers; the keys before it stay published, and the
// headers they signed keep verifying. It needs the flag "*"
// (FlagSigningKeyRotate) and is recorded as signingkey.rotate. In a
// cluster, the other processes sign with the new key within the cache
// bound (docs/OPERATIONS.md), and with the key before until then.
func (s *Service) RotateSigningKey(ctx context.Context) (*SigningKey, error) {
	p, err := s.authorize(ctx, "signingkey.rotate", "", FlagSigningKeyRotate)
	if err != nil {
		return nil, err
	}
	return s.rotateSigningKey(p)
}

// RotateStoreSigningKey is RotateSigningKey on a store that no Service of
// this process has open, as kmsd rotate-signing-key runs it: holding the
// master key is its authority. It starts a Service on st, rotates the
// signing key and records the rotation under the principal "operator",
// and closes the Service. It does not close st.
func RotateStoreSigningKey(ctx context.Context, st Store, mk RootKey) (*SigningKey, error) {
	s, err := New(st, Options{MasterKey: mk})
	if err != nil {
		return nil, err
	}
	op := &Principal{Kind: PrincipalAPIKey, ID: "operator", flags: Flags{FlagRoot: true}}
	key, err := s.rotateSigningKey(op)
	if cerr := s.Close(); err == nil && cerr != nil {
		return nil, cerr
	}
	return key, err
}

func (s *Service) rotateSigningKey(p *Principal) (*SigningKey, error) {
	now := s.now()
	n, err := s.makeSigningKey(now)
	if err != nil {
		return nil, s.recordFailure(p, "signingkey.rotate", "", internalError("make signing key", err))
	}
	prev := s.signer.Load().ID
	act := s.newActivity(p, "signingkey.rotate", "", true, map[string]any{
		"signingKeyId": string(n.hexID), "previousSigningKeyId": hex.EncodeToString(prev[:])})
	err = s.submit(act, n.write, func() {
		// On the journal's goroutine, before the next batch signs.
		s.signerMu.Lock()
		s.useSigner(n.signer)
		s.signerMu.Unlock()
	})
	if err != nil {
		return nil, err
	}
	return n.public(now), nil
}

// reloadSigner signs new headers with the key the store names active,
// when another process rotated it (coherence.go). It keeps the signer it
// has when the store cannot be read, and logs why.
func (s *Service) reloadSigner(ctx context.Context) {
	s.signerMu.Lock()
	defer s.signerMu.Unlock()
	cur := s.signer.Load()
	var active, sealed []byte
	err := s.store.View(ctx, func(tx Txn) error {
		var err error
		if active, err = tx.Get(keySigningActive); err != nil {
			return err
		}
		var id [8]byte
		if _, err := hex.Decode(id[:], active); err != nil || len(active) != 2*len(id) {
			return Errorf(KindInternal, "active signing key ID %q is malformed", active)
		}
		if id == cur.ID {
			return nil
		}
		sealed, err = tx.Get(join(pfxSigning, active))
		return err
	})
	if err != nil {
		s.log.Error().Err(err).Msg("read the active header signing key")
		return
	}
	if sealed == nil {
		return
	}
	key := join(pfxSigning, active)
	priv, err := s.openSeed(key, sealed)
	if err != nil {
		s.log.Error().Err(err).Msg("open the active header signing key")
		return
	}
	g := &headersign.Signer{Key: priv}
	hex.Decode(g.ID[:], active)
	s.useSigner(g)
	s.log.Info().Str("signingKeyId", string(active)).Msg("signing headers with the header signing key another process made active")
}

// signerStale asks the coherence goroutine to reload the signer, without
// waiting (coherence.go).
func (s *Service) signerStale() {
	select {
	case s.signerNotice <- struct{}{}:
	default:
	}
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
