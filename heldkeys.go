package kms

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"slices"

	"github.com/ringkms/kms/internal/keytype"
)

// Held keys. The service holds the keys of a held key (an /asym ring
// made as one: Origin originHeld) for its own use: they encrypt, decrypt,
// sign and compute HMACs inside the service for callers who never see
// them. Such a
// key never leaves the service: the /asym routes (GetAsymKey, RotateAsym)
// answer its metadata without its material (AsymKey.Held), and the one
// way out is the export of a key made exportable (at its creation or by
// its configuration, never unset, recorded), by a caller holding
// keyring.<name>.export, which no other flag implies (Flags.Allows):
// ExportHeldKey and ExportAsymKey, recorded as transit.key.export and
// asym.key.export, granted or refused.
//
// An /asym ring made by CreateAsymKeyRing is the other kind: its answer
// handed out its first key and its private key, and its reads and
// rotations answer its keys. Transit never uses such a ring
// (errHandedOut), so that whoever may create a ring cannot make one ahead
// of an application's first transit call and hold the keys it will seal
// with.
//
// Rings are marked at their creation (Origin). Of the rings made before
// the mark was kept, those made by transit have transit settings
// (Transit, set by createTransitRing from the start) and those made by
// CreateAsymKeyRing have none, unless transit's configuration was applied
// to one since (earlier releases let transit use such rings): that one
// reads as held from now on, though its first keys were handed out at its
// creation (docs/TRANSIT.md says what to do about it).

// ExportedKeys are versions of an exportable held key, in the clear.
type ExportedKeys struct {
	Name string // the ring's name
	Type string // the key's type (HeldKey.Type)
	Keys []ExportedKey
}

// ExportedKey is one version of a held key: its material (the 32 bytes
// of an aes256-gcm96 key; internal/keytype's encoding of the others),
// and, for ExportHeldKey, the text of the kind asked for. The export of
// a public key, which needs no more than keyring.<name>.read, answers
// the text alone: Key is nil.
type ExportedKey struct {
	KeyID   string
	Version int
	Key     []byte
	Text    string
}

// The kinds of export of held keys (ExportHeldKeyInput.Kind).
const (
	ExportEncryptionKey = "encryption-key" // an AEAD key's bytes, in base64 (an rsa key's PKCS #1 PEM)
	ExportSigningKey    = "signing-key"    // an asymmetric key's private key
	ExportHMACKey       = "hmac-key"       // the version's HMAC key, in base64: every type has one
	ExportPublicKey     = "public-key"     // an asymmetric key's public key
)

// ExportHeldKeyInput names versions of a held key to export, and what
// of them.
type ExportHeldKeyInput struct {
	Name string
	// Kind is what to export (ExportEncryptionKey...; empty is
	// ExportEncryptionKey). The public key of an asymmetric key is no
	// secret: its export needs keyring.<name>.read only, exportable or
	// not; every other kind is the export of an exportable key.
	Kind string
	// Version is the version to export; 0 for every version from the
	// key's minimum decryption version on that is enabled.
	Version int
	// Latest exports the latest version (Version must be 0).
	Latest bool
}

// ExportHeldKey answers versions of the held key in.Name, which
// must be exportable (see ExportHeldKeyInput). A version below the
// key's minimum decryption version is Invalid; a disabled or destroyed
// one fails as it does elsewhere. It needs keyring.<name>.export, which
// no other ring flag implies (Flags.Allows); the export is recorded as
// transit.key.export, granted or refused, with the versions it answered.
// The caller clears the keys once answered (ExportedKeys.Clear).
func (s *Service) ExportHeldKey(ctx context.Context, in ExportHeldKeyInput) (*ExportedKeys, error) {
	if in.Version < 0 || in.Latest && in.Version != 0 {
		return nil, Errorf(KindInvalid, "invalid key version: want a version of the key, the latest, or none for all")
	}
	kind, err := keytype.ParseExportKind(cmp.Or(in.Kind, ExportEncryptionKey))
	if err != nil {
		return nil, Errorf(KindInvalid, "%s", keytype.Message(err))
	}
	x := exportCall{action: transitExportAction, kind: kind}
	return s.exportKeys(ctx, RingRef{Name: in.Name}, x, func(r *ringRecord) ([]*keyRecord, error) {
		lowest := max(r.held().MinDecryptionVersion, 1)
		version := in.Version
		switch {
		case in.Latest:
			version = r.LatestVersion
		case version == 0:
			return s.exportableVersions(ctx, r, lowest)
		}
		if version < lowest {
			return nil, Errorf(KindInvalid, "version for export is below minimum decryption version")
		}
		k, err := s.keyByVersion(ctx, r, version)
		if err != nil {
			return nil, err
		}
		return []*keyRecord{k}, k.usable(r)
	})
}

// ExportAsymKey answers the key keyID of the /asym ring of a held key
// that is exportable, with its key in the clear (GetAsymKey answers it
// without). It is ExportHeldKey of that key's version: the same flag,
// keyring.<name>.export, the same rules, recorded as asym.key.export.
func (s *Service) ExportAsymKey(ctx context.Context, ref RingRef, keyID string) (*AsymKey, error) {
	var k *keyRecord
	out, err := s.exportKeys(ctx, ref, exportCall{action: asymExportAction}, func(r *ringRecord) ([]*keyRecord, error) {
		if _, ok := parseID(keyID); !ok {
			return nil, Errorf(KindNotFound, "key not found") // no key has such an ID
		}
		var err error
		if k, err = s.keyByID(ctx, r.ID, keyID); err != nil {
			return nil, err
		}
		if k.Version < max(r.held().MinDecryptionVersion, 1) {
			return nil, Errorf(KindInvalid, "version for export is below minimum decryption version")
		}
		return []*keyRecord{k}, k.usable(r)
	})
	if err != nil {
		return nil, err
	}
	defer out.Clear()
	typ := "AES256"
	if k.Type != AlgoAES256 {
		typ = k.Type
	}
	return &AsymKey{Type: typ, ID: k.ID, Props: orEmpty(k.Props), KeyData: AsymKeyData{Key: base64.StdEncoding.EncodeToString(out.Keys[0].Key)},
		State: k.state(), Version: k.Version}, nil
}

// exportCall is what an exportCall answers: its action, and the kind of text of
// ExportHeldKey (none for the raw keys of ExportAsymKey).
type exportCall struct {
	action string
	kind   keytype.ExportKind
}

// exportKeys answers, unwrapped, the keys that pick chooses of the ring
// ref names (by name, or an alias, for ExportHeldKey), for a caller
// holding its export flag, when the ring is a held key's, in use
// (heldRing) and exportable (a public key: for a caller that may read the
// key, exportable or not); it records the export as x.action, granted
// (with the versions answered) or refused.
func (s *Service) exportKeys(ctx context.Context, ref RingRef, x exportCall, pick func(r *ringRecord) ([]*keyRecord, error)) (*ExportedKeys, error) {
	action, op := x.action, OpExport
	if x.kind == keytype.ExportPublicKey {
		op = OpRead
	}
	h := heldRef{name: ref.Name, byID: ref.ByID, action: action, op: op, use: true}
	if action != transitExportAction {
		h.notHeld = func(r *ringRecord) error {
			return Errorf(KindInvalid, "key ring %q was made by POST /asym/keyrings, whose reads answer its keys: export is for the keys the service holds (transit keys)", r.Name)
		}
	}
	p, r, lower, err := s.heldRing(ctx, h)
	if err != nil {
		return nil, err
	}
	spec, err := r.keySpec()
	switch {
	case err != nil:
		return nil, s.recordFailure(p, action, lower, internalError("type of a held key", err))
	case x.kind == keytype.ExportPublicKey && !spec.Type().Asymmetric():
		return nil, s.recordFailure(p, action, lower, Errorf(KindInvalid, "key type %s has no public key", spec.Type()))
	case x.kind != keytype.ExportPublicKey && !r.held().Exportable:
		return nil, s.refuse(p, action, lower, map[string]any{"ringId": r.ID, "reason": "not exportable"}, Errorf(KindInvalid, "key is not exportable"))
	}
	keys, err := pick(r)
	if err != nil {
		return nil, s.recordFailure(p, action, lower, err)
	}
	out := &ExportedKeys{Name: r.Name, Type: string(spec.Type()), Keys: make([]ExportedKey, 0, len(keys))}
	ids, versions := make([]string, len(keys)), make([]int, len(keys))
	for i, k := range keys {
		raw, err := s.unwrapKey(r, k)
		if err != nil {
			out.Clear()
			return nil, s.recordFailure(p, action, lower, err)
		}
		e := ExportedKey{KeyID: k.ID, Version: k.Version, Key: raw}
		if x.kind != "" {
			if e.Text, err = exportText(spec, raw, x.kind); err != nil {
				clear(raw)
				out.Clear()
				return nil, s.recordFailure(p, action, lower, err)
			}
		}
		if x.kind == keytype.ExportPublicKey {
			clear(raw) // no secret leaves for a caller that may only read the key
			e.Key = nil
		}
		out.Keys = append(out.Keys, e)
		ids[i], versions[i] = k.ID, k.Version
	}
	props := map[string]any{"ringId": r.ID, "keyIds": ids, "versions": versions}
	if x.kind != "" {
		props["kind"] = string(x.kind)
	}
	if err := s.record(p, action, lower, props, nil); err != nil {
		out.Clear()
		return nil, err
	}
	return out, nil
}

// exportText is the text of kind of a held key of spec with material raw
// (keytype.Key.Export).
func exportText(spec keytype.Spec, raw []byte, kind keytype.ExportKind) (string, error) {
	key, err := keytype.Load(spec, raw)
	if err != nil {
		return "", internalError("load a held key", err)
	}
	text, err := key.Export(kind)
	if err != nil {
		return "", keytypeError(err)
	}
	return text, nil
}

// Clear zeroes the keys of e, once they are answered.
func (e *ExportedKeys) Clear() {
	for _, k := range e.Keys {
		clear(k.Key)
	}
}

// exportableVersions returns the keys of r, a ring with versions, from
// version lowest on, that are enabled, in version order.
func (s *Service) exportableVersions(ctx context.Context, r *ringRecord, lowest int) ([]*keyRecord, error) {
	var keys []*keyRecord
	err := s.store.View(ctx, func(tx Txn) error {
		keys = keys[:0]
		return eachKey(tx, r.ID, func(k *keyRecord) error {
			if k.Version >= lowest && k.usable(r) == nil {
				keys = append(keys, k)
			}
			return nil
		})
	})
	if err != nil {
		return nil, internalError("read the versions of a transit key", err)
	}
	slices.SortFunc(keys, func(a, b *keyRecord) int { return a.Version - b.Version })
	return keys, nil
}

// keytypeError is the error of an operation of internal/keytype: a
// request it cannot serve (a parameter, an input, an operation the type
// lacks) is Invalid, with its message, which never holds key material or
// input; anything else is internal.
func keytypeError(err error) error {
	if errors.Is(err, keytype.ErrWrongType) || errors.Is(err, keytype.ErrParameter) || errors.Is(err, keytype.ErrInput) {
		return Errorf(KindInvalid, "%s", keytype.Message(err))
	}
	return internalError("held key", err)
}
