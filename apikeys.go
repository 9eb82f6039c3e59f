package kms

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"time"
)

// APIKey is a credential of an Account. Key, the secret, is set only in the
// answer to its creation; the service keeps only its SHA-256 digest.
type APIKey struct {
	Key        string         `json:"key,omitempty"`
	KeyID      string         `json:"keyid"`
	Active     bool           `json:"active"`
	AccountID  string         `json:"accountId"`
	References APIKeyRefs     `json:"references"`
	Flags      Flags          `json:"flags"`
	Props      map[string]any `json:"props"`
	// OwnerID is the User whose access token created the key, if any.
	OwnerID   string    `json:"ownerId,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// APIKeyRefs are the references of an API key.
type APIKeyRefs struct {
	AccountID string `json:"accountId"`
}

// apiKeyRecord is an APIKey as stored: the digest in place of the secret.
type apiKeyRecord struct {
	APIKey
	Digest string `json:"digest"`
	// SealedSecret is the secret sealed under the seal key, bound to the
	// key's ID (apiKeySecretAAD): what verifies the requests the key
	// signs (AuthenticateSigned). Keys made before it was kept have none.
	SealedSecret []byte `json:"sealedSecret,omitempty"`

	sized // bytes as read by getAPIKey: its size in a page
}

// APIKeyInput creates an API key.
type APIKeyInput struct {
	// AccountID names the Account; with AccountByUID it is the Account's
	// UID instead.
	AccountID    string
	AccountByUID bool
	// Flags are required: nil is an Invalid error, Flags{} a key without
	// flags.
	Flags Flags
	Props map[string]any
}

// FlagAPIKeysValidate grants POST /auth/validate: checking another
// credential and recording the activity it reports.
const FlagAPIKeysValidate = "apikeys.validate"

// API key update operations (PUT /auth/apikey and PUT /auth/apikeyid).
const (
	UpdateMerge   = "merge"   // set the flags and props given, keep the others
	UpdateReplace = "replace" // the flags (props) given become all the flags (props)
	UpdateDelete  = "delete"  // remove the flags and props named
)

// checkGrant refuses flags that p does not hold itself: a credential can
// only hand on what it has.
func checkGrant(p *Principal, flags Flags) error {
	if name := p.uncovered(flags); name != "" {
		return Errorf(KindPermissionDenied, "cannot grant flag %q: the caller does not hold it", name)
	}
	return nil
}

// CreateAPIKey creates an API key for an Account and returns it in full,
// with its secret: the only time the secret is shown. It needs
// apikeys.write. Flags are required (an empty, non-nil Flags for a key
// without any); the caller may grant only flags it holds itself, and
// without accounts.all may create keys only for its own Account. A key made
// with a User's access token is owned by that User.
func (s *Service) CreateAPIKey(ctx context.Context, in APIKeyInput) (*APIKey, error) {
	p, err := s.authorize(ctx, "apikey.create", "", FlagAPIKeysWrite)
	if err != nil {
		return nil, err
	}
	if in.AccountID == "" {
		return nil, s.recordFailure(p, "apikey.create", "", Errorf(KindInvalid, "accountId is required"))
	}
	if in.Flags == nil {
		return nil, s.recordFailure(p, "apikey.create", "", Errorf(KindInvalid, "flags is required: give {} for a key without flags"))
	}
	flags, err := in.Flags.normalize()
	if err == nil {
		err = checkGrant(p, flags)
	}
	if err != nil {
		return nil, s.recordFailure(p, "apikey.create", "", err)
	}
	if err := checkProps("props", in.Props); err != nil {
		return nil, s.recordFailure(p, "apikey.create", "", err)
	}
	secret := newSecret(apiKeyPrefix)
	now := s.now().UTC()
	k := &apiKeyRecord{
		APIKey: APIKey{KeyID: newID(now), Active: true, Flags: flags, Props: cloneMap(in.Props), CreatedAt: now, UpdatedAt: now},
		Digest: secretDigest(secret),
	}
	if p.Kind == PrincipalUser {
		k.OwnerID = p.ID
	}
	act := s.newActivity(p, "apikey.create", "", true, map[string]any{"apikeyId": k.KeyID})
	err = s.submit(act, func(tx Txn) error {
		a, err := getAccount(tx, in.AccountID, in.AccountByUID)
		if err != nil {
			return err
		}
		if !visibleTo(p, a.ID) {
			return Errorf(KindNotFound, "account not found")
		}
		k.AccountID, k.References.AccountID = a.ID, a.ID
		if err := adjustCount(tx, countAPIKeys+a.ID, 1, s.opts.Limits.MaxAPIKeysPerAccount, "API keys per account"); err != nil {
			return err
		}
		if k.SealedSecret, err = s.sealAPIKeySecret(tx, k.KeyID, secret); err != nil {
			return err
		}
		return putAPIKey(tx, k)
	}, nil)
	if err != nil {
		return nil, err
	}
	out := k.APIKey
	out.Key = secret
	return &out, nil
}

// wildcardRing is the ring name under which the ring index lists keys whose
// flags reach every ring (keyring.*.<op>, or "*").
const wildcardRing = "*"

// ringIndex returns the ring index entries of k: one for each ring its
// flags grant an operation on, and one under wildcardRing when a granted
// flag reaches every ring. Flags set to false make none.
func (k *apiKeyRecord) ringIndex() [][]byte {
	var out [][]byte
	for _, ring := range k.Flags.rings() {
		out = append(out, join(pfxAPIRing, []byte(ring), sep, []byte(k.KeyID)))
	}
	for name, granted := range k.Flags {
		if granted && (name == FlagRoot || strings.HasPrefix(name, "keyring.*.")) {
			out = append(out, join(pfxAPIRing, []byte(wildcardRing), sep, []byte(k.KeyID)))
			break
		}
	}
	return out
}

// inRingIndex reports whether k, as it is now, makes the ring index entry
// entry. Readers of the index check it, so that an entry that an earlier
// version wrote for a flag set to false does not count.
func (k *apiKeyRecord) inRingIndex(entry []byte) bool {
	return slices.ContainsFunc(k.ringIndex(), func(e []byte) bool { return bytes.Equal(e, entry) })
}

// indexKeys returns every index entry of k but the digest's.
func (k *apiKeyRecord) indexKeys() [][]byte {
	out := append(k.ringIndex(), join(pfxAPIAccount, []byte(k.AccountID), sep, []byte(k.KeyID)))
	if k.OwnerID != "" {
		out = append(out, join(pfxAPIOwner, []byte(k.OwnerID), sep, []byte(k.KeyID)))
	}
	return out
}

// putAPIKey writes k and its index entries; old, when set, is the record
// it replaces, whose entries are removed first.
func putAPIKey(tx Txn, k *apiKeyRecord, old ...*apiKeyRecord) error {
	for _, o := range old {
		for _, idx := range o.indexKeys() {
			if err := tx.Delete(idx); err != nil {
				return err
			}
		}
	}
	v, err := json.Marshal(k)
	if err != nil {
		return err
	}
	if err := tx.Set(join(pfxAPIKey, []byte(k.KeyID)), v); err != nil {
		return err
	}
	if err := tx.Set(join(pfxAPIDigest, []byte(k.Digest)), []byte(k.KeyID)); err != nil {
		return err
	}
	for _, idx := range k.indexKeys() {
		if err := tx.Set(idx, nil); err != nil {
			return err
		}
	}
	return nil
}

func getAPIKey(tx Txn, id string) (*apiKeyRecord, error) {
	return getSized[apiKeyRecord](tx, join(pfxAPIKey, []byte(id)), errAPIKeyNotFound)
}

// APIKeyRef names an API key: by its ID, or by its secret when BySecret.
type APIKeyRef struct {
	Value    string
	BySecret bool
}

// visibleAPIKey reads the API key ref names, if the caller may see it.
func visibleAPIKey(tx Txn, p *Principal, ref APIKeyRef) (*apiKeyRecord, error) {
	id := ref.Value
	if id == "" {
		return nil, Errorf(KindInvalid, "API key is required")
	}
	if ref.BySecret {
		v, err := tx.Get(join(pfxAPIDigest, []byte(secretDigest(ref.Value))))
		if isNotFound(err) {
			return nil, Errorf(KindNotFound, "API key not found")
		} else if err != nil {
			return nil, err
		}
		id = string(v)
	}
	k, err := getAPIKey(tx, id)
	if err != nil {
		return nil, err
	}
	if !visibleTo(p, k.AccountID) {
		return nil, Errorf(KindNotFound, "API key not found")
	}
	return k, nil
}

// GetAPIKey returns an API key in its safe form (no secret). It needs
// apikeys.read; without accounts.all, only keys of the caller's Account.
func (s *Service) GetAPIKey(ctx context.Context, id string) (*APIKey, error) {
	p, err := s.authorize(ctx, "apikey.read", "", FlagAPIKeysRead)
	if err != nil {
		return nil, err
	}
	return audited(s, ctx, p, "apikey.read", "", func(tx Txn) (*APIKey, map[string]any, error) {
		k, err := visibleAPIKey(tx, p, APIKeyRef{Value: id})
		if err != nil {
			return nil, nil, err
		}
		return &k.APIKey, map[string]any{"apikeyId": id}, nil
	})
}

// listAPIKeys pages through the API keys found under the index prefixes
// (keys end in the API key ID), checking match on each.
func (s *Service) listAPIKeys(ctx context.Context, p *Principal, action string, req PageRequest, ps pageScan,
	match func(key []byte, k *apiKeyRecord) bool) (*List[*APIKey], error) {
	return audited(s, ctx, p, action, "", func(tx Txn) (*List[*APIKey], map[string]any, error) {
		out := &List[*APIKey]{Data: []*APIKey{}}
		var cur *apiKeyRecord
		ps.Match = func(key, _ []byte) (bool, error) {
			if len(key) < idLen {
				return false, Errorf(KindInternal, "API key index entry %q is malformed", key)
			}
			k, err := getAPIKey(tx, string(key[len(key)-idLen:]))
			if isNotFound(err) {
				return false, nil
			} else if err != nil {
				return false, err
			}
			cur = k
			return visibleTo(p, k.AccountID) && (match == nil || match(key, k)), nil
		}
		ps.Size = func(_, _ []byte) int { return cur.stored }
		ps.Emit = func(_, _ []byte) error {
			out.Data = append(out.Data, &cur.APIKey)
			return nil
		}
		var err error
		out.Pagination, err = s.pager.scan(ctx, tx, req, ps)
		return out, map[string]any{"count": out.Pagination.Count}, err
	})
}

// ListAPIKeys pages through the API keys, oldest first, in their safe
// form. It needs apikeys.read; without accounts.all it lists the caller's
// Account's keys.
func (s *Service) ListAPIKeys(ctx context.Context, req PageRequest) (*List[*APIKey], error) {
	p, err := s.authorize(ctx, "apikey.list", "", FlagAPIKeysRead)
	if err != nil {
		return nil, err
	}
	ps := pageScan{Scope: "apikeys", Prefix: pfxAPIKey}
	if !p.Can(FlagAllAccounts) {
		ps = pageScan{Scope: "apikeys/" + p.AccountID, Prefix: join(pfxAPIAccount, []byte(p.AccountID), sep)}
	}
	return s.listAPIKeys(ctx, p, "apikey.list", req, ps, nil)
}

// ListAccountAPIKeys pages through the API keys of one Account. It needs
// apikeys.read; without accounts.all only for the caller's own Account.
func (s *Service) ListAccountAPIKeys(ctx context.Context, ref AccountRef, req PageRequest) (*List[*APIKey], error) {
	p, err := s.authorize(ctx, "apikey.list", "", FlagAPIKeysRead)
	if err != nil {
		return nil, err
	}
	a, err := viewOne(ctx, s.store, func(tx Txn) (*Account, error) { return visibleAccount(tx, p, ref) })
	if err != nil {
		return nil, s.recordFailure(p, "apikey.list", "", internalError("read account", err))
	}
	ps := pageScan{Scope: "apikeys/" + a.ID, Prefix: join(pfxAPIAccount, []byte(a.ID), sep)}
	return s.listAPIKeys(ctx, p, "apikey.list", req, ps, nil)
}

// SearchAPIKeysByRing pages through the API keys whose flags grant an
// operation on a ring, then those whose flags reach every ring
// (keyring.*.<op> or "*"); flags set to false do not count. It needs
// apikeys.read; without accounts.all only the caller's Account's keys are
// listed.
func (s *Service) SearchAPIKeysByRing(ctx context.Context, ref RingRef, req PageRequest) (*List[*APIKey], error) {
	p, err := s.authorize(ctx, "apikey.search", "", FlagAPIKeysRead)
	if err != nil {
		return nil, err
	}
	r, err := s.anyRing(ctx, ref)
	if err != nil {
		return nil, s.recordFailure(p, "apikey.search", "", err)
	}
	lower := strings.ToLower(r.Name)
	explicit := join(pfxAPIRing, []byte(lower), sep)
	ps := pageScan{Scope: "apikeys/ring/" + r.ID, Prefix: explicit, Then: [][]byte{join(pfxAPIRing, []byte(wildcardRing), sep)}}
	return s.listAPIKeys(ctx, p, "apikey.search", req, ps, func(key []byte, k *apiKeyRecord) bool {
		// A key both naming the ring and reaching every ring was listed
		// with the first prefix already.
		return k.inRingIndex(key) && (bytes.HasPrefix(key, explicit) || !slices.Contains(k.Flags.rings(), lower))
	})
}

// anyRing finds a ring of either group by name or ID.
func (s *Service) anyRing(ctx context.Context, ref RingRef) (*ringRecord, error) {
	find := s.ringByName
	if ref.ByID {
		if _, ok := parseID(ref.Name); !ok {
			return nil, Errorf(KindNotFound, "key ring not found") // no ring has such an ID
		}
		find = s.ringByID
	}
	r, err := find(ctx, groupKS, ref.Name)
	if isNotFound(err) {
		r, err = find(ctx, groupAsym, ref.Name)
	}
	return r, err
}

// APIKeyUpdate changes an API key (PUT /auth/apikey and /auth/apikeyid).
type APIKeyUpdate struct {
	// Op says what Flags and Props do: UpdateMerge, UpdateReplace or
	// UpdateDelete (which removes the members named, whatever their values).
	Op string
	// Ref names the key: by ID, or by secret.
	Ref APIKeyRef
	// Active, when set, activates or deactivates the key.
	Active *bool
	// References, when set, moves the key to another Account (needs
	// accounts.all).
	References *APIKeyRefs
	Flags      Flags
	Props      map[string]any
}

// APIKeyUpdateResult is the answer to UpdateAPIKey: the key as it is now.
// Key is the secret the caller named the key by, echoed; empty when the key
// was named by ID. Flags and Props are nil (and left out of the JSON) when
// the caller does not hold apikeys.read: a write does not show what only a
// read may.
type APIKeyUpdateResult struct {
	Key        string         `json:"key,omitempty"`
	KeyID      string         `json:"keyid"`
	Op         string         `json:"op"`
	Active     bool           `json:"active"`
	References APIKeyRefs     `json:"references"`
	Flags      Flags          `json:"flags,omitzero"`
	Props      map[string]any `json:"props,omitzero"`
}

// UpdateAPIKey changes an API key's flags, props, state or Account. It
// needs apikeys.write and the reach rule (checkFlagReach): the caller must
// hold every flag the key grants as it is, and every flag the change adds
// (activating a key thus needs all of its flags). Without accounts.all it
// may change only its own Account's keys. The change takes effect on the
// key's next request. The answer holds the key's flags and props only for
// a caller with apikeys.read.
func (s *Service) UpdateAPIKey(ctx context.Context, in APIKeyUpdate) (*APIKeyUpdateResult, error) {
	p, err := s.authorize(ctx, "apikey.update", "", FlagAPIKeysWrite)
	if err != nil {
		return nil, err
	}
	if in.Op != UpdateMerge && in.Op != UpdateReplace && in.Op != UpdateDelete {
		return nil, s.recordFailure(p, "apikey.update", "", Errorf(KindInvalid, "op must be merge, replace or delete"))
	}
	flags, err := in.Flags.normalize()
	if err != nil {
		return nil, s.recordFailure(p, "apikey.update", "", err)
	}
	var out *apiKeyRecord
	var oldDigest string
	act := s.newActivity(p, "apikey.update", "", true, map[string]any{"op": in.Op})
	err = s.submit(act, func(tx Txn) error {
		old, err := visibleAPIKey(tx, p, in.Ref)
		if err != nil {
			return err
		}
		act.Props["apikeyId"] = old.KeyID
		if err := checkFlagReach(p, "API key "+old.KeyID, "it", old.Flags); err != nil {
			return err
		}
		k := *old
		k.Flags = applyOp(in.Op, old.Flags, flags)
		k.Props = applyOp(in.Op, old.Props, in.Props)
		if err := checkProps("props", k.Props); err != nil {
			return err // merges add up
		}
		added := Flags{}
		for name, granted := range k.Flags {
			if granted && !old.Flags[name] {
				added[name] = true
			}
		}
		if err := checkGrant(p, added); err != nil {
			return err
		}
		if in.Active != nil {
			k.Active = *in.Active
		}
		if in.References != nil && in.References.AccountID != old.AccountID {
			// Naming the key's own Account again (a GET answer sent back)
			// changes nothing; moving it needs accounts.all.
			if !p.Can(FlagAllAccounts) {
				return Errorf(KindPermissionDenied, "moving an API key to another account needs %s", FlagAllAccounts)
			}
			a, err := getAccount(tx, in.References.AccountID, false)
			if err != nil {
				return err
			}
			if err := adjustCount(tx, countAPIKeys+a.ID, 1, s.opts.Limits.MaxAPIKeysPerAccount, "API keys per account"); err != nil {
				return err
			}
			if err := adjustCount(tx, countAPIKeys+old.AccountID, -1, 0, ""); err != nil {
				return err
			}
			k.AccountID, k.References.AccountID = a.ID, a.ID
		}
		k.UpdatedAt = s.now().UTC()
		out, oldDigest = &k, old.Digest
		return putAPIKey(tx, &k, old)
	}, func() { s.principals.Remove(oldDigest); s.signers.Remove(out.KeyID) })
	if err != nil {
		return nil, err
	}
	res := &APIKeyUpdateResult{KeyID: out.KeyID, Op: in.Op, Active: out.Active, References: out.References}
	if p.Can(FlagAPIKeysRead) {
		res.Flags, res.Props = out.Flags, orEmpty(out.Props)
	}
	if in.Ref.BySecret {
		res.Key = in.Ref.Value
	}
	return res, nil
}

// applyOp applies an update operation to a map and returns the new map.
func applyOp[V any](op string, cur, given map[string]V) map[string]V {
	out := make(map[string]V, len(cur)+len(given))
	switch op {
	case UpdateReplace:
		if given == nil {
			given = cur
		}
		for k, v := range given {
			out[k] = v
		}
	case UpdateDelete:
		for k, v := range cur {
			if _, drop := given[k]; !drop {
				out[k] = v
			}
		}
	default: // merge
		for k, v := range cur {
			out[k] = v
		}
		for k, v := range given {
			out[k] = v
		}
	}
	return out
}

// DeleteAPIKeyResult is the answer to DeleteAPIKey: the value the key was
// named by, and whether that was its ID.
type DeleteAPIKeyResult struct {
	APIKey string `json:"apikey"`
	ID     bool   `json:"id"`
}

// DeleteAPIKey deletes an API key, named by ID or by secret. It stops
// authenticating at once. It needs apikeys.write and the reach rule (the
// caller holds every flag the key grants); without accounts.all only keys
// of the caller's Account.
func (s *Service) DeleteAPIKey(ctx context.Context, ref APIKeyRef) (*DeleteAPIKeyResult, error) {
	p, err := s.authorize(ctx, "apikey.delete", "", FlagAPIKeysWrite)
	if err != nil {
		return nil, err
	}
	var digest, keyID string
	act := s.newActivity(p, "apikey.delete", "", true, nil)
	err = s.submit(act, func(tx Txn) error {
		k, err := visibleAPIKey(tx, p, ref)
		if err != nil {
			return err
		}
		act.Props["apikeyId"] = k.KeyID
		if err := checkFlagReach(p, "API key "+k.KeyID, "it", k.Flags); err != nil {
			return err
		}
		digest, keyID = k.Digest, k.KeyID
		dels := append(k.indexKeys(), join(pfxAPIKey, []byte(k.KeyID)), join(pfxAPIDigest, []byte(k.Digest)))
		for _, d := range dels {
			if err := tx.Delete(d); err != nil {
				return err
			}
		}
		return adjustCount(tx, countAPIKeys+k.AccountID, -1, 0, "")
	}, func() { s.principals.Remove(digest); s.signers.Remove(keyID) })
	if err != nil {
		return nil, err
	}
	return &DeleteAPIKeyResult{APIKey: ref.Value, ID: !ref.BySecret}, nil
}

// ValidateInput asks whether an API key is valid and records the activity
// the caller reports for it (POST /auth/validate).
type ValidateInput struct {
	Key      string            `json:"key"`
	Activity *ValidateActivity `json:"activity,omitempty"`
}

// ValidateActivity is the activity reported with a validation: what the
// key is about to do. It is a claim of the caller's: the record of the
// validation keeps it, and it never counts as the operation itself.
type ValidateActivity struct {
	// Action is an operation on a ring (encrypt, decrypt, rotate...) when
	// RingName is set, else a flag name; the key's flags decide whether
	// it is allowed. The record keeps it as prop reportedAction.
	Action   string         `json:"action"`
	RingName string         `json:"ringname"`
	Props    map[string]any `json:"props"`
}

// ValidateResult is the answer to ValidateAPIKey.
type ValidateResult struct {
	Valid bool `json:"valid"`
	// ValidAction, set when an activity with an action was given, says
	// whether the key's flags allow it.
	ValidAction *bool  `json:"validAction,omitempty"`
	KeyID       string `json:"keyid,omitempty"`
	AccountID   string `json:"accountId,omitempty"`
}

// ValidateAPIKey checks another API key: whether it is valid (active, of an
// existing Account) and, with an activity, whether its flags allow the
// activity's action. It records the validation as that key's, granted or
// denied (valid false, result permission_denied; for a key that is not
// valid, result unauthenticated), always with action "validate": what the
// caller reports is a claim, which the record keeps (the reported action
// as prop reportedAction, the activity's props under the service's own)
// and which never passes for the operation itself, so a validation adds
// nothing to what the trail's indexes tell of a key (usage counts, the
// hashes issued under it: keyUses), and a search by action finds it as a
// validation only. Over the caller's props are the service's own:
// validatedBy (the caller), via "validate", flag (the flag checked),
// reportedAction, and action, ring and result. It needs
// apikeys.validate; without accounts.all, keys of other Accounts are
// reported invalid.
func (s *Service) ValidateAPIKey(ctx context.Context, in ValidateInput) (*ValidateResult, error) {
	p, err := s.authorize(ctx, "apikey.validate", "", FlagAPIKeysValidate)
	if err != nil {
		return nil, err
	}
	if in.Key == "" {
		return nil, s.recordFailure(p, "apikey.validate", "", Errorf(KindInvalid, "key is required"))
	}
	if in.Activity != nil {
		err := checkProps("activity.props", in.Activity.Props)
		if len(in.Activity.Action) > maxFlagLen || len(in.Activity.RingName) > maxRingNameLen {
			// Longer ones name no flag, and would not fit the trail's indexes.
			err = Errorf(KindInvalid, "activity.action may have at most %d characters, activity.ringname %d", maxFlagLen, maxRingNameLen)
		}
		if err != nil {
			return nil, s.recordFailure(p, "apikey.validate", "", err)
		}
	}
	res := &ValidateResult{}
	var subject *Principal
	if q, err := s.Authenticate(ctx, in.Key); err == nil && q.Kind == PrincipalAPIKey && visibleTo(p, q.AccountID) {
		subject = q
		res.Valid, res.KeyID, res.AccountID = true, q.ID, q.AccountID
	} else if err != nil && ErrorKind(err) != KindUnauthenticated {
		return nil, err
	}
	ring := ""
	// The caller's props come first: the members the service sets (these,
	// flag and reportedAction below, and action, ring and result in the
	// journal) overwrite them. The record's action is the service's,
	// whatever the caller reports, so a validation cannot pass for the
	// operation it reports.
	props := map[string]any{}
	if in.Activity != nil {
		maps.Copy(props, in.Activity.Props)
	}
	delete(props, "flag")
	delete(props, "reportedAction")
	props["validatedBy"], props["via"] = p.ID, validateAction
	var outcome error // the recorded activity's: a refused key, or a denied action
	if !res.Valid {
		outcome = errBadCredential
	}
	if in.Activity != nil && in.Activity.Action != "" {
		props["reportedAction"] = in.Activity.Action
		flag := in.Activity.Action
		if in.Activity.RingName != "" {
			ring = strings.ToLower(in.Activity.RingName)
			flag = RingFlag(in.Activity.RingName, in.Activity.Action)
		}
		ok := subject.Can(flag)
		res.ValidAction = &ok
		if !ok && outcome == nil {
			outcome = Errorf(KindPermissionDenied, "missing permission flag %s", flag)
		}
		props["flag"] = flag
	}
	actor := p
	if subject != nil {
		actor = subject
	}
	if err := s.journal.Submit(&activityJob{Rec: s.newActivity(actor, validateAction, ring, outcome == nil, props), Fail: outcome}); err != nil {
		return nil, err
	}
	return res, nil
}
