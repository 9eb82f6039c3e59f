package kms

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"github.com/ringkms/kms/internal/wrap"
)

// The key rings of the Service: making them, finding them by name or ID
// for a caller (resolveRing, resolveKey), and reading them and their keys.
// Their records and how they are stored are keyring.go's.

// CreateKeyRing creates a /ks key ring and its first key. It needs the flag
// keyring.<name>.create.
func (s *Service) CreateKeyRing(ctx context.Context, in CreateKeyRingInput) (*CreateKeyRingResult, error) {
	if err := checkNewRingName(in.Name); err != nil {
		return nil, err
	}
	p, err := s.authorize(ctx, "keyring.create", strings.ToLower(in.Name), RingFlag(in.Name, OpCreate))
	if err != nil {
		return nil, err
	}
	if err := checkAlgo(in.Algo); err != nil {
		return nil, err
	}
	dataKeys, err := checkDataKeys(in.DataKeys)
	if err != nil {
		return nil, err
	}
	var pub *wrap.PublicKey
	var private string
	if in.PublicKey != "" {
		if pub, err = wrap.ParsePublicKey(in.PublicKey); err != nil {
			return nil, Errorf(KindInvalid, "%v", err)
		}
	} else {
		scheme, err := wrap.ParseScheme(in.KEM)
		if err != nil {
			return nil, Errorf(KindInvalid, "kem: %v", err)
		}
		priv, err := wrap.Generate(scheme)
		if err != nil {
			return nil, internalError("generate key pair", err)
		}
		raw := priv.Bytes()
		private = base64.StdEncoding.EncodeToString(raw)
		clear(raw)
		pub = priv.Public()
	}
	r, k, err := s.createRing(p, ringSpec{group: groupKS, name: in.Name, display: in.DisplayName, props: in.Props, keyProps: in.KeyProps,
		pub: pub, dataKeys: dataKeys})
	if err != nil {
		return nil, err
	}
	return &CreateKeyRingResult{Ring: r.keyRing(), Key: k.key(true), PrivateKey: private}, nil
}

// ringSpec is a ring for createRing to make, with its first key.
type ringSpec struct {
	group, name, display string
	props, keyProps      map[string]any
	pub                  *wrap.PublicKey
	private              []byte // the private key the service keeps, sealed: /asym rings
	dataKeys             string
	algos                ConfigAlgos   // a rotation period, from the start
	transit              *heldSettings // /asym rings made through transit
	origin               string        // /asym rings: originAsym or originHeld
	action               string        // the record's; empty: keyring.create or asym.keyring.create
}

func (s *Service) createRing(p *Principal, spec ringSpec) (*ringRecord, *keyRecord, error) {
	if err := checkNewRingName(spec.name); err != nil {
		return nil, nil, err // before any record: the name may be a secret
	}
	now := s.now().UTC()
	name, group, display := spec.name, spec.group, spec.display
	if display == "" {
		display = name
	}
	r := &ringRecord{ID: newID(now), Name: name, DisplayName: display, Group: group, CreatedAt: now, UpdatedAt: now,
		Props: cloneMap(spec.props), KeyProps: cloneMap(spec.keyProps), PublicKey: spec.pub.String(), pub: spec.pub,
		Algos: spec.algos, Held: spec.transit, Origin: spec.origin}
	s.setDataKeys(r, spec.dataKeys)
	k, err := s.newKey(r, spec.pub)
	if err != nil {
		return nil, nil, err
	}
	r.ActiveKey = k.ID
	lower := strings.ToLower(name)
	action := spec.action
	switch {
	case action != "":
	case group == groupAsym:
		action = "asym.keyring.create"
	default:
		action = "keyring.create"
	}
	if err := checkProps("props", spec.props); err != nil {
		return nil, nil, s.recordFailure(p, action, lower, err)
	}
	if err := checkProps("keyProps", spec.keyProps); err != nil {
		return nil, nil, s.recordFailure(p, action, lower, err)
	}
	act := s.newActivity(p, action, lower, true, map[string]any{"ringId": r.ID, "keyId": k.ID})
	if spec.transit != nil {
		act.Props["exportable"] = spec.transit.Exportable
		if len(spec.transit.Tags) > 0 {
			act.Props["tagKeys"] = slices.Sorted(maps.Keys(spec.transit.Tags)) // never their values
		}
	}
	err = s.submit(act, func(tx Txn) error {
		nameKey := join(pfxRingName, []byte(lower))
		if _, err := tx.Get(nameKey); err == nil {
			return Errorf(KindConflict, "a key ring named %q already exists", name)
		} else if !isNotFound(err) {
			return err
		}
		if _, err := tx.Get(join(pfxHeldAlias, []byte(lower))); err == nil {
			return Errorf(KindConflict, "%q is an alias of a held key: a key ring may not be named so", name)
		} else if !isNotFound(err) {
			return err
		}
		if err := adjustCount(tx, countKeyRings, 1, s.opts.Limits.MaxKeyRings, "key rings"); err != nil {
			return err
		}
		if err := tx.Set(nameKey, []byte(r.ID)); err != nil {
			return err
		}
		if err := tx.Set(join(pfxRingList, []byte(group), sep, []byte(lower)), []byte(r.ID)); err != nil {
			return err
		}
		if err := s.sealRing(tx, r, spec.private); err != nil {
			return err
		}
		k.Version, r.LatestVersion = 1, 1
		if err := putKeyVersion(tx, k); err != nil {
			return err
		}
		if err := scheduleRotation(tx, r, k.ID, k.CreatedAt); err != nil {
			return err
		}
		if err := putRing(tx, r); err != nil {
			return err
		}
		return putKey(tx, k)
	}, func() {
		clear(r.newShare)
		r.newShare = nil
		s.rings.Set(r.ID, r)
		s.ringNames.Set(lower, r.ID)
		s.keys.Set(k.ID, k)
	})
	if err != nil {
		return nil, nil, err
	}
	if r.RotateDue != 0 {
		s.rotator.Wake()
	}
	return r, k, nil
}

// ringByID returns a ring of group by ID, from the cache or the store.
func (s *Service) ringByID(ctx context.Context, group, id string) (*ringRecord, error) {
	r, ok := s.rings.Get(id)
	if !ok {
		var err error
		if r, err = s.readRing(ctx, id); err != nil {
			return nil, err
		}
	}
	if r.Group != group {
		return nil, Errorf(KindNotFound, "key ring not found")
	}
	return r, nil
}

// readRing reads a ring from the store into the cache. It is apart from
// ringByID so that the variable its closure sets is allocated on a miss
// only, not on every call.
func (s *Service) readRing(ctx context.Context, id string) (*ringRecord, error) {
	return s.rings.Load(id, func() (*ringRecord, error) {
		r, err := viewOne(ctx, s.store, func(tx Txn) (*ringRecord, error) { return loadRing(tx, id) })
		if err != nil {
			return nil, internalError("read key ring", err)
		}
		return r, nil
	})
}

// ringByName returns a ring of group by name, from the cache or the store.
func (s *Service) ringByName(ctx context.Context, group, name string) (*ringRecord, error) {
	if err := ValidateRingName(name); err != nil {
		return nil, err
	}
	lower := strings.ToLower(name)
	id, ok := s.ringNames.Get(lower)
	if !ok {
		var err error
		if id, err = s.readRingName(ctx, lower, name); err != nil {
			return nil, err
		}
	}
	r, err := s.ringByID(ctx, group, id)
	if isNotFound(err) {
		return nil, errNamedNotFound("key ring", name)
	}
	return r, err
}

// readRingName reads the ID of the ring named name (lower, in lower case)
// from the store into the cache. It is apart from ringByName as readRing
// is from ringByID.
func (s *Service) readRingName(ctx context.Context, lower, name string) (string, error) {
	return s.ringNames.Load(lower, func() (string, error) {
		var id string
		err := s.store.View(ctx, func(tx Txn) error {
			v, err := tx.Get(join(pfxRingName, []byte(lower)))
			if isNotFound(err) {
				return errNamedNotFound("key ring", name)
			}
			id = string(v)
			return err
		})
		if err != nil {
			return "", internalError("read key ring", err)
		}
		return id, nil
	})
}

// keyByID returns a key of a ring, from the cache or the store.
func (s *Service) keyByID(ctx context.Context, ringID, keyID string) (*keyRecord, error) {
	read := func() (*keyRecord, error) {
		k, err := viewOne(ctx, s.store, func(tx Txn) (*keyRecord, error) { return loadKey(tx, ringID, keyID) })
		if err != nil {
			return nil, internalError("read key", err)
		}
		return k, nil
	}
	k, err := s.keys.Load(keyID, read)
	if err == nil && k.RingID != ringID {
		// The ID of a key of another ring: the store says what it is.
		return read()
	}
	return k, err
}

// resolveRing finds the ring named by ref and checks the caller holds op
// on it. With a name, the flag is checked first, so a caller without it
// learns nothing of the ring's existence; with an ID, the ring must be read
// to learn its name.
func (s *Service) resolveRing(ctx context.Context, group string, ref RingRef, action, op string) (*Principal, *ringRecord, error) {
	if !ref.ByID {
		if err := ValidateRingName(ref.Name); err != nil {
			return nil, nil, err
		}
		p, err := s.authorize(ctx, action, strings.ToLower(ref.Name), RingFlag(ref.Name, op))
		if err != nil {
			return nil, nil, err
		}
		r, err := s.ringByName(ctx, group, ref.Name)
		if err != nil {
			return nil, nil, s.recordFailure(p, action, unresolvedRing(ref.Name), err)
		}
		return p, r, nil
	}
	p, err := principal(ctx)
	if err != nil {
		return nil, nil, err
	}
	if _, ok := parseID(ref.Name); !ok {
		return nil, nil, s.recordFailure(p, action, "", Errorf(KindNotFound, "key ring not found")) // no ring has such an ID
	}
	r, err := s.ringByID(ctx, group, ref.Name)
	if err != nil {
		return nil, nil, s.recordFailure(p, action, "", err)
	}
	if _, err := s.authorize(ctx, action, strings.ToLower(r.Name), RingFlag(r.Name, op)); err != nil {
		return nil, nil, err
	}
	return p, r, nil
}

// GetKeyRing returns a /ks ring. It needs keyring.<name>.read.
func (s *Service) GetKeyRing(ctx context.Context, ref RingRef) (*KeyRing, error) {
	p, r, err := s.resolveRing(ctx, groupKS, ref, "keyring.read", OpRead)
	if err != nil {
		return nil, err
	}
	if err := s.record(p, "keyring.read", strings.ToLower(r.Name), map[string]any{"ringId": r.ID}, nil); err != nil {
		return nil, err
	}
	return r.keyRing(), nil
}

// ListKeyRings pages through the /ks rings in name order. It needs
// keyring.*.read.
func (s *Service) ListKeyRings(ctx context.Context, req PageRequest) (*List[*KeyRing], error) {
	p, err := s.authorize(ctx, "keyring.list", "", RingFlag("*", OpRead))
	if err != nil {
		return nil, err
	}
	prefix := join(pfxRingList, []byte(groupKS), sep)
	return audited(s, ctx, p, "keyring.list", "", func(tx Txn) (*List[*KeyRing], map[string]any, error) {
		out := &List[*KeyRing]{Data: []*KeyRing{}}
		var cur *ringRecord
		var err error
		out.Pagination, err = s.pager.scan(ctx, tx, req, pageScan{Scope: "keyrings", Prefix: prefix,
			Match: func(_, v []byte) (bool, error) {
				var err error
				cur, err = loadRing(tx, string(v))
				return err == nil, err
			},
			Size: func(_, _ []byte) int { return cur.stored },
			Emit: func(_, _ []byte) error {
				out.Data = append(out.Data, cur.keyRing())
				return nil
			}})
		return out, map[string]any{"count": out.Pagination.Count}, err
	})
}

// ListKeys pages through the keys of a /ks ring, oldest first, without
// their key data. It needs keyring.<name>.read.
func (s *Service) ListKeys(ctx context.Context, ref RingRef, req PageRequest) (*List[*Key], error) {
	p, r, err := s.resolveRing(ctx, groupKS, ref, "key.list", OpRead)
	if err != nil {
		return nil, err
	}
	prefix := join(pfxKey, []byte(r.ID), sep)
	return audited(s, ctx, p, "key.list", strings.ToLower(r.Name), func(tx Txn) (*List[*Key], map[string]any, error) {
		out := &List[*Key]{Data: []*Key{}}
		var err error
		out.Pagination, err = s.pager.scan(ctx, tx, req, pageScan{Scope: "keys/" + r.ID, Prefix: prefix, Emit: func(_, v []byte) error {
			var k keyRecord
			if err := json.Unmarshal(v, &k); err != nil {
				return err
			}
			key := k.key(false)
			u, err := loadUsage(tx, k.ID)
			if err != nil {
				return err
			}
			key.EncryptCount = &u.enc
			out.Data = append(out.Data, key)
			return nil
		}})
		return out, map[string]any{"ringId": r.ID, "count": out.Pagination.Count}, err
	})
}

// GetKey returns a key of a /ks ring with its wrapped key data. It needs
// keyring.<name>.read.
func (s *Service) GetKey(ctx context.Context, ref RingRef, keyID string) (*Key, error) {
	p, r, k, err := s.resolveKey(ctx, groupKS, ref, keyID, "key.read")
	if err != nil {
		return nil, err
	}
	if err := k.usable(r); err != nil {
		return nil, s.recordFailure(p, "key.read", strings.ToLower(r.Name), err)
	}
	out := k.key(true)
	err = s.store.View(ctx, func(tx Txn) error {
		u, err := loadUsage(tx, k.ID)
		out.EncryptCount = &u.enc
		return err
	})
	if err != nil {
		return nil, s.recordFailure(p, "key.read", strings.ToLower(r.Name), internalError("read key usage", err))
	}
	if err := s.record(p, "key.read", strings.ToLower(r.Name), map[string]any{"ringId": r.ID, "keyId": k.ID}, nil); err != nil {
		return nil, err
	}
	return out, nil
}

func (s *Service) resolveKey(ctx context.Context, group string, ref RingRef, keyID, action string) (*Principal, *ringRecord, *keyRecord, error) {
	p, r, err := s.resolveRing(ctx, group, ref, action, OpRead)
	if err != nil {
		return nil, nil, nil, err
	}
	if _, ok := parseID(keyID); !ok {
		return nil, nil, nil, s.recordFailure(p, action, strings.ToLower(r.Name), Errorf(KindNotFound, "key not found")) // no key has such an ID
	}
	k, err := s.keyByID(ctx, r.ID, keyID)
	if err != nil {
		return nil, nil, nil, s.recordFailure(p, action, strings.ToLower(r.Name), err)
	}
	return p, r, k, nil
}
