package kms

import (
	"context"
	"encoding/json"
	"maps"
	"strings"
	"time"
)

// Held keys, managed: what the service keeps for each (heldkeys.go), made,
// read, listed, rotated, configured and deleted. A held key is an /asym
// ring of one type (internal/keytype: AEAD, HMAC or signing types): its
// versions are the ring's keys in creation order (keyversion.go), its
// latest version the ring's active key, and it encrypts, decrypts
// (heldkeys_crypto.go), signs and computes HMACs (heldkeys_sign.go) in
// the service. That needs a key the service can use: an /asym ring's keys
// are sealed under the master key and unwrapped with the ring's sealed
// private key (asym.go, unwrapKey), where a /ks ring's keys are wrapped
// for a private key the service never keeps. So whoever holds the master
// key, or the service's memory, can read what held keys seal;
// docs/TRANSIT.md says so to the people who choose. No caller gets a held
// key's material but through the export of a key made exportable
// (heldkeys.go), and no ring whose keys were handed out (one made by
// CreateAsymKeyRing) is used as a held key. Protocols map their shapes
// onto these calls: package transit Vault's transit engine. Every call
// that names a held key takes an alias of it too (heldkeys_alias.go), and
// every use of a key waits for the key as a whole to be enabled
// (heldkeys_state.go): heldRing (heldkeys_find.go) sees to both.
//
// Every call is authorized, recorded and limited as any other: the flags
// of the ring's operations (create, read, encrypt, decrypt, sign, verify,
// hmac, rotate, config, delete), an activity record per call and per item
// of a batch, under the actions below and heldkeys_sign.go's (plaintexts
// and inputs never reach a record), the key states, maxEncryptCount and
// rotationPeriod of the ring, and its usage counts. The actions keep the
// names they had when transit was the one protocol: transit.*.

// HeldKey is an /asym ring as Vault's transit engine describes a key.
type HeldKey struct {
	Name string
	// ID is the ID of the key's ring; CreatedAt when it was made.
	ID        string
	CreatedAt time.Time
	// State is the state of the key as a whole (heldkeys_state.go):
	// HeldKeyEnabled, HeldKeyDisabled or HeldKeyPendingDeletion, with
	// the DeletionDate of the last (zero otherwise). The versions have
	// states of their own (keystate.go).
	State        string
	DeletionDate time.Time
	// Description and Tags are what callers said of the key
	// (heldkeys_tags.go); Tags is nil when it has none.
	Description string
	Tags        map[string]string
	// Type is the key's type (aes256-gcm96, chacha20-poly1305, hmac,
	// ed25519, ecdsa-p256, ecdsa-p384, rsa-2048, rsa-3072, rsa-4096,
	// ml-dsa), with its parameters: KeySize in bytes for hmac keys,
	// ParameterSet ("44", "65", "87") for ml-dsa.
	Type         string
	KeySize      int
	ParameterSet string
	// Encrypts, Signs and Asymmetric say what the type does: encrypt
	// and decrypt (the AEAD types), sign and verify (the asymmetric
	// types, whose versions have public keys). Every type computes
	// HMACs.
	Encrypts, Signs, Asymmetric bool
	// Versions are the creation times of the key's versions whose
	// material exists (a destroyed key's is gone).
	Versions map[int]time.Time
	// PublicKeys are the public keys of an asymmetric key's versions in
	// Versions (internal/keytype's encoding: PEM for ecdsa and rsa,
	// base64 for ed25519 and ml-dsa), all named PublicKeyName (P-256,
	// rsa-2048, ML-DSA-65...).
	PublicKeys    map[int]string
	PublicKeyName string
	// KeyIDs are the IDs of the versions' keys in the /asym ring, every
	// version's, destroyed or not: the keys that GetAsymKey, KeyUsage and
	// the key state calls name.
	KeyIDs               map[int]string
	LatestVersion        int
	MinDecryptionVersion int // at least 1
	MinEncryptionVersion int // 0: any version
	DeletionAllowed      bool
	// Exportable reports a key whose versions ExportHeldKey answers,
	// to a caller with keyring.<name>.export.
	Exportable     bool
	RotationPeriod time.Duration // zero: none
	// Uses counts the calls that used the key's versions, from the
	// trail's usage counts (KeyUsage: encrypt, data key, sign and HMAC
	// calls as encrypts, decrypt and verify calls as decrypts), all
	// versions together; AsymKeyUsage answers a version's.
	Uses KeyUsageCounts
	// Existed reports, in the answer of CreateHeldKey, that the key
	// existed before the call, which then changed nothing.
	Existed bool
}

// KeyUsageCounts are counts of the calls that used keys.
type KeyUsageCounts struct {
	Encrypts uint64 // the calls that made something with them
	Decrypts uint64 // the calls that opened or checked something with them
}

// HeldKeyConfig changes the settings of a held key; a nil field
// leaves its setting as it is.
type HeldKeyConfig struct {
	MinDecryptionVersion *int
	MinEncryptionVersion *int
	DeletionAllowed      *bool
	// Exportable true makes the key exportable; false is refused on a key
	// that is (what was exportable may have been exported: it stays so).
	Exportable *bool
	// RotationPeriod is the ring's algos.aes256.rotationPeriod: zero for
	// none, else at least MinRotationPeriod.
	RotationPeriod *time.Duration
	// Description replaces the key's description (heldkeys_tags.go).
	Description *string
}

// CreateHeldKey makes the held key in.Name, an /asym ring whose
// keys the service holds (heldkeys.go). A key that exists already is
// answered as it is, with Existed set, as Vault answers; an /asym ring of
// that name made by CreateAsymKeyRing, whose keys were handed out, is
// Invalid. It needs keyring.<name>.create.
func (s *Service) CreateHeldKey(ctx context.Context, in CreateHeldKeyInput) (*HeldKey, error) {
	name := in.Name
	if err := ValidateRingName(name); err != nil {
		return nil, err
	}
	if err := checkHeldPeriod(in.RotationPeriod); err != nil {
		return nil, err
	}
	settings, err := newHeldSettings(in)
	if err != nil {
		return nil, err
	}
	lower := strings.ToLower(name)
	p, err := s.authorize(ctx, transitCreateAction, lower, RingFlag(name, OpCreate))
	if err != nil {
		return nil, err
	}
	existed := false
	r, err := s.ringByName(ctx, groupAsym, name)
	switch {
	case err == nil:
		existed = true
	case !isNotFound(err):
		return nil, err
	default:
		if r, err = s.createHeldRing(ctx, p, name, in.RotationPeriod, settings); err != nil {
			return nil, err
		}
	}
	if !r.keysHeld() {
		return nil, s.recordFailure(p, transitCreateAction, lower, errHandedOut(r))
	}
	if r, err = s.ensureVersions(r); err != nil {
		return nil, err
	}
	key, err := s.describeHeld(ctx, r, existed)
	if err != nil {
		return nil, s.recordFailure(p, transitCreateAction, lower, err)
	}
	if existed {
		if err := s.record(p, transitCreateAction, lower, map[string]any{"ringId": r.ID, "existed": true}, nil); err != nil {
			return nil, err
		}
	}
	return key, nil
}

// describeHeld describes r, a ring with versions, as a held key.
func (s *Service) describeHeld(ctx context.Context, r *ringRecord, existed bool) (*HeldKey, error) {
	t := r.held()
	spec, err := r.keySpec()
	if err != nil {
		return nil, internalError("type of a held key", err)
	}
	typ := spec.Type()
	out := &HeldKey{Name: r.Name, ID: r.ID, CreatedAt: r.CreatedAt, State: r.heldState(), Description: t.Description,
		Tags: maps.Clone(t.Tags), Type: string(typ), KeySize: spec.Params().KeySize, ParameterSet: string(spec.Params().ParameterSet),
		Encrypts: typ.Encrypts(), Signs: typ.Signs(), Asymmetric: typ.Asymmetric(), PublicKeyName: spec.PublicKeyName(),
		Versions: map[int]time.Time{}, PublicKeys: map[int]string{}, KeyIDs: map[int]string{}, LatestVersion: r.LatestVersion,
		MinDecryptionVersion: max(t.MinDecryptionVersion, 1), MinEncryptionVersion: t.MinEncryptionVersion,
		DeletionAllowed: t.DeletionAllowed, Exportable: t.Exportable, RotationPeriod: r.Algos.AES256.period(), Existed: existed}
	if t.DeletionDate != nil {
		out.DeletionDate = *t.DeletionDate
	}
	err = s.store.View(ctx, func(tx Txn) error {
		return eachKey(tx, r.ID, func(k *keyRecord) error {
			if k.Version > 0 {
				out.KeyIDs[k.Version] = k.ID
				u, err := loadUsage(tx, k.ID)
				if err != nil {
					return err
				}
				out.Uses.Encrypts += u.enc
				out.Uses.Decrypts += u.dec
				if k.state() != KeyDestroyed {
					out.Versions[k.Version] = k.CreatedAt
					if k.PublicKey != "" {
						out.PublicKeys[k.Version] = k.PublicKey
					}
				}
			}
			return nil
		})
	})
	if err != nil {
		return nil, internalError("read the versions of a transit key", err)
	}
	return out, nil
}

// GetHeldKey describes the held key name. It needs
// keyring.<name>.read.
func (s *Service) GetHeldKey(ctx context.Context, name string) (*HeldKey, error) {
	p, r, err := s.resolveHeld(ctx, name, transitReadAction, OpRead)
	if err != nil {
		return nil, err
	}
	lower := strings.ToLower(r.Name)
	key, err := s.describeHeld(ctx, r, false)
	if err != nil {
		return nil, s.recordFailure(p, transitReadAction, lower, err)
	}
	if err := s.record(p, transitReadAction, lower, map[string]any{"ringId": r.ID}, nil); err != nil {
		return nil, err
	}
	return key, nil
}

// ListHeldKeys returns the names of the held keys (the /asym rings
// whose keys the service holds, not those made by CreateAsymKeyRing), in
// lower case and name order. It needs keyring.*.read. The names are read
// from the index of names, then the rings' records, all at once where the
// store can (prefetch), and answered whole, as Vault answers a list.
func (s *Service) ListHeldKeys(ctx context.Context) ([]string, error) {
	p, err := s.authorize(ctx, transitListAction, "", RingFlag("*", OpRead))
	if err != nil {
		return nil, err
	}
	prefix := join(pfxRingList, []byte(groupAsym), sep)
	names := []string{}
	err = s.store.View(ctx, func(tx Txn) error {
		names = names[:0]
		var listed []string
		var records [][]byte
		err := tx.Scan(ScanOptions{Prefix: prefix}, func(k, id []byte) (bool, error) {
			if err := ctx.Err(); err != nil {
				return false, err
			}
			listed, records = append(listed, string(k[len(prefix):])), append(records, join(pfxRing, id))
			return true, nil
		})
		if err != nil {
			return err
		}
		if err := prefetch(tx, records); err != nil {
			return err
		}
		for i, key := range records {
			v, err := tx.Get(key)
			if isNotFound(err) {
				continue
			} else if err != nil {
				return err
			}
			var r ringRecord
			if err := json.Unmarshal(v, &r); err != nil {
				return err
			}
			if r.keysHeld() {
				names = append(names, listed[i])
			}
		}
		return nil
	})
	if err != nil {
		return nil, s.recordFailure(p, transitListAction, "", internalError("list transit keys", err))
	}
	if err := s.record(p, transitListAction, "", map[string]any{"count": len(names)}, nil); err != nil {
		return nil, err
	}
	return names, nil
}

// DeleteHeldKey deletes the held key name, its ring and every
// version: what they sealed can no longer be opened. The key's
// configuration must allow it (DeletionAllowed), and no active API key's
// flags may name the ring (as DeleteKeyRing). It needs
// keyring.<name>.delete.
func (s *Service) DeleteHeldKey(ctx context.Context, name string) error {
	p, r, err := s.resolveHeld(ctx, name, transitDeleteAction, OpDelete)
	if err != nil {
		return err
	}
	return s.deleteRing(p, r, transitDeleteAction, func(cur *ringRecord) error {
		if !cur.held().DeletionAllowed {
			return Errorf(KindInvalid, "deletion is not allowed for this key: set deletion_allowed in its configuration first")
		}
		return nil
	})
}

// RotateHeldKey gives the held key name a new latest version (its
// ring a new active key) and describes the key. It needs
// keyring.<name>.rotate.
func (s *Service) RotateHeldKey(ctx context.Context, name string) (*HeldKey, error) {
	p, r, err := s.resolveHeld(ctx, name, transitRotateAction, OpRotate)
	if err != nil {
		return nil, err
	}
	mu, err := s.lockRing(r.ID)
	if err != nil {
		return nil, err
	}
	_, next, _, err := s.rotate(p, r, transitRotateAction, nil, nil)
	mu.Unlock()
	if err != nil {
		return nil, err
	}
	return s.describeHeld(ctx, next, false)
}

// ConfigureHeldKey changes the settings of the held key name, as
// Vault's key configuration does, and describes the key: a minimum
// decryption version of 0 reads as 1; neither minimum may pass the latest
// version, nor the encryption minimum (unless 0) fall below the
// decryption one; a rotation period is 0 or at least an hour; a key made
// exportable stays so. It needs keyring.<name>.config.
func (s *Service) ConfigureHeldKey(ctx context.Context, name string, cfg HeldKeyConfig) (*HeldKey, error) {
	p, r, err := s.resolveHeld(ctx, name, transitConfigAction, OpConfig)
	if err != nil {
		return nil, err
	}
	lower := strings.ToLower(r.Name)
	period := ""
	if cfg.RotationPeriod != nil {
		if err := checkHeldPeriod(*cfg.RotationPeriod); err != nil {
			return nil, s.recordFailure(p, transitConfigAction, lower, err)
		}
		if *cfg.RotationPeriod > 0 {
			period = formatPeriod(*cfg.RotationPeriod)
		}
	}
	if cfg.Description != nil {
		if err := checkDescription(*cfg.Description); err != nil {
			return nil, s.recordFailure(p, transitConfigAction, lower, err)
		}
	}
	act := s.newActivity(p, transitConfigAction, lower, true, map[string]any{"ringId": r.ID})
	next, err := s.changeRing(act, r.ID, func(tx Txn, cur *ringRecord) error {
		if err := notPendingDeletion(cur); err != nil {
			return err
		}
		t := cur.held()
		if err := t.apply(cfg, cur.Name, cur.LatestVersion); err != nil {
			return err
		}
		act.Props["minDecryptionVersion"], act.Props["minEncryptionVersion"], act.Props["deletionAllowed"], act.Props["exportable"] =
			max(t.MinDecryptionVersion, 1), t.MinEncryptionVersion, t.DeletionAllowed, t.Exportable
		cur.Held = &t
		if cfg.RotationPeriod != nil && cur.Algos.AES256.RotationPeriod != period {
			cur.Algos.AES256.RotationPeriod = period
			if err := reschedule(tx, cur); err != nil {
				return err
			}
		}
		act.Props["rotationPeriod"] = cur.Algos.AES256.RotationPeriod
		if cfg.Description != nil {
			act.Props["descriptionChanged"] = true // never the text: a caller may put there what it should not
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.describeHeld(ctx, next, false)
}

// checkMinVersion checks v, a minimum version for use (decryption or
// encryption), against the key's latest version, with Vault's wording.
func checkMinVersion(use string, v, latest int) error {
	switch {
	case v < 0:
		return Errorf(KindInvalid, "min %s version cannot be negative", use)
	case v > latest:
		return Errorf(KindInvalid, "cannot set min %s version of %d, latest key version is %d", use, v, latest)
	}
	return nil
}

// apply changes t by cfg, for the key name whose latest version is
// latest, with Vault's rules and wording.
func (t *heldSettings) apply(cfg HeldKeyConfig, name string, latest int) error {
	if v := cfg.MinDecryptionVersion; v != nil {
		if err := checkMinVersion("decryption", *v, latest); err != nil {
			return err
		}
		t.MinDecryptionVersion = max(*v, 1)
	}
	if v := cfg.MinEncryptionVersion; v != nil {
		if err := checkMinVersion("encryption", *v, latest); err != nil {
			return err
		}
		t.MinEncryptionVersion = *v
	}
	if dec := max(t.MinDecryptionVersion, 1); t.MinEncryptionVersion > 0 && t.MinEncryptionVersion < dec {
		return Errorf(KindInvalid, "cannot set min encryption/decryption values; min encryption version of %d must be greater than or equal to min decryption version of %d",
			t.MinEncryptionVersion, dec)
	}
	if cfg.DeletionAllowed != nil {
		t.DeletionAllowed = *cfg.DeletionAllowed
	}
	if cfg.Description != nil {
		t.Description = *cfg.Description
	}
	if cfg.Exportable != nil {
		if !*cfg.Exportable && t.Exportable {
			return Errorf(KindInvalid, "exportable cannot be unset: the versions of an exportable key may have been exported already, so it stays exportable; to stop its exports, take the flag %s away from the credentials that hold it", RingFlag(name, OpExport))
		}
		t.Exportable = t.Exportable || *cfg.Exportable
	}
	return nil
}
