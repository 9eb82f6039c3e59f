package kms

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/ringkms/kms/internal/keytype"
)

// Signatures and HMACs with held keys. The asymmetric types sign and
// verify (internal/keytype: ed25519, ecdsa, rsa with PSS or PKCS #1
// v1.5, ML-DSA); every type computes HMACs, with its version's HMAC key
// (the key itself for an hmac key, derived from the key otherwise). A
// call signs or computes with a version (the latest by default, at least
// the key's minimum encryption version), and verifies with the version
// that made the signature (at least its minimum decryption version), as
// encryption and decryption do. What a protocol writes around the bytes
// (Vault's vault:v<N>: and base64) is the protocol's business.
//
// Each item of a batch is a call of its own, recorded (transit.sign,
// transit.verify, transit.hmac) with the ring, the key and its version,
// never an input, a signature or a MAC, and counted in the key's usage:
// a signature or an HMAC made as an encrypt call, a verification as a
// decrypt call. A wrong signature is an answer (Valid false), not an
// error; a signature that does not read is Invalid.

// HeldSignOptions say how to sign or verify. The zero value signs the
// input itself, hashed with sha2-256 where the type hashes, ECDSA
// signatures in ASN.1 DER and RSA ones with PSS and the largest salt.
type HeldSignOptions struct {
	// Hash is the hash of the input: sha1, sha2-224, sha2-256 (the
	// default), sha2-384, sha2-512, sha3-224, sha3-256, sha3-384,
	// sha3-512, or none (an RSA PKCS #1 v1.5 signature of a prehashed
	// input). Ed25519 and ML-DSA sign the input itself and ignore it.
	Hash string
	// Prehashed says that the input is already the hash's digest.
	Prehashed bool
	// Marshaling is asn1 (the default) or jws: an ECDSA signature as
	// r and s of fixed width.
	Marshaling string
	// Algorithm is an RSA signature's: pss (the default) or pkcs1v15;
	// SaltLength a PSS signature's: auto (the default), hash, or a
	// number of bytes.
	Algorithm  string
	SaltLength string
	// KeyTypes, when given, are the types the key must be of (a
	// protocol whose algorithms each go with certain keys): a key of
	// another type is refused (Invalid) before anything is made.
	KeyTypes []string
}

// typed is accept narrowed to o.KeyTypes.
func (o HeldSignOptions) typed(accept func(*ringRecord) error) func(*ringRecord) error {
	return func(r *ringRecord) error {
		if err := accept(r); err != nil || len(o.KeyTypes) == 0 {
			return err
		}
		spec, err := r.keySpec()
		if err != nil {
			return internalError("type of a held key", err)
		}
		if !slices.Contains(o.KeyTypes, string(spec.Type())) {
			return &Error{Kind: KindInvalid, Message: fmt.Sprintf("key %s is of type %s, not %s", r.Name, spec.Type(), strings.Join(o.KeyTypes, " or ")),
				Err: ErrKeyUsage}
		}
		return nil
	}
}

// options is o as internal/keytype takes it.
func (o HeldSignOptions) options() keytype.SignOptions {
	return keytype.SignOptions{Hash: keytype.Hash(o.Hash), Prehashed: o.Prehashed, Marshaling: keytype.Marshaling(o.Marshaling),
		Algorithm: keytype.SignatureAlgorithm(o.Algorithm), SaltLength: keytype.SaltLength(o.SaltLength)}
}

// HeldSignInput signs (or computes the HMAC of) each input of Inputs
// with the held key Name, with version KeyVersion (0: the latest).
type HeldSignInput struct {
	Name       string
	KeyVersion int
	Options    HeldSignOptions
	Inputs     [][]byte
}

// HeldSigned is the answer to one input: its signature (or MAC) and the
// key version that made it, or why it failed.
type HeldSigned struct {
	Signature  []byte
	KeyVersion int
	Key        string // the name of the held key used (an alias resolved)
	Err        error
}

// HeldVerifyInput checks each item's signature (or MAC) of its input
// with the held key Name.
type HeldVerifyInput struct {
	Name    string
	Options HeldSignOptions // for a MAC, Options.Hash only
	Items   []HeldCheck
}

// HeldCheck is one signature (or MAC) to check: the version of the key
// that made it (0: the version that signs now, for a protocol whose
// signatures do not name theirs), the signature and what it signs. Unread, when set, says
// why the protocol could not read the item: it then fails with it, as
// an Invalid error, and is recorded as any failed call.
type HeldCheck struct {
	KeyVersion int
	Signature  []byte
	Input      []byte
	Unread     error
}

// HeldVerified is the answer to one check: whether the signature holds,
// or why the check failed (a malformed signature, a version the key does
// not allow).
type HeldVerified struct {
	Valid bool
	Key   string // the name of the held key used (an alias resolved)
	Err   error
}

// SignWithHeldKey signs each input with the held key in.Name, an
// asymmetric one, and answers the signatures in order, each with its
// error. It needs keyring.<name>.sign.
func (s *Service) SignWithHeldKey(ctx context.Context, in HeldSignInput) ([]HeldSigned, error) {
	return s.produce(ctx, heldSignAction, OpSign, in.Name, in.KeyVersion, in.Inputs,
		in.Options.typed(func(r *ringRecord) error { return r.supports(keytype.Type.Signs, "signing") }),
		func(key *keytype.Key, input []byte) ([]byte, error) { return key.Sign(input, in.Options.options()) })
}

// HMACWithHeldKey computes the HMAC of each input, with in.Options.Hash
// (sha2-256 when empty; the other options are not read), under the HMAC
// key of a version of the held key in.Name (0: the latest), and answers
// them in order, each with its error. Every type has HMAC keys. It needs
// keyring.<name>.hmac.
func (s *Service) HMACWithHeldKey(ctx context.Context, in HeldSignInput) ([]HeldSigned, error) {
	return s.produce(ctx, heldHMACAction, OpHMAC, in.Name, in.KeyVersion, in.Inputs, in.Options.typed(func(*ringRecord) error { return nil }),
		func(key *keytype.Key, input []byte) ([]byte, error) {
			return key.HMAC(keytype.Hash(in.Options.Hash), input)
		})
}

// produce answers, for each input, what compute makes of it with a
// version of the held key name (0: the latest), after accept accepts the
// key's type: the calls of op, recorded as action.
func (s *Service) produce(ctx context.Context, action, op, name string, version int, inputs [][]byte,
	accept func(*ringRecord) error, compute func(*keytype.Key, []byte) ([]byte, error)) ([]HeldSigned, error) {
	b := heldBatch{heldRef: heldRef{name: name, action: action, op: op}, accept: accept}
	return runHeld(s, ctx, b, len(inputs), func(c *heldCall, i int) (out HeldSigned) {
		out.Key = c.r.Name
		r, k, err := s.heldUseKey(ctx, c.r, version)
		var key *keytype.Key
		if err == nil {
			key, err = s.heldKey(r, k)
		}
		var made []byte
		if err == nil {
			if made, err = compute(key, inputs[i]); err != nil {
				err = keytypeError(err)
			}
		}
		if err != nil {
			out.Err = s.recordFailure(c.p, action, c.lower, err)
			return out
		}
		props := map[string]any{"ringId": r.ID, "keyId": k.ID, "version": k.Version}
		if out.Err = s.record(c.p, action, c.lower, props, nil); out.Err == nil {
			out.Signature, out.KeyVersion = made, k.Version
		}
		return out
	})
}

// heldUseKey returns the ring and the key to sign or compute with for a
// call of version v of r (0: the latest, rotated first when past the
// ring's rotation period): a version at least the key's minimum
// encryption version, enabled. Unlike an encrypt, nothing is counted
// against a bound: a signature spends no nonce.
func (s *Service) heldUseKey(ctx context.Context, r *ringRecord, v int) (*ringRecord, *keyRecord, error) {
	if v == 0 {
		if r.RotateDue != 0 && s.now().UnixMilli() >= r.RotateDue {
			var err error
			if r, err = s.rotateOverdue(ctx, r); err != nil {
				return nil, nil, err
			}
		}
		k, err := s.keyByID(ctx, r.ID, r.ActiveKey)
		if err != nil {
			return nil, nil, err
		}
		return r, k, k.usable(r)
	}
	return s.heldVersionToUse(ctx, r, v)
}

// VerifyWithHeldKey checks each item's signature with the held key
// in.Name, an asymmetric one, and answers in order whether each holds.
// It needs keyring.<name>.verify.
func (s *Service) VerifyWithHeldKey(ctx context.Context, in HeldVerifyInput) ([]HeldVerified, error) {
	opts := in.Options.options()
	return s.check(ctx, in.Name, in.Items, in.Options.typed(func(r *ringRecord) error { return r.supports(keytype.Type.Signs, "verification") }),
		func(key *keytype.Key, c HeldCheck) (bool, error) { return key.Verify(c.Input, c.Signature, opts) })
}

// VerifyHMACWithHeldKey checks each item's MAC, computed with
// in.Options.Hash (sha2-256 when empty; the other options are not read)
// under the HMAC key of the version that made it, and answers in order
// whether each holds. It needs keyring.<name>.verify.
func (s *Service) VerifyHMACWithHeldKey(ctx context.Context, in HeldVerifyInput) ([]HeldVerified, error) {
	hash := keytype.Hash(in.Options.Hash)
	return s.check(ctx, in.Name, in.Items, in.Options.typed(func(*ringRecord) error { return nil }),
		func(key *keytype.Key, c HeldCheck) (bool, error) { return key.VerifyHMAC(hash, c.Input, c.Signature) })
}

// checkVersion is the key of r that checks a signature of version v:
// v's (heldVersionKey), or for 0 the version that signs now.
func (s *Service) checkVersion(ctx context.Context, r *ringRecord, v int) (*keyRecord, error) {
	if v != 0 {
		return s.heldVersionKey(ctx, r, v)
	}
	k, err := s.keyByID(ctx, r.ID, r.ActiveKey)
	if err != nil {
		return nil, err
	}
	return k, k.usable(r)
}

// check answers, for each item, whether verify holds of it with the key
// of the version that made it, after accept accepts the key's type: the
// calls of keyring.<name>.verify, recorded as transit.verify.
func (s *Service) check(ctx context.Context, name string, items []HeldCheck, accept func(*ringRecord) error,
	verify func(*keytype.Key, HeldCheck) (bool, error)) ([]HeldVerified, error) {
	b := heldBatch{heldRef: heldRef{name: name, action: heldVerifyAction, op: OpVerify}, accept: accept}
	return runHeld(s, ctx, b, len(items), func(c *heldCall, i int) (out HeldVerified) {
		out.Key = c.r.Name
		it := items[i]
		var k *keyRecord
		var valid bool
		err := it.Unread
		if err != nil {
			err = Errorf(KindInvalid, "%v", err)
		} else if k, err = s.checkVersion(ctx, c.r, it.KeyVersion); err == nil {
			var key *keytype.Key
			if key, err = s.heldKey(c.r, k); err == nil {
				if valid, err = verify(key, it); err != nil {
					err = keytypeError(err)
				}
			}
		}
		if err != nil {
			out.Err = s.recordFailure(c.p, c.action, c.lower, err)
			return out
		}
		props := map[string]any{"ringId": c.r.ID, "keyId": k.ID, "version": k.Version, "valid": valid}
		if out.Err = s.record(c.p, c.action, c.lower, props, nil); out.Err == nil {
			out.Valid = valid
		}
		return out
	})
}
