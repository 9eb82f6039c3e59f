package kms

import (
	"context"
	"strings"
	"time"
)

// Finding the held key of a call. Every call that names a held key, by
// its name or by an alias of it (heldkeys_alias.go), finds it through
// heldRing, the one place where these rules hold for every protocol:
//
//   - an alias names its key: the call is the key's, authorized by the
//     flags of the key (flags name keys, never aliases) and recorded
//     under its name;
//   - the caller must hold keyring.<key>.<op>, checked, for a name, before
//     the key is looked up, so that a caller without it learns nothing of
//     the key (an alias is looked up first: a caller learns whether an
//     alias exists, and which key's flag it lacks);
//   - an encrypt that may makes the key when it does not exist;
//   - an /asym ring whose keys were handed out is no held key;
//   - a call that uses the key (encrypt, decrypt, rewrap, data keys,
//     sign, verify, HMAC, export, HeldKeyReady) is refused, as a use of a
//     disabled version is, while the key as a whole is disabled or
//     pending deletion (heldkeys_state.go); reads and management go on.

// heldRef is how a call names a held key, and what it does with it.
type heldRef struct {
	// name is the key's name or an alias of it; with byID, its ring's ID
	// (the /asym routes, which name rings, never aliases).
	name   string
	byID   bool
	action string // the action recorded
	op     string // the operation whose flag the call needs
	// create, when set, makes the key when it does not exist, with its
	// type and settings, for a caller that may create it (encrypt).
	create *CreateHeldKeyInput
	// use says that the call uses the key's material: it is refused
	// while the key is disabled or pending deletion.
	use bool
	// notHeld is the error of a ring whose keys the service does not
	// hold; nil: errHandedOut.
	notHeld func(*ringRecord) error
}

// heldRing finds the held key h names for the call h describes (see
// above) and returns the caller, the key's ring (with versions) and its
// lower-case name. Every refusal and failure past the caller's flag is
// recorded as h.action.
func (s *Service) heldRing(ctx context.Context, h heldRef) (*Principal, *ringRecord, string, error) {
	p, r, err := s.findHeld(ctx, h)
	if err != nil {
		return nil, nil, "", err
	}
	lower := strings.ToLower(r.Name)
	switch {
	case !r.keysHeld() && h.notHeld != nil:
		err = h.notHeld(r)
	case !r.keysHeld():
		err = errHandedOut(r)
	case h.use:
		err = r.heldUsable()
	}
	if err == nil {
		r, err = s.ensureVersions(r)
	}
	if err != nil {
		return nil, nil, "", s.recordFailure(p, h.action, lower, err)
	}
	return p, r, lower, nil
}

// resolveHeld is heldRing for a call of op that reads or manages the held
// key name (or the key an alias names) without using it.
func (s *Service) resolveHeld(ctx context.Context, name, action, op string) (*Principal, *ringRecord, error) {
	p, r, _, err := s.heldRing(ctx, heldRef{name: name, action: action, op: op})
	return p, r, err
}

// findHeld returns the caller and the /asym ring that h names, once the
// caller's flag for h.op on it is checked: the ring of the alias h.name,
// or the ring of that name (made first for h.create, when missing).
func (s *Service) findHeld(ctx context.Context, h heldRef) (*Principal, *ringRecord, error) {
	if h.byID {
		return s.resolveRing(ctx, groupAsym, RingRef{Name: h.name, ByID: true}, h.action, h.op)
	}
	id, err := s.aliasTarget(ctx, h.name)
	if err != nil {
		return nil, nil, err
	}
	if id != "" {
		return s.findAliased(ctx, h, id)
	}
	if err := ValidateRingName(h.name); err != nil {
		if checkAliasName(h.name) != nil {
			return nil, nil, err
		}
		p, perr := principal(ctx)
		if perr != nil {
			return nil, nil, perr
		}
		return nil, nil, s.recordFailure(p, h.action, "", errAliasNotFound(h.name))
	}
	var settings *heldSettings
	if h.create != nil {
		if err := checkHeldPeriod(h.create.RotationPeriod); err != nil {
			return nil, nil, err
		}
		if settings, err = newHeldSettings(*h.create); err != nil {
			return nil, nil, err
		}
	}
	lower := strings.ToLower(h.name)
	p, err := s.authorize(ctx, h.action, lower, RingFlag(h.name, h.op))
	if err != nil {
		return nil, nil, err
	}
	r, err := s.ringByName(ctx, groupAsym, h.name)
	if isNotFound(err) && h.create != nil {
		if err := checkNewRingName(h.name); err != nil {
			return nil, nil, err // before any record: the name may be a secret
		}
		if flag := RingFlag(h.name, OpCreate); !p.Can(flag) {
			return nil, nil, s.refuse(p, h.action, lower, map[string]any{"flag": flag},
				Errorf(KindPermissionDenied, "missing permission flag %s: the key does not exist, and only a caller that may create it makes it by encrypting", flag))
		}
		r, err = s.createHeldRing(ctx, p, h.name, h.create.RotationPeriod, settings)
	}
	if isNotFound(err) {
		err = errNamedNotFound("transit key", h.name)
	}
	if err != nil {
		return nil, nil, s.recordFailure(p, h.action, unresolvedRing(h.name), err)
	}
	return p, r, nil
}

// findAliased is findHeld for an alias of the ring id.
func (s *Service) findAliased(ctx context.Context, h heldRef, id string) (*Principal, *ringRecord, error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, nil, err
	}
	r, err := s.ringByID(ctx, groupAsym, id)
	if isNotFound(err) {
		err = errAliasNotFound(h.name) // its key was deleted meanwhile, by another process
	}
	if err != nil {
		return nil, nil, s.recordFailure(p, h.action, "", err)
	}
	if _, err := s.authorize(ctx, h.action, strings.ToLower(r.Name), RingFlag(r.Name, h.op)); err != nil {
		return nil, nil, err
	}
	return p, r, nil
}

// checkAliasName checks the name of an alias. The error quotes no name
// shaped like a credential.
func checkAliasName(name string) error {
	if name == "" || len(name) > maxAliasLen {
		return Errorf(KindInvalid, "an alias has 1 to %d characters", maxAliasLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '/' || c == '_' || c == '-') {
			return Errorf(KindInvalid, "an alias has only ASCII letters, digits, '/', '_' and '-'")
		}
	}
	for _, prefix := range secretPrefixes {
		if len(name) >= len(prefix) && strings.EqualFold(name[:len(prefix)], prefix) {
			return Errorf(KindInvalid, "an alias may not start with %s, as the credentials of the service do", strings.Join(secretPrefixes, ", "))
		}
	}
	return nil
}

// aliasTarget returns the ID of the ring that the alias name names, or ""
// when name is no alias: a key's name (which no alias can be), or no name
// at all.
func (s *Service) aliasTarget(ctx context.Context, name string) (string, error) {
	lower := strings.ToLower(name)
	if ValidateRingName(name) == nil {
		if _, ok := s.ringNames.Get(lower); ok {
			return "", nil
		}
	}
	if checkAliasName(name) != nil {
		return "", nil
	}
	return s.aliases.Load(lower, func() (string, error) {
		var id string
		err := s.store.View(ctx, func(tx Txn) error {
			a, err := loadAlias(tx, lower)
			if err == nil {
				id = a.RingID
			} else if isNotFound(err) {
				err = nil
			}
			return err
		})
		if err != nil {
			return "", internalError("read an alias", err)
		}
		return id, nil
	})
}

// errAliasNotFound is the error of an alias that does not exist.
func errAliasNotFound(name string) error { return errNamedNotFound("alias", name) }

// heldAliasRecord is an alias as stored, under its lower-case name.
type heldAliasRecord struct {
	Name      string    `json:"name"`
	RingID    string    `json:"ringId"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// loadAlias reads the alias lower (lower-case) as tx has it.
func loadAlias(tx Txn, lower string) (*heldAliasRecord, error) {
	var a heldAliasRecord
	if _, err := getJSON(tx, join(pfxHeldAlias, []byte(lower)), &a, errAliasNotFound(lower)); err != nil {
		return nil, err
	}
	return &a, nil
}

// maxAliasLen and maxAliasesPerKey bound aliases.
const (
	maxAliasLen      = 256
	maxAliasesPerKey = 50
)
