package kms

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ringkms/kms/internal/splitkey"
	"github.com/ringkms/kms/internal/wrap"
)

// AlgoAES256 is the one key algorithm of ringkms.
const AlgoAES256 = "aes256"

// Ring groups. Names are unique across both; each group sees only its own.
const (
	groupKS   = "ks"
	groupAsym = "asym"
)

// maxRingNameLen bounds a key ring name.
const maxRingNameLen = 64

// KeyRing is a key ring of the /ks group, whose keys are handed out
// wrapped for the ring's public key.
type KeyRing struct {
	ID              string         `json:"id"`
	Name            string         `json:"name"`
	DisplayName     string         `json:"displayName"`
	ActiveKey       string         `json:"activeKey"`
	ActiveAlgorithm string         `json:"activeAlgorithm"`
	CreatedAt       time.Time      `json:"createdAt"`
	UpdatedAt       time.Time      `json:"updatedAt"`
	Props           map[string]any `json:"props"`
	PublicKey       string         `json:"publicKey"`
	// DataKeys is where a call's data key comes from: "ring" or "split"
	// (split.go).
	DataKeys string `json:"dataKeys"`
}

// Key is an aes256 key of a /ks ring. KeyData is nil in key listings.
type Key struct {
	Type    string         `json:"type"`
	ID      string         `json:"id"`
	Props   map[string]any `json:"props"`
	KeyData *KeyData       `json:"keyData,omitempty"`
	// State is the key's lifecycle state (keystate.go): enabled,
	// disabled, destroy_scheduled or destroyed.
	State string `json:"state"`
	// DestroyAt is when a key in state destroy_scheduled is destroyed.
	DestroyAt *time.Time `json:"destroyAt,omitempty"`
	// EncryptCount is how many encrypt calls handed the key out
	// (KeyUsage), in the answers of GetKey and ListKeys.
	EncryptCount *uint64 `json:"encryptCount,omitempty"`
	// Version is the key's place in its ring, 1, 2, ... in creation
	// order (keyversion.go); the version of a transit ciphertext.
	Version int `json:"version,omitempty"`
}

// RingRef names a ring: by name (case-insensitive), or by ID when ByID.
type RingRef struct {
	Name string
	ByID bool
}

// CreateKeyRingInput creates a /ks key ring.
type CreateKeyRingInput struct {
	Name        string         `json:"name"`
	DisplayName string         `json:"displayName"`
	Algo        string         `json:"algo"`
	Props       map[string]any `json:"props"`
	KeyProps    map[string]any `json:"keyProps"`
	// PublicKey is the caller's own public key (see docs/FORMAT.md for
	// the encodings). When empty, the service makes a key pair and
	// returns its private key once.
	PublicKey string `json:"publicKey"`
	// KEM chooses the generated key pair: "xwing" (ML-KEM-768 + X25519,
	// the default) or "x25519". It is ignored with PublicKey.
	KEM string `json:"kem"`
	// DataKeys is "split" (the default, also when empty: a call's data
	// key needs a share that only its encrypt and a recorded decrypt hand
	// out) or "ring" (the ring's key is the data key: whoever holds the
	// ring's private key and may encrypt reads every call's data with no
	// decrypt); split.go.
	DataKeys string `json:"dataKeys,omitempty"`
}

// CreateKeyRingResult is the answer to CreateKeyRing.
type CreateKeyRingResult struct {
	Ring *KeyRing `json:"ring"`
	Key  *Key     `json:"key"`
	// PrivateKey is standard base64 of the generated private key, set only
	// when the caller brought no public key. The service keeps no copy.
	PrivateKey string `json:"privateKey,omitempty"`
}

// RotateInput rotates a ring.
type RotateInput struct {
	RingName string `json:"ringname"`
	Algo     string `json:"algo"`
}

// DeleteKeyRingResult names the deleted ring.
type DeleteKeyRingResult struct {
	Name string `json:"name"`
	ID   string `json:"id"`
}

// ringRecord is a ring as stored.
type ringRecord struct {
	ID          string         `json:"id"`
	Name        string         `json:"name"`
	DisplayName string         `json:"displayName"`
	Group       string         `json:"group"`
	ActiveKey   string         `json:"activeKey"`
	CreatedAt   time.Time      `json:"createdAt"`
	UpdatedAt   time.Time      `json:"updatedAt"`
	Props       map[string]any `json:"props"`
	PublicKey   string         `json:"publicKey"`
	KeyProps    map[string]any `json:"keyProps"`
	Algos       ConfigAlgos    `json:"algos"`
	// SealedPrivate is the ring's private key, sealed: /asym rings only.
	SealedPrivate []byte `json:"sealedPrivate,omitempty"`
	// DataKeys and SealedShare: /ks rings only (split.go).
	DataKeys    string `json:"dataKeys,omitempty"`
	SealedShare []byte `json:"sealedShareSecret,omitempty"`
	// LatestVersion is the version of the newest key (keyversion.go);
	// RotateDue (unix ms) when the active key's rotationPeriod ends,
	// zero without one (rotation.go); Transit the settings of Vault's
	// transit engine (transit.go), /asym rings only.
	LatestVersion int              `json:"latestVersion,omitempty"`
	RotateDue     int64            `json:"rotateDue,omitempty"`
	Transit       *transitSettings `json:"transit,omitempty"`
	// Origin is what made an /asym ring: originAsym or originTransit
	// (heldkeys.go); empty for /ks rings and for the /asym rings made
	// before it was kept, which keysHeld reads from Transit.
	Origin string `json:"origin,omitempty"`

	pub      *wrap.PublicKey
	share    atomic.Pointer[splitkey.Secret] // SealedShare opened, once needed
	newShare []byte                          // a new ring's share secret, until sealRing has sealed it
	stored   int                             // bytes as read by loadRing: its size in a page
}

// KeyRingConfig is the configuration of a ring.
type KeyRingConfig struct {
	// Props are the ring's props (the same as KeyRing.Props).
	Props map[string]any `json:"props"`
	// Key.Props are given to every key the ring makes from now on.
	Key ConfigKey `json:"key"`
	// Algos configure each algorithm.
	Algos ConfigAlgos `json:"algos"`
}

// ConfigKey configures the ring's new keys.
type ConfigKey struct {
	Props map[string]any `json:"props"`
}

// ConfigAlgos configures each algorithm of a ring.
type ConfigAlgos struct {
	AES256 AlgoConfig `json:"aes256"`
}

// AlgoConfig configures one algorithm.
type AlgoConfig struct {
	// MaxEncryptCount, when above zero, is how many encrypt calls one key
	// serves: the call after the last one rotates the ring first.
	MaxEncryptCount int64 `json:"maxEncryptCount"`
	// RotationPeriod, when set, is how long a key stays the ring's
	// active key: a Go duration of at least an hour ("720h"); empty (or
	// "0" when set) for none. The service then rotates the ring by
	// itself (rotation.go), and no encrypt call hands out a key past it.
	// With MaxEncryptCount too, whichever comes first rotates the ring.
	RotationPeriod string `json:"rotationPeriod,omitempty"`
}

// keyRecord is a key as stored: wrapped, never in the clear. A destroyed
// key has no KeyData.
type keyRecord struct {
	ID        string         `json:"id"`
	RingID    string         `json:"ringId"`
	Type      string         `json:"type"`
	Props     map[string]any `json:"props"`
	KeyData   KeyData        `json:"keyData,omitzero"`
	CreatedAt time.Time      `json:"createdAt"`
	Version   int            `json:"version,omitempty"` // 1, 2, ... in the ring's creation order; 0 until numbered (keyversion.go)

	// State is the key's lifecycle state; empty (the keys stored before
	// states existed) is enabled. DestroyAt is set in destroy_scheduled,
	// DestroyedAt in destroyed (keystate.go).
	State       string     `json:"state,omitempty"`
	DestroyAt   *time.Time `json:"destroyAt,omitempty"`
	DestroyedAt *time.Time `json:"destroyedAt,omitempty"`
}

func (r *ringRecord) keyRing() *KeyRing {
	return &KeyRing{ID: r.ID, Name: r.Name, DisplayName: r.DisplayName, ActiveKey: r.ActiveKey, ActiveAlgorithm: AlgoAES256,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, Props: orEmpty(r.Props), PublicKey: r.PublicKey, DataKeys: r.dataKeys()}
}

func (k *keyRecord) key(withData bool) *Key {
	out := &Key{Type: AlgoAES256, ID: k.ID, Props: orEmpty(k.Props), State: k.state(), DestroyAt: k.DestroyAt, Version: k.Version}
	if withData {
		kd := k.KeyData
		out.KeyData = &kd
	}
	return out
}

// ValidateRingName checks a key ring name: 1 to 64 characters, ASCII
// letters, digits, '-' and '_', starting with a letter or digit. Names are
// case-insensitive: "Payments" and "payments" are the same ring. A name
// that names a ring to make must also not be shaped like a credential
// (checkNewRingName). The error quotes no name shaped like one.
func ValidateRingName(name string) error {
	if name == "" {
		return Errorf(KindInvalid, "name is required")
	}
	if len(name) > maxRingNameLen {
		return Errorf(KindInvalid, "name must have at most %d characters", maxRingNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '-' && c != '_') {
			quoted := fmt.Sprintf(" %q", name)
			if LooksLikeSecret(name) {
				quoted = ""
			}
			return Errorf(KindInvalid, "name%s is invalid: use 1 to %d letters, digits, '-' and '_', starting with a letter or digit", quoted, maxRingNameLen)
		}
	}
	return nil
}

// checkNewRingName checks the name of a ring to make, of any group: a
// valid name (ValidateRingName) that is not shaped like a credential
// (LooksLikeSecret), since a ring's name is written in records, flags and
// request logs, and a secret pasted in place of a name must not be. The
// error does not quote the name. Rings made before the rule keep their
// names: finding a ring by name does not check it.
func checkNewRingName(name string) error {
	if err := ValidateRingName(name); err != nil {
		return err
	}
	if LooksLikeSecret(name) {
		return Errorf(KindInvalid, "name is shaped like a credential (it starts with %s, or has %d characters or more), which a new key ring's name may not be: choose another name",
			strings.Join(secretPrefixes, ", "), minSecretLen)
	}
	return nil
}

func checkAlgo(algo string) error {
	if algo != "" && !strings.EqualFold(algo, AlgoAES256) {
		return Errorf(KindInvalid, "algo %q is not supported: use aes256", algo)
	}
	return nil
}

func cloneMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

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
	algos                ConfigAlgos      // a rotation period, from the start
	transit              *transitSettings // /asym rings made through transit
	origin               string           // /asym rings: originAsym or originTransit
	action               string           // the record's; empty: keyring.create or asym.keyring.create
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
		Algos: spec.algos, Transit: spec.transit, Origin: spec.origin}
	s.setDataKeys(r, spec.dataKeys)
	k, err := s.newKey(r.ID, spec.pub, r.KeyProps)
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
	}
	err = s.submit(act, func(tx Txn) error {
		nameKey := join(pfxRingName, []byte(lower))
		if _, err := tx.Get(nameKey); err == nil {
			return Errorf(KindConflict, "a key ring named %q already exists", name)
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

func ringPrivateAAD(ringID string) []byte { return []byte("ring/private/" + ringID) }

func putRing(tx Txn, r *ringRecord) error {
	v, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return tx.Set(join(pfxRing, []byte(r.ID)), v)
}

func putKey(tx Txn, k *keyRecord) error {
	v, err := json.Marshal(k)
	if err != nil {
		return err
	}
	return tx.Set(join(pfxKey, []byte(k.RingID), sep, []byte(k.ID)), v)
}

func loadRing(tx Txn, id string) (*ringRecord, error) {
	v, err := tx.Get(join(pfxRing, []byte(id)))
	if isNotFound(err) {
		return nil, Errorf(KindNotFound, "key ring not found")
	} else if err != nil {
		return nil, err
	}
	r := ringRecord{stored: len(v)}
	if err := json.Unmarshal(v, &r); err != nil {
		return nil, err
	}
	if r.pub, err = wrap.ParsePublicKey(r.PublicKey); err != nil {
		return nil, Errorf(KindInternal, "key ring %s has a corrupt public key", r.ID)
	}
	return &r, nil
}

func loadKey(tx Txn, ringID, keyID string) (*keyRecord, error) {
	v, err := tx.Get(join(pfxKey, []byte(ringID), sep, []byte(keyID)))
	if isNotFound(err) {
		return nil, Errorf(KindNotFound, "key not found")
	} else if err != nil {
		return nil, err
	}
	var k keyRecord
	if err := json.Unmarshal(v, &k); err != nil {
		return nil, err
	}
	return &k, nil
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
		var r *ringRecord
		err := s.store.View(ctx, func(tx Txn) error {
			var err error
			r, err = loadRing(tx, id)
			return err
		})
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
		return nil, Errorf(KindNotFound, "key ring %q not found", name)
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
				return Errorf(KindNotFound, "key ring %q not found", name)
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
		var k *keyRecord
		err := s.store.View(ctx, func(tx Txn) error {
			var err error
			k, err = loadKey(tx, ringID, keyID)
			return err
		})
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
			return nil, nil, s.recordFailure(p, action, strings.ToLower(ref.Name), err)
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

// recordFailure records a granted operation that failed (a missing ring,
// say) and returns its error, or the journal's when recording failed.
func (s *Service) recordFailure(p *Principal, action, ring string, opErr error) error {
	if ErrorKind(opErr) == KindInternal {
		return opErr
	}
	if err := s.record(p, action, ring, nil, opErr); err != nil {
		return err
	}
	return opErr
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

// decodeHexID turns an ID made by newID into its 16 bytes.
func decodeHexID(id string) ([16]byte, error) {
	b, ok := parseID(id)
	if !ok {
		return b, Errorf(KindInternal, "stored ID %q is malformed", id)
	}
	return b, nil
}
