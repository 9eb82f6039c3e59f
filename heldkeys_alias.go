package kms

import (
	"cmp"
	"context"
	"encoding/json"
	"strings"
	"time"
)

// Aliases of held keys: other names of a key, which every call naming a
// held key takes where it takes the key's name (heldkeys_find.go), so
// that callers can name a key by what it is for and be moved to another
// key without a change of their own. An alias is 1 to 256 characters of
// ASCII letters, digits, '/', '_' and '-', not starting with the prefix
// of a credential the service issues; aliases, like key names, are
// case-insensitive (an alias keeps the spelling it was created with).
// Aliases and the names of key rings of every group are one namespace: no
// alias is a ring's name, and no ring is made under an alias (Conflict),
// so that a name never means two things. An alias names a held key,
// never another alias (an alias given as the target names its key), and
// a key has at most maxAliasesPerKey of them. Deleting a key, by a call
// or at the end of its scheduled deletion, deletes its aliases.
//
// Flags name keys, never aliases: making an alias of a key, and deleting
// it, need keyring.<key>.config; moving it to another key needs that flag
// on both keys; listing every alias needs keyring.*.read, and the
// aliases of one key keyring.<key>.read. Each call is recorded
// (transit.alias.*) under the key's name, with the alias.

// HeldKeyAlias is an alias of a held key.
type HeldKeyAlias struct {
	Name string // the alias, spelled as it was created
	// Target is the name of the key it names, TargetID the ID of the
	// key's ring (HeldKey.ID).
	Target    string
	TargetID  string
	CreatedAt time.Time
	UpdatedAt time.Time // when it was made or last moved to another key
}

// putAlias writes a, and its entry in the index of the aliases of its
// key.
func putAlias(tx Txn, a *heldAliasRecord) error {
	lower := strings.ToLower(a.Name)
	v, err := json.Marshal(a)
	if err != nil {
		return err
	}
	if err := tx.Set(join(pfxHeldAlias, []byte(lower)), v); err != nil {
		return err
	}
	return tx.Set(join(pfxHeldAliasRing, []byte(a.RingID), sep, []byte(lower)), []byte{})
}

// storedRingName reads the name of the ring id in tx, and nothing else
// of its record (loadRing parses its public key: some 240 us a ring).
func storedRingName(tx Txn, id string) (string, error) {
	var rec struct {
		Name string `json:"name"`
	}
	if _, err := getJSON(tx, join(pfxRing, []byte(id)), &rec, errRingNotFound); err != nil {
		return "", err
	}
	return rec.Name, nil
}

// aliasTargetIn reads the ring ringID in tx as an alias's target, which it
// must be fit to be (aliasTargetOK).
func aliasTargetIn(tx Txn, ringID string) (*ringRecord, error) {
	cur, err := loadRing(tx, ringID)
	if err != nil {
		return nil, err
	}
	return cur, aliasTargetOK(tx, cur)
}

// aliasTargetOK checks, in tx, that cur, the ring an alias is to name, can
// take one more: a held key not pending deletion, with fewer than
// maxAliasesPerKey aliases.
func aliasTargetOK(tx Txn, cur *ringRecord) error {
	if err := notPendingDeletion(cur); err != nil {
		return err
	}
	n := 0
	err := tx.Scan(ScanOptions{Prefix: join(pfxHeldAliasRing, []byte(cur.ID), sep), KeysOnly: true}, func(_, _ []byte) (bool, error) {
		n++
		return n < maxAliasesPerKey, nil
	})
	if err != nil {
		return err
	}
	if n >= maxAliasesPerKey {
		return Errorf(KindLimit, "key %s has %d aliases, the most a key has", cur.Name, maxAliasesPerKey)
	}
	return nil
}

// describe is a as a HeldKeyAlias of the key named target.
func (a *heldAliasRecord) describe(target string) *HeldKeyAlias {
	return &HeldKeyAlias{Name: a.Name, Target: target, TargetID: a.RingID, CreatedAt: a.CreatedAt, UpdatedAt: a.UpdatedAt}
}

// CreateHeldKeyAlias makes alias another name of the held key target (a
// key's name, or an alias of it). An alias that exists, or that is the
// name of a key ring, is Conflict; a key pending deletion is Conflict too.
// It needs keyring.<key>.config and is recorded as transit.alias.create.
func (s *Service) CreateHeldKeyAlias(ctx context.Context, alias, target string) (*HeldKeyAlias, error) {
	if err := checkAliasName(alias); err != nil {
		return nil, err
	}
	p, r, lower, err := s.heldRing(ctx, heldRef{name: target, action: aliasCreateAction, op: OpConfig})
	if err != nil {
		return nil, err
	}
	la := strings.ToLower(alias)
	var out *heldAliasRecord
	act := s.newActivity(p, aliasCreateAction, lower, true, map[string]any{"ringId": r.ID, "alias": alias})
	err = s.submit(act, func(tx Txn) error {
		if _, err := loadAlias(tx, la); err == nil {
			return Errorf(KindConflict, "alias %q exists", alias)
		} else if !isNotFound(err) {
			return err
		}
		if err := nameFree(tx, la, alias); err != nil {
			return err
		}
		cur, err := aliasTargetIn(tx, r.ID)
		if err != nil {
			return err
		}
		now := s.now().UTC()
		out = &heldAliasRecord{Name: alias, RingID: cur.ID, CreatedAt: now, UpdatedAt: now}
		return putAlias(tx, out)
	}, func() { s.aliases.Set(la, r.ID) })
	if err != nil {
		return nil, err
	}
	return out.describe(r.Name), nil
}

// nameFree refuses an alias (lower, in lower case) that is a key ring's
// name.
func nameFree(tx Txn, lower, alias string) error {
	if _, err := tx.Get(join(pfxRingName, []byte(lower))); err == nil {
		return Errorf(KindConflict, "%q is the name of a key ring: an alias may not be", alias)
	} else if !isNotFound(err) {
		return err
	}
	return nil
}

// aliasedRing returns the caller and the ring that the alias names, for
// a change of the alias recorded as action, which needs
// keyring.<key>.config on that ring's key.
func (s *Service) aliasedRing(ctx context.Context, alias, action string) (*Principal, *ringRecord, error) {
	if err := checkAliasName(alias); err != nil {
		return nil, nil, err
	}
	id, err := s.aliasTarget(ctx, alias)
	if err != nil {
		return nil, nil, err
	}
	if id == "" {
		p, err := principal(ctx)
		if err != nil {
			return nil, nil, err
		}
		return nil, nil, s.recordFailure(p, action, "", errAliasNotFound(alias))
	}
	return s.findAliased(ctx, heldRef{name: alias, action: action, op: OpConfig}, id)
}

// UpdateHeldKeyAlias moves alias to the held key target (a key's name,
// or an alias of it), which must do what its key did: encrypt, or sign,
// as it does (an alias moved to a key of another use would break its
// callers). It needs keyring.<key>.config on both keys and is recorded as
// transit.alias.update, with the key it named before.
func (s *Service) UpdateHeldKeyAlias(ctx context.Context, alias, target string) (*HeldKeyAlias, error) {
	p, from, err := s.aliasedRing(ctx, alias, aliasUpdateAction)
	if err != nil {
		return nil, err
	}
	_, r, lower, err := s.heldRing(ctx, heldRef{name: target, action: aliasUpdateAction, op: OpConfig})
	if err != nil {
		return nil, err
	}
	if err := sameUse(from, r); err != nil {
		return nil, s.recordFailure(p, aliasUpdateAction, lower, err)
	}
	la := strings.ToLower(alias)
	var out *heldAliasRecord
	act := s.newActivity(p, aliasUpdateAction, lower, true, map[string]any{"ringId": r.ID, "alias": alias,
		"previousRingId": from.ID, "previousKey": strings.ToLower(from.Name)})
	err = s.submit(act, func(tx Txn) error {
		a, err := loadAlias(tx, la)
		if err != nil {
			return err
		}
		if a.RingID != from.ID {
			return Errorf(KindConflict, "alias %q was moved meanwhile: try again", alias)
		}
		if a.RingID == r.ID {
			out = a
			return nil
		}
		cur, err := aliasTargetIn(tx, r.ID)
		if err != nil {
			return err
		}
		if err := tx.Delete(join(pfxHeldAliasRing, []byte(a.RingID), sep, []byte(la))); err != nil {
			return err
		}
		a.RingID, a.UpdatedAt = cur.ID, s.now().UTC()
		out = a
		return putAlias(tx, a)
	}, func() { s.aliases.Set(la, r.ID) })
	if err != nil {
		return nil, err
	}
	return out.describe(r.Name), nil
}

// sameUse refuses to move an alias from the key of ring from to that of
// ring to when the two do not encrypt and sign alike.
func sameUse(from, to *ringRecord) error {
	a, err1 := from.keySpec()
	b, err2 := to.keySpec()
	if err := cmp.Or(err1, err2); err != nil {
		return internalError("type of a held key", err)
	}
	if a.Type().Encrypts() != b.Type().Encrypts() || a.Type().Signs() != b.Type().Signs() {
		return Errorf(KindInvalid, "key %s (%s) is not used as key %s (%s) is: an alias moves only to a key that encrypts, or signs, as its key does",
			to.Name, b.Type(), from.Name, a.Type())
	}
	return nil
}

// DeleteHeldKeyAlias deletes alias; its key stays. It needs
// keyring.<key>.config and is recorded as transit.alias.delete.
func (s *Service) DeleteHeldKeyAlias(ctx context.Context, alias string) error {
	p, r, err := s.aliasedRing(ctx, alias, aliasDeleteAction)
	if err != nil {
		return err
	}
	la := strings.ToLower(alias)
	act := s.newActivity(p, aliasDeleteAction, strings.ToLower(r.Name), true, map[string]any{"ringId": r.ID, "alias": alias})
	return s.submit(act, func(tx Txn) error {
		a, err := loadAlias(tx, la)
		if err != nil {
			return err
		}
		if a.RingID != r.ID {
			return Errorf(KindConflict, "alias %q was moved meanwhile: try again", alias)
		}
		if err := tx.Delete(join(pfxHeldAlias, []byte(la))); err != nil {
			return err
		}
		return tx.Delete(join(pfxHeldAliasRing, []byte(r.ID), sep, []byte(la)))
	}, func() { s.aliases.Remove(la) })
}

// ListHeldKeyAliases pages through aliases in the order of their
// lower-case names: every alias (target "", which needs keyring.*.read),
// or those of the held key target (a key's name, or an alias of it,
// which needs keyring.<key>.read). It is recorded as transit.alias.list.
func (s *Service) ListHeldKeyAliases(ctx context.Context, target string, req PageRequest) (*List[*HeldKeyAlias], error) {
	if target == "" {
		p, err := s.authorize(ctx, aliasListAction, "", RingFlag("*", OpRead))
		if err != nil {
			return nil, err
		}
		return audited(s, ctx, p, aliasListAction, "", func(tx Txn) (*List[*HeldKeyAlias], map[string]any, error) {
			out := &List[*HeldKeyAlias]{Data: []*HeldKeyAlias{}}
			var a heldAliasRecord
			var name string
			var err error
			out.Pagination, err = s.pager.scan(ctx, tx, req, pageScan{Scope: "heldaliases", Prefix: pfxHeldAlias,
				Match: func(_, v []byte) (bool, error) {
					if err := json.Unmarshal(v, &a); err != nil {
						return false, err
					}
					var err error
					name, err = storedRingName(tx, a.RingID)
					if isNotFound(err) {
						return false, nil
					}
					return err == nil, err
				},
				Emit: func(_, _ []byte) error {
					out.Data = append(out.Data, a.describe(name))
					return nil
				}})
			return out, map[string]any{"count": out.Pagination.Count}, err
		})
	}
	p, r, lower, err := s.heldRing(ctx, heldRef{name: target, action: aliasListAction, op: OpRead})
	if err != nil {
		return nil, err
	}
	prefix := join(pfxHeldAliasRing, []byte(r.ID), sep)
	return audited(s, ctx, p, aliasListAction, lower, func(tx Txn) (*List[*HeldKeyAlias], map[string]any, error) {
		out := &List[*HeldKeyAlias]{Data: []*HeldKeyAlias{}}
		var a *heldAliasRecord
		var size int
		var err error
		out.Pagination, err = s.pager.scan(ctx, tx, req, pageScan{Scope: "heldaliases/" + r.ID, Prefix: prefix,
			Match: func(k, _ []byte) (bool, error) {
				v, err := tx.Get(join(pfxHeldAlias, k[len(prefix):]))
				if isNotFound(err) {
					return false, nil
				} else if err != nil {
					return false, err
				}
				a, size = &heldAliasRecord{}, len(v)
				return true, json.Unmarshal(v, a)
			},
			Size: func(_, _ []byte) int { return size },
			Emit: func(_, _ []byte) error {
				out.Data = append(out.Data, a.describe(r.Name))
				return nil
			}})
		return out, map[string]any{"ringId": r.ID, "count": out.Pagination.Count}, err
	})
}
