package kms

import (
	"context"
	"crypto/rand"
	"fmt"

	"github.com/ringkms/kms/internal/encryptcount"
	"github.com/ringkms/kms/internal/keytype"
)

// Encryption with held keys of the AEAD types (aes256-gcm96,
// chacha20-poly1305): under a version of the key, with associated data
// bound to the ciphertext when the caller gives some. A ciphertext is
// the version that made it and the AEAD's output (internal/keytype: the
// nonce, then the sealed text and its tag); how a protocol writes the
// two (Vault's vault:v<N>:<base64>) is the protocol's business. The
// service unwraps a key once and keeps it loaded (Service.heldKeys,
// bounded by Options.CacheSize, emptied with the other caches of a
// cluster's nodes); a key is used only after its state, read from the
// coherent cache of keys, allows it, and a destroyed key's entry is
// dropped.
//
// A batch is authorized once (one record of a refusal), then each item is
// a call of its own: its own key version, counter step, record and error.
// A record names the ring, the key and its version, never a plaintext or
// associated data.

// HeldEncryptInput encrypts plaintexts with the held key Name.
type HeldEncryptInput struct {
	Name  string
	Items []HeldPlaintext
	// Create makes the key when it does not exist, for a caller that may
	// create it (keyring.<name>.create), with the type and settings of
	// NewKey (aes256-gcm96 by default; its Name is not read).
	Create bool
	NewKey CreateHeldKeyInput
}

// HeldPlaintext is one plaintext to encrypt, with the version of the
// key to encrypt it with (0 for the latest) and the associated data to
// bind to its ciphertext (none when nil).
type HeldPlaintext struct {
	Plaintext      []byte
	KeyVersion     int
	AssociatedData []byte
}

// HeldCiphertext is the answer to one item: its ciphertext and the key
// version that made it (its number and the ID of its key), or why it
// failed.
type HeldCiphertext struct {
	Ciphertext []byte
	KeyVersion int
	KeyID      string
	// Key is the name of the held key that made it: the key an alias
	// named, when the call named one.
	Key string
	Err error
}

// HeldSealed is a ciphertext to open: the version of the key that made
// it, what the AEAD made, and the associated data it was bound to.
// Unread, when set, says why the protocol could not read the item (a
// malformed ciphertext): the item then fails with it, as an Invalid
// error, and is recorded as any failed call.
type HeldSealed struct {
	KeyVersion     int
	Ciphertext     []byte
	AssociatedData []byte
	Unread         error
}

// HeldDecryptInput decrypts ciphertexts with the held key Name.
type HeldDecryptInput struct {
	Name  string
	Items []HeldSealed
}

// HeldDecrypted is the answer to one ciphertext: its plaintext and the
// key version that opened it, or why it failed.
type HeldDecrypted struct {
	Plaintext  []byte
	KeyVersion int
	// Key is the name of the held key that was tried, whether it opened
	// the ciphertext or not: the key an alias named, when the call named
	// one.
	Key string
	Err error
}

// HeldRewrapInput encrypts again, with a version of the held key Name
// (the latest by default), what ciphertexts of it hold, without handing
// out their plaintexts.
type HeldRewrapInput struct {
	Name  string
	Items []HeldRewrapItem
}

// HeldRewrapItem is one ciphertext to encrypt again with KeyVersion (0:
// the latest), bound to the same associated data.
type HeldRewrapItem struct {
	HeldSealed
	NewVersion int
}

// HeldDataKeyInput asks for a new data key of Bits bits (128, 256 or
// 512; 0 means 256), encrypted with a version of the held key Name (0:
// the latest) bound to AssociatedData, and in the clear too when
// Plaintext is set.
type HeldDataKeyInput struct {
	Name           string
	Bits           int
	KeyVersion     int
	AssociatedData []byte
	Plaintext      bool
}

// HeldDataKey is a new data key: encrypted, and in the clear when it
// was asked for.
type HeldDataKey struct {
	Plaintext  []byte
	Ciphertext []byte
	KeyVersion int
	Key        string // the name of the held key that sealed it (HeldCiphertext.Key)
}

// EncryptWithHeldKey encrypts each plaintext with the held key in.Name and
// answers the items in order, each with its ciphertext or its error. A
// call of the latest version gets the ring's active key, rotated first
// when past its rotationPeriod or maxEncryptCount; an older version must
// be at least the key's minimum encryption version, enabled, and within
// the ring's rotationPeriod. It needs keyring.<name>.encrypt (and
// keyring.<name>.create to make the key, with in.Create).
func (s *Service) EncryptWithHeldKey(ctx context.Context, in HeldEncryptInput) ([]HeldCiphertext, error) {
	b := heldBatch{heldRef: heldRef{name: in.Name, action: transitEncryptAction, op: OpEncrypt, create: creating(in)}, accept: encrypts}
	return runHeld(s, ctx, b, len(in.Items), func(c *heldCall, i int) (out HeldCiphertext) {
		it := in.Items[i]
		return s.sealHeld(ctx, c.p, c.r, c.lower, c.action, it.Plaintext, it.AssociatedData, it.KeyVersion, nil)
	})
}

// heldBatch is a call of items that use a held key: how it names the key
// (its name, action and operation, what it makes when the key does not
// exist), and the types it serves (nil: every type).
type heldBatch struct {
	heldRef
	accept func(*ringRecord) error
}

// heldCall is what each item of a heldBatch works with: the caller, the
// key's ring and its lower-case name, and the call's action.
type heldCall struct {
	p      *Principal
	r      *ringRecord
	lower  string
	action string
}

// runHeld authorizes b, a call of n items that use the key (heldRing: one
// record of a refusal), refuses a key of a type it does not serve (recorded), and
// answers each item as item answers it, in order, the items running
// together (runBatch).
func runHeld[T any](s *Service, ctx context.Context, b heldBatch, n int, item func(c *heldCall, i int) T) ([]T, error) {
	if err := checkBatchSize(n); err != nil {
		return nil, err
	}
	b.use = true
	p, r, lower, err := s.heldRing(ctx, b.heldRef)
	if err != nil {
		return nil, err
	}
	if b.accept != nil {
		if err := b.accept(r); err != nil {
			return nil, s.recordFailure(p, b.action, lower, err)
		}
	}
	c := &heldCall{p: p, r: r, lower: lower, action: b.action}
	out := make([]T, n)
	runBatch(n, func(i int) { out[i] = item(c, i) })
	return out, nil
}

// creating is what an encrypt makes when the key does not exist: nil for
// none.
func creating(in HeldEncryptInput) *CreateHeldKeyInput {
	if !in.Create {
		return nil
	}
	return &in.NewKey
}

// sealHeld encrypts plain, bound to ad, with version v of r for p,
// recorded as action with props (and the ring, key and version), and
// answers the ciphertext and the version that made it, or the error.
func (s *Service) sealHeld(ctx context.Context, p *Principal, r *ringRecord, lower, action string, plain, ad []byte, v int,
	props map[string]any) HeldCiphertext {
	r, k, err := s.heldEncryptKey(ctx, p, r, v)
	if err != nil {
		return HeldCiphertext{Err: s.recordFailure(p, action, lower, err)}
	}
	key, err := s.heldKey(r, k)
	if err != nil {
		return HeldCiphertext{Err: err}
	}
	blob, err := key.Encrypt(plain, ad)
	if err != nil {
		return HeldCiphertext{Err: s.recordFailure(p, action, lower, keytypeError(err))}
	}
	if props == nil {
		props = make(map[string]any, 4)
	}
	props["ringId"], props["keyId"], props["version"] = r.ID, k.ID, k.Version
	act := s.newActivity(p, action, lower, true, props)
	if err := s.journal.Submit(&activityJob{Rec: act, Checks: s.encryptChecks(r, k)}); err != nil {
		return HeldCiphertext{Err: err}
	}
	return HeldCiphertext{Ciphertext: blob, KeyVersion: k.Version, KeyID: k.ID, Key: r.Name}
}

// heldEncryptKey returns the ring and the key to encrypt with for a
// call of version v (0: the latest), and counts the call against it.
func (s *Service) heldEncryptKey(ctx context.Context, p *Principal, r *ringRecord, v int) (*ringRecord, *keyRecord, error) {
	if v == 0 {
		r, k, err := s.activeKey(ctx, p, r)
		if err != nil {
			return nil, nil, err
		}
		return r, k, k.usable(r)
	}
	r, k, err := s.heldVersionToUse(ctx, r, v)
	if err != nil {
		return nil, nil, err
	}
	if d := r.Algos.AES256.period(); d > 0 && !s.now().Before(k.CreatedAt.Add(d)) {
		return nil, nil, Errorf(KindInvalid, "key version %d is past its ring's rotation period (%s): encrypt with the latest version", v, r.Algos.AES256.RotationPeriod)
	}
	limit, reason := s.encryptLimit(r)
	if err := s.counts.Count(r.ID, k.ID, limit); err == encryptcount.ErrSpent && reason == reasonNonceBound {
		return nil, nil, Errorf(KindInvalid, "key version %d has made %d encryptions, the most one version makes with random nonces: encrypt with the latest version", v, limit)
	} else if err == encryptcount.ErrSpent {
		return nil, nil, Errorf(KindInvalid, "key version %d has served its ring's maxEncryptCount (%d): encrypt with the latest version", v, limit)
	} else if err != nil {
		return nil, nil, err
	}
	return r, k, nil
}

// heldVersionToUse returns the ring and the key of version v (at least
// 1) of r to make something with (encrypt, sign, HMAC): at least the
// key's minimum encryption version, at most its latest (read afresh when
// another process may have rotated it), and enabled.
func (s *Service) heldVersionToUse(ctx context.Context, r *ringRecord, v int) (*ringRecord, *keyRecord, error) {
	switch min := r.held().MinEncryptionVersion; {
	case v < 0:
		return nil, nil, Errorf(KindInvalid, "key_version must be 0 (the latest) or a version of the key, not %d", v)
	case v < min:
		return nil, nil, Errorf(KindInvalid, "requested version for encryption is less than the minimum encryption key version (%d)", min)
	case v > r.LatestVersion:
		fresh, err := s.freshRing(ctx, r) // rotated by another process since this one cached it?
		if err != nil {
			return nil, nil, err
		}
		if v > fresh.LatestVersion {
			return nil, nil, Errorf(KindInvalid, "requested version for encryption is higher than the latest key version (%d)", fresh.LatestVersion)
		}
		r = fresh
	}
	k, err := s.keyByVersion(ctx, r, v)
	if err != nil {
		return nil, nil, err
	}
	return r, k, k.usable(r)
}

// freshRing returns r as the store has it now, not as a cache had it.
func (s *Service) freshRing(ctx context.Context, r *ringRecord) (*ringRecord, error) {
	s.rings.Remove(r.ID)
	fresh, err := s.ringByID(ctx, r.Group, r.ID)
	if err != nil {
		return nil, err
	}
	return s.ensureVersions(fresh)
}

// heldKey returns k, a key of r, loaded for use: from the cache, or
// unwrapped.
func (s *Service) heldKey(r *ringRecord, k *keyRecord) (*keytype.Key, error) {
	if key, ok := s.heldKeys.Get(k.ID); ok {
		return key, nil
	}
	return s.heldKeys.Load(k.ID, func() (*keytype.Key, error) {
		spec, err := r.keySpec()
		if err != nil {
			return nil, internalError("type of a held key", err)
		}
		raw, err := s.unwrapKey(r, k)
		if err != nil {
			return nil, err
		}
		defer clear(raw)
		key, err := keytype.Load(spec, raw)
		if err != nil {
			return nil, internalError("load a held key", err)
		}
		return key, nil
	})
}

// supports answers, for an operation of held keys of the types that can
// (can), nil when r's type is one, else an Invalid error naming what
// the type does not support.
func (r *ringRecord) supports(can func(keytype.Type) bool, what string) error {
	spec, err := r.keySpec()
	if err != nil {
		return internalError("type of a held key", err)
	}
	if !can(spec.Type()) {
		return &Error{Kind: KindInvalid, Message: fmt.Sprintf("key type %s does not support %s", spec.Type(), what), Err: ErrKeyUsage}
	}
	return nil
}

// heldVersionKey returns the key of version v of r, to open or check
// what it made: a version out of the key's range or below its minimum
// decryption version is Invalid, a disabled or destroyed one fails as
// elsewhere.
func (s *Service) heldVersionKey(ctx context.Context, r *ringRecord, v int) (*keyRecord, error) {
	if v > r.LatestVersion {
		// Another process may have rotated the key since this one
		// cached the ring.
		var err error
		if r, err = s.freshRing(ctx, r); err != nil {
			return nil, err
		}
	}
	switch {
	case v < 1:
		return nil, Errorf(KindInvalid, "invalid version %d: versions start at 1", v)
	case v > r.LatestVersion:
		return nil, Errorf(KindInvalid, "invalid ciphertext: version is too new")
	case v < max(r.held().MinDecryptionVersion, 1):
		return nil, Errorf(KindInvalid, "ciphertext or signature version is disallowed by policy (too old)")
	}
	k, err := s.keyByVersion(ctx, r, v)
	if err != nil {
		return nil, err
	}
	if err := k.usable(r); err != nil {
		if ErrorKind(err) == KindDestroyed {
			s.heldKeys.Remove(k.ID)
		}
		return nil, err
	}
	return k, nil
}

// openHeld decrypts the ciphertext in of r and returns its plaintext and
// the key that opened it. An item the protocol could not read, or one
// naming a version out of the key's range or below its minimum decryption
// version, is Invalid; one that fails authentication (altered, bound to
// other associated data, or not made with this key) is Unprocessable.
func (s *Service) openHeld(ctx context.Context, r *ringRecord, in HeldSealed) ([]byte, *keyRecord, error) {
	if in.Unread != nil {
		return nil, nil, Errorf(KindInvalid, "%v", in.Unread)
	}
	k, err := s.heldVersionKey(ctx, r, in.KeyVersion)
	if err != nil {
		return nil, nil, err
	}
	key, err := s.heldKey(r, k)
	if err != nil {
		return nil, nil, err
	}
	plain, err := key.Decrypt(in.Ciphertext, in.AssociatedData)
	if err != nil {
		return nil, nil, Errorf(KindUnprocessable, "%s", keytype.Message(err))
	}
	return plain, k, nil
}

// DecryptWithHeldKey decrypts each ciphertext with the held key in.Name and
// answers them in order, each with its plaintext or its error (see
// openHeld; a disabled or destroyed version fails as elsewhere). It
// needs keyring.<name>.decrypt.
func (s *Service) DecryptWithHeldKey(ctx context.Context, in HeldDecryptInput) ([]HeldDecrypted, error) {
	b := heldBatch{heldRef: heldRef{name: in.Name, action: transitDecryptAction, op: OpDecrypt}, accept: encrypts}
	return runHeld(s, ctx, b, len(in.Items), func(c *heldCall, i int) (out HeldDecrypted) {
		out.Key = c.r.Name
		plain, k, err := s.openHeld(ctx, c.r, in.Items[i])
		if err != nil {
			out.Err = s.recordFailure(c.p, c.action, c.lower, err)
			return out
		}
		props := map[string]any{"ringId": c.r.ID, "keyId": k.ID, "version": k.Version}
		if err := s.record(c.p, c.action, c.lower, props, nil); err != nil {
			clear(plain)
			out.Err = err
			return out
		}
		out.Plaintext, out.KeyVersion = plain, k.Version
		return out
	})
}

// RewrapWithHeldKey decrypts each ciphertext with the held key in.Name and
// encrypts its plaintext again with the item's version (the latest by
// default), answering the new ciphertexts in order; no plaintext leaves
// the service. An item is checked as a decrypt and an encrypt are, and
// recorded once, naming both keys. It needs keyring.<name>.encrypt
// (docs/PERMISSIONS.md: rewrapping hands out no plaintext, so it is
// delegated as encryption is, as Vault intends it).
func (s *Service) RewrapWithHeldKey(ctx context.Context, in HeldRewrapInput) ([]HeldCiphertext, error) {
	b := heldBatch{heldRef: heldRef{name: in.Name, action: transitRewrapAction, op: OpEncrypt}, accept: encrypts}
	return runHeld(s, ctx, b, len(in.Items), func(c *heldCall, i int) (out HeldCiphertext) {
		it := in.Items[i]
		plain, from, err := s.openHeld(ctx, c.r, it.HeldSealed)
		if err != nil {
			out.Err = s.recordFailure(c.p, c.action, c.lower, err)
			return out
		}
		defer clear(plain)
		props := map[string]any{"fromKeyId": from.ID, "fromVersion": from.Version}
		return s.sealHeld(ctx, c.p, c.r, c.lower, c.action, plain, it.AssociatedData, it.NewVersion, props)
	})
}

// GenerateHeldDataKey makes a random data key and answers it encrypted
// with the held key in.Name, and in the clear when in.Plaintext is
// set; it is an encrypt call of that key (rotation, counts and records as
// EncryptWithHeldKey). It needs keyring.<name>.encrypt.
func (s *Service) GenerateHeldDataKey(ctx context.Context, in HeldDataKeyInput) (*HeldDataKey, error) {
	bits := in.Bits
	if bits == 0 {
		bits = 256
	}
	if bits != 128 && bits != 256 && bits != 512 {
		return nil, Errorf(KindInvalid, "invalid bit length: bits must be 128, 256 or 512, not %d", in.Bits)
	}
	p, r, lower, err := s.heldRing(ctx, heldRef{name: in.Name, action: transitDataKeyAction, op: OpEncrypt, use: true})
	if err != nil {
		return nil, err
	}
	if err := encrypts(r); err != nil {
		return nil, s.recordFailure(p, transitDataKeyAction, lower, err)
	}
	key := make([]byte, bits/8)
	rand.Read(key)
	props := map[string]any{"bits": bits, "plaintextReturned": in.Plaintext}
	sealed := s.sealHeld(ctx, p, r, lower, transitDataKeyAction, key, in.AssociatedData, in.KeyVersion, props)
	if sealed.Err != nil {
		clear(key)
		return nil, sealed.Err
	}
	out := &HeldDataKey{Ciphertext: sealed.Ciphertext, KeyVersion: sealed.KeyVersion, Key: sealed.Key}
	if in.Plaintext {
		out.Plaintext = key
	} else {
		clear(key)
	}
	return out, nil
}

// encrypts refuses a held key whose type does not encrypt: the calls of
// encryption check it once per call, not per item.
func encrypts(r *ringRecord) error { return r.supports(keytype.Type.Encrypts, "encryption") }

// HeldKeyVersion is a version of a held key: its number and the ID of
// its key.
type HeldKeyVersion struct {
	Version int
	KeyID   string
}

// HeldKeyReady answers the version of the held key name that encrypts
// now (the latest, rotated first when its rotation period is over), when
// the service can encrypt with it: its store answers and takes writes
// (Ping), the key is enabled and so is that version. Otherwise the error
// says why (the store's; Disabled for the key's state or the version's).
// The ring is read afresh
// from the store, so that a rotation by another node shows at once. It
// needs keyring.<name>.read and is recorded as transit.key.read, with
// the version.
func (s *Service) HeldKeyReady(ctx context.Context, name string) (HeldKeyVersion, error) {
	p, r, lower, err := s.heldRing(ctx, heldRef{name: name, action: transitReadAction, op: OpRead, use: true})
	if err != nil {
		return HeldKeyVersion{}, err
	}
	if err := s.Ping(ctx); err != nil {
		return HeldKeyVersion{}, err
	}
	k, err := s.readyVersion(ctx, r)
	if err != nil {
		return HeldKeyVersion{}, s.recordFailure(p, transitReadAction, lower, err)
	}
	props := map[string]any{"ringId": r.ID, "keyId": k.ID, "version": k.Version}
	if err := s.record(p, transitReadAction, lower, props, nil); err != nil {
		return HeldKeyVersion{}, err
	}
	return HeldKeyVersion{Version: k.Version, KeyID: k.ID}, nil
}

// readyVersion is the key of r that encrypts now, when it may.
func (s *Service) readyVersion(ctx context.Context, r *ringRecord) (*keyRecord, error) {
	r, err := s.freshRing(ctx, r)
	if err != nil {
		return nil, err
	}
	if r.RotateDue != 0 && s.now().UnixMilli() >= r.RotateDue {
		if r, err = s.rotateOverdue(ctx, r); err != nil {
			return nil, err
		}
	}
	k, err := s.keyByID(ctx, r.ID, r.ActiveKey)
	if err != nil {
		return nil, err
	}
	return k, k.usable(r)
}
