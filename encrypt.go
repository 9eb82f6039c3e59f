package kms

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/ringkms/kms/internal/encryptcount"
	"github.com/ringkms/kms/internal/headersign"
	"github.com/ringkms/kms/internal/journal"
)

// EncryptInput asks for the active key of a ring.
type EncryptInput struct {
	RingName string      `json:"ringname"`
	Asset    *AssetInput `json:"asset,omitempty"`
}

// EncryptResult is the answer to Encrypt: the key to encrypt with (wrapped
// for the ring's public key), the unique hash of this call, and the signed
// header that binds it.
type EncryptResult struct {
	Key *Key `json:"key"`
	// KeyShare is the call's share of its data key, on a ring whose
	// dataKeys is split (split.go): standard base64 of 32 bytes.
	KeyShare string `json:"keyShare,omitempty"`
	RingID   string `json:"ringId"`
	Hash     string `json:"hash"`
	Header   string `json:"header"`
	// Asset is the Asset created or updated by the call, if any.
	Asset *Asset `json:"asset,omitempty"`
}

// DecryptInput names the key of an earlier encrypt call.
type DecryptInput struct {
	Hash   string `json:"hash"`
	Header string `json:"header"`
}

// SignedAsset is the result of verifying the Asset a header signs. A
// verified Asset's Data and Parents are those the header signs, so its
// digest (docs/FORMAT.md section 4.1) is recomputed from them; both are
// empty when the header signs no Asset, when verification failed, or for
// a caller who may not read the Asset.
type SignedAsset struct {
	Valid   bool           `json:"valid"`
	ID      string         `json:"id"`
	Message string         `json:"message"`
	Data    map[string]any `json:"data"`
	Parents []string       `json:"parents"`
}

// DecryptResult is the answer to Decrypt. When verification fails, Decrypt
// returns it with Asset.Valid false, no Key, and an Unprocessable error.
type DecryptResult struct {
	RingID   string      `json:"ringId"`
	RingName string      `json:"ringname"`
	Key      *Key        `json:"key"`
	KeyShare string      `json:"keyShare,omitempty"` // as in EncryptResult
	Asset    SignedAsset `json:"asset"`
}

// HashInfo is what a hash resolves to.
type HashInfo struct {
	RingID string `json:"ringId"`
	KeyID  string `json:"keyId"`
}

// HeaderInfo describes a header.
type HeaderInfo struct {
	Valid          bool   `json:"valid"`
	Version        int    `json:"version"`
	HasSignedAsset bool   `json:"hasSignedAsset"`
	Hash           string `json:"hash"`
}

// Encrypt hands out the active key of a /ks ring, wrapped, with a new hash
// and a signed header, and on a ring with split data keys the call's key
// share (split.go). With a maxEncryptCount configured, the ring rotates
// by itself when its active key has served that many calls. It needs
// keyring.<name>.encrypt; updating an Asset (in.Asset.AssetID) also needs
// the encrypt flag of the ring the Asset was created through, or
// assets.write. The Asset in the answer carries the data the call gave;
// an update that gave none carries the stored data only for a caller with
// assets.read, and {} otherwise.
func (s *Service) Encrypt(ctx context.Context, in EncryptInput) (*EncryptResult, error) {
	if in.RingName == "" {
		return nil, Errorf(KindInvalid, "ringname is required")
	}
	p, r, err := s.resolveRing(ctx, groupKS, RingRef{Name: in.RingName}, "encrypt", OpEncrypt)
	if err != nil {
		return nil, err
	}
	if s.signer.Load() == nil {
		// Nothing is written: no key could sign the header (CheckSigner).
		return nil, errNoSigner
	}
	lower := strings.ToLower(r.Name)
	var data json.RawMessage
	var parents []string
	if in.Asset != nil {
		if data, parents, err = checkAssetInput(in.Asset); err != nil {
			return nil, s.recordFailure(p, "encrypt", lower, err)
		}
		if in.Asset.AssetID != "" {
			if err := s.authorizeAssetUpdate(ctx, p, r, in.Asset.AssetID); err != nil {
				return nil, err
			}
		}
	}
	r, k, err := s.activeKey(ctx, p, r)
	if err != nil {
		return nil, err
	}
	if err := k.usable(r); err != nil {
		// The active key cannot be disabled (keystate.go): never hand
		// out one that is, whatever brought it here.
		return nil, s.recordFailure(p, "encrypt", lower, err)
	}
	ringID, err := decodeHexID(r.ID)
	if err != nil {
		return nil, err
	}
	keyID, err := decodeHexID(k.ID)
	if err != nil {
		return nil, err
	}
	hash := s.newHash(ringID, keyID)
	share, err := s.keyShare(r, hash)
	if err != nil {
		return nil, err
	}
	now := s.now().UTC()
	res := &EncryptResult{Key: k.key(true), KeyShare: share, RingID: r.ID, Hash: b64String(hash)}
	// The hash in the record lists it among the key's (ListKeyHashes).
	act := s.newActivity(p, "encrypt", lower, true, map[string]any{"ringId": r.ID, "keyId": k.ID, "hash": res.Hash})
	if in.Asset == nil {
		// The journal signs the header with the others of its batch.
		hdr := &headersign.Req{Body: s.headerBody(hash, now.UnixMilli(), nil)}
		if err := s.journal.Submit(&activityJob{Rec: act, Header: hdr, Checks: s.encryptChecks(r, k)}); err != nil {
			return nil, err
		}
		if hdr.Proof == nil {
			return nil, errSignFailed
		}
		res.Header = s.finishHeader(hdr)
		return res, nil
	}

	// The Asset is written in the journal batch of the call's record (the
	// store transaction holds the record too, under act/pending); the
	// header then signs the Asset as written.
	assetID := in.Asset.AssetID
	act.Props["assetOp"] = "update"
	if assetID == "" {
		assetID = newID(now)
		act.Props["assetOp"] = "create"
	}
	act.Props["assetId"] = assetID
	var rec *assetRecord
	hdr := &headersign.Req{}
	mutate := func(tx Txn) error {
		var err error
		if rec, err = s.writeAsset(tx, p, r.ID, k.ID, assetID, in.Asset, data, parents, now); err != nil {
			return err
		}
		id, err := decodeHexID(rec.ID)
		if err != nil {
			return err
		}
		hdr.Body = s.headerBody(hash, now.UnixMilli(), &assetSeal{id: id, digest: rec.digest()})
		return nil
	}
	if err := s.journal.Submit(&activityJob{Rec: act, Mutate: mutate, Header: hdr, Checks: s.encryptChecks(r, k)}); err != nil {
		return nil, err
	}
	if hdr.Proof == nil {
		return nil, errSignFailed // the Asset is written, as the record says
	}
	if res.Asset, err = rec.asset(); err != nil {
		return nil, internalError("decode asset", err)
	}
	if in.Asset.Data == nil && !p.Can(FlagAssetsRead) {
		// The data is not the call's own: it goes only to a reader.
		res.Asset.Data = map[string]any{}
	}
	res.Header = s.finishHeader(hdr)
	return res, nil
}

// checkAssetInput validates the Asset of an encrypt call and returns its
// data as canonical JSON and its parents sorted.
func checkAssetInput(in *AssetInput) (json.RawMessage, []string, error) {
	if in.AssetID != "" {
		if _, ok := parseID(in.AssetID); !ok {
			return nil, nil, Errorf(KindInvalid, "asset.assetId %q is not an Asset ID", in.AssetID)
		}
	}
	var data json.RawMessage
	if in.Data != nil || in.AssetID == "" {
		var err error
		if data, err = canonicalData(in.Data); err != nil {
			return nil, nil, err
		}
	}
	parents, err := cleanParents(in.Parents)
	if err != nil {
		return nil, nil, err
	}
	if in.AssetID != "" && slices.Contains(parents, in.AssetID) {
		return nil, nil, Errorf(KindInvalid, "asset.parents: an asset cannot be its own parent")
	}
	return data, parents, nil
}

// Decrypt verifies a hash and its header and returns the key they name
// (and on a ring with split data keys the call's key share), with the
// result of verifying the Asset the header signs. A hash or header
// that was altered, that does not belong together, or whose Asset no longer
// matches, gives the result with Asset.Valid false and no key, together with
// an Unprocessable error whose message says which check failed. It needs
// keyring.<name>.decrypt on the ring the hash names. The verified Asset's
// data and parents, from which its digest is recomputed, are answered
// only to a caller that may read the Asset (assets.read, and the Asset's
// Account or accounts.all); others get {} and [] and a message that says
// so.
func (s *Service) Decrypt(ctx context.Context, in DecryptInput) (*DecryptResult, error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	if in.Hash == "" {
		return nil, Errorf(KindInvalid, "hash is required")
	}
	if in.Header == "" {
		return nil, Errorf(KindInvalid, "header is required")
	}
	ref, err := s.parseHash(in.Hash)
	if err != nil {
		return s.decryptFailed(p, "", &DecryptResult{}, ErrorMessage(err))
	}
	r, err := s.ringByID(ctx, groupKS, ref.ringID)
	if err != nil {
		return nil, s.recordFailure(p, "decrypt", "", err)
	}
	lower := strings.ToLower(r.Name)
	if _, err := s.authorize(ctx, "decrypt", lower, RingFlag(r.Name, OpDecrypt)); err != nil {
		return nil, err
	}
	res := &DecryptResult{RingID: r.ID, RingName: r.Name}
	h, err := s.parseHeader(in.Header)
	switch {
	case err != nil:
		return s.decryptFailed(p, lower, res, "header failed verification: it is malformed")
	case !h.macOK:
		return s.decryptFailed(p, lower, res, "header failed verification: its signature does not match")
	case !bytes.Equal(h.hash, ref.raw):
		return s.decryptFailed(p, lower, res, "header failed verification: it was issued for another hash")
	}
	k, err := s.keyByID(ctx, r.ID, ref.keyID)
	if err != nil {
		return nil, s.recordFailure(p, "decrypt", lower, err)
	}
	if err := k.usable(r); err != nil {
		return nil, s.recordFailure(p, "decrypt", lower, err)
	}
	props := map[string]any{"ringId": r.ID, "keyId": k.ID}
	res.Asset = SignedAsset{Valid: true, Message: "hash and header verified; the header signs no asset", Data: map[string]any{}, Parents: []string{}}
	if h.asset != nil {
		a, failed, err := s.verifyAsset(ctx, h.asset)
		if err != nil {
			return nil, err
		}
		if failed != "" {
			res.Asset.ID = hex.EncodeToString(h.asset.id[:])
			return s.decryptFailed(p, lower, res, failed)
		}
		props["assetId"] = a.ID
		res.Asset = SignedAsset{Valid: true, ID: a.ID, Message: "hash, header and asset verified", Data: a.Data, Parents: a.Parents}
		if !p.Can(FlagAssetsRead) || !visibleTo(p, a.AccountID) {
			res.Asset.Data, res.Asset.Parents = map[string]any{}, []string{}
			res.Asset.Message = "hash, header and asset verified; the asset's data and parents are shown only with " + FlagAssetsRead + " for its account"
		}
	}
	share, err := s.keyShare(r, ref.raw)
	if err != nil {
		return nil, err
	}
	if err := s.record(p, "decrypt", lower, props, nil); err != nil {
		return nil, err
	}
	res.Key, res.KeyShare = k.key(true), share
	return res, nil
}

// decryptFailed records a decrypt that failed verification (valid false,
// result unprocessable) and returns its 422 result.
func (s *Service) decryptFailed(p *Principal, ring string, res *DecryptResult, msg string) (*DecryptResult, error) {
	res.Asset = SignedAsset{Valid: false, ID: res.Asset.ID, Message: msg, Data: map[string]any{}, Parents: []string{}}
	opErr := Errorf(KindUnprocessable, "%s", msg)
	if err := s.refuse(p, "decrypt", ring, map[string]any{"reason": msg}, opErr); err != opErr {
		return nil, err // the journal's
	}
	return res, opErr
}

// LookupHash returns the ring and key a hash names. A malformed or forged
// hash is Invalid; a hash whose ring or key was deleted is NotFound. It
// needs keyring.<name>.read.
func (s *Service) LookupHash(ctx context.Context, hash string) (*HashInfo, error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	ref, err := s.parseHash(hash)
	if err != nil {
		return nil, s.refuse(p, "hash.lookup", "", nil, err)
	}
	r, err := s.lookupRef(ctx, p, "hash.lookup", ref, map[string]any{"keyId": ref.keyID})
	if err != nil {
		return nil, err
	}
	return &HashInfo{RingID: r.ID, KeyID: ref.keyID}, nil
}

// lookupRef checks, for a lookup recorded as action, that the ring and
// the key that ref names exist and that the caller may read the ring
// (keyring.<name>.read), records the lookup with props and the ring's ID,
// and returns the ring. A failure is recorded too.
func (s *Service) lookupRef(ctx context.Context, p *Principal, action string, ref hashRef, props map[string]any) (*ringRecord, error) {
	r, err := s.ringByID(ctx, groupKS, ref.ringID)
	if err != nil {
		return nil, s.recordFailure(p, action, "", err)
	}
	lower := strings.ToLower(r.Name)
	if _, err := s.authorize(ctx, action, lower, RingFlag(r.Name, OpRead)); err != nil {
		return nil, err
	}
	if _, err := s.keyByID(ctx, r.ID, ref.keyID); err != nil {
		return nil, s.recordFailure(p, action, lower, err)
	}
	props["ringId"] = r.ID
	if err := s.record(p, action, lower, props, nil); err != nil {
		return nil, err
	}
	return r, nil
}

// LookupHeader parses a header and verifies its MAC and its Ed25519
// signature. A header that does not decode is Invalid. A header that
// decodes but fails verification is described with Valid false. A valid
// header whose ring or key was deleted is NotFound. It needs
// keyring.<name>.read on the ring of a valid header.
func (s *Service) LookupHeader(ctx context.Context, header string) (*HeaderInfo, error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	h, err := s.parseHeader(header)
	if err != nil {
		return nil, s.refuse(p, "header.lookup", "", nil, err)
	}
	info := &HeaderInfo{Version: h.version, HasSignedAsset: h.asset != nil, Hash: b64String(h.hash)}
	ref, hashErr := s.parseHash(info.Hash)
	if !h.macOK || hashErr != nil || !s.verifySignature(&h) {
		// Answered as a result (valid false), recorded as a refusal.
		if err := s.refuse(p, "header.lookup", "", map[string]any{"valid": false}, nil); err != nil {
			return nil, err
		}
		return info, nil
	}
	if _, err := s.lookupRef(ctx, p, "header.lookup", ref, map[string]any{"valid": true}); err != nil {
		return nil, err
	}
	info.Valid = true
	return info, nil
}

// encryptChecks are what must hold when an encrypt job handing out key k
// of ring r commits, when other processes share the store; none when the
// Trail is the process's own (the journal would skip them: one process
// alone removes a deleted ring, and a disabled key, from its caches as
// the change commits, and building them costs four allocations a call). The ring's
// record must still exist, so that no process hands out a key of a ring
// that another deleted, whatever its caches say; and the key must still
// be usable (keyUsable), so that a node whose cache has not yet seen the
// ring's rotation and the key's disabling elsewhere (as a "rotate": true
// disable makes them, in one call) refuses the encrypt rather than hand
// out a disabled key.
func (s *Service) encryptChecks(r *ringRecord, k *keyRecord) []journal.Check {
	if _, shared := s.trail.(SharedTrail); !shared {
		return nil
	}
	ring := ringExists
	if r.keysHeld() {
		ring = heldRingUsable
	}
	return []journal.Check{
		{Key: join(pfxRing, []byte(r.ID)), Verdict: ring},
		{Key: join(pfxKey, []byte(r.ID), sep, []byte(k.ID)), Verdict: func(v []byte, found bool) (error, error) {
			return keyUsable(v, found, r)
		}},
	}
}

// heldRingUsable is the verdict on the record of a held key's ring that
// must exist and be enabled (heldkeys_state.go), as another process may
// have disabled it since this one cached it.
func heldRingUsable(v []byte, found bool) (jobErr, err error) {
	if !found {
		return errRingDeleted(), nil
	}
	var stored struct { // what the check reads of the ring: not its keys, tags or description
		Name string `json:"name"`
		Held struct {
			State        string     `json:"state"`
			DeletionDate *time.Time `json:"deletionDate"`
		} `json:"transit"`
	}
	if err := json.Unmarshal(v, &stored); err != nil {
		return nil, err
	}
	r := ringRecord{Name: stored.Name, Held: &heldSettings{State: stored.Held.State, DeletionDate: stored.Held.DeletionDate}}
	return r.heldUsable(), nil
}

// ringExists is the verdict on a ring's record that must exist.
func ringExists(_ []byte, found bool) (jobErr, err error) {
	if !found {
		return errRingDeleted(), nil
	}
	return nil, nil
}

// activeKey returns the ring r (as it then is) and its active key for an
// encrypt call by p, and counts the call against the key: the ring is
// rotated first when its active key is past its rotationPeriod
// (rotateOverdue) or has served its encrypt limit (encryptLimit:
// maxEncryptCount, or a held key's bound; reserveEncrypt), whichever
// comes first.
func (s *Service) activeKey(ctx context.Context, p *Principal, r *ringRecord) (*ringRecord, *keyRecord, error) {
	if r.RotateDue != 0 && s.now().UnixMilli() >= r.RotateDue {
		var err error
		if r, err = s.rotateOverdue(ctx, r); err != nil {
			return nil, nil, err
		}
	}
	if limit, reason := s.encryptLimit(r); limit > 0 {
		var err error
		if r, err = s.reserveEncrypt(ctx, p, r, limit, reason); err != nil {
			return nil, nil, err
		}
	} else if err := s.counts.Count(r.ID, r.ActiveKey, 0); err != nil {
		return nil, nil, err
	}
	k, err := s.keyByID(ctx, r.ID, r.ActiveKey)
	if err != nil {
		return nil, nil, err
	}
	return r, k, nil
}

// Encrypt calls are counted per key against reservations in the store
// (internal/encryptcount), whether the ring has a maxEncryptCount or not,
// so that a limit set later counts the calls before it.

// reserveEncrypt counts one encrypt call on the active key of a ring with
// an encrypt limit, max, rotating the ring first when the key is spent
// (recorded with the limit's reason), and returns the ring and key to
// use.
func (s *Service) reserveEncrypt(ctx context.Context, p *Principal, r *ringRecord, max uint64, reason string) (*ringRecord, error) {
	r, mu, err := s.lockRingAfresh(ctx, r)
	if err != nil {
		return nil, err
	}
	defer mu.Unlock()
	err = s.counts.Count(r.ID, r.ActiveKey, max)
	if err != encryptcount.ErrSpent {
		return r, err
	}
	// Spent: rotate, unless another process did meanwhile (the rotation's
	// guard sees the ring as its transaction reads it). Other nodes may
	// use up the new key before this one counts on it (each reserves a
	// block of its calls): then the ring turns again, a few times.
	action := "keyring.rotate.auto"
	if r.Group == groupAsym {
		action = "asym.keyring.rotate.auto"
	}
	for attempt := 0; ; attempt++ {
		spent := r.ActiveKey
		if _, r, _, err = s.rotate(p, r, action, activeGuard(spent), map[string]any{"reason": reason, "limit": max}); err != nil {
			return nil, err
		}
		err = s.counts.Count(r.ID, r.ActiveKey, max)
		if err != encryptcount.ErrSpent {
			if err != nil {
				return nil, err
			}
			return r, nil
		}
		if attempt == maxSpentRotations {
			return nil, Errorf(KindUnavailable, "the new keys of ring %s were used up by other calls meanwhile, %d times; try again", r.Name, attempt+1)
		}
	}
}

// maxSpentRotations bounds the rotations one encrypt call makes when
// other nodes keep using up the ring's new keys first.
const maxSpentRotations = 8

// The reasons of a rotation by count (its record's props.reason).
const (
	reasonMaxEncryptCount = "maxEncryptCount"
	reasonNonceBound      = "nonceBound"
)

// encryptLimit is how many encrypt calls one key of r serves, and why:
// r's maxEncryptCount (0: no limit), or for a held key's ring the
// bound of Options.MaxHeldKeyEncryptions when it is lower. The calls are
// counted against reservations in the store (internal/encryptcount), so
// the bound holds across the processes of a cluster as maxEncryptCount
// does.
func (s *Service) encryptLimit(r *ringRecord) (uint64, string) {
	limit := uint64(max(r.Algos.AES256.MaxEncryptCount, 0))
	if bound := s.opts.MaxHeldKeyEncryptions; r.keysHeld() && (limit == 0 || bound < limit) {
		return bound, reasonNonceBound
	}
	return limit, reasonMaxEncryptCount
}
