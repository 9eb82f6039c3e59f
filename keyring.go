package kms

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ringkms/kms/internal/keytype"
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
	// transit engine (heldkeys_admin.go), /asym rings only.
	LatestVersion int           `json:"latestVersion,omitempty"`
	RotateDue     int64         `json:"rotateDue,omitempty"`
	Held          *heldSettings `json:"transit,omitempty"`
	// Origin is what made an /asym ring: originAsym or originHeld
	// (heldkeys.go); empty for /ks rings and for the /asym rings made
	// before it was kept, which keysHeld reads from Transit.
	Origin string `json:"origin,omitempty"`

	pub      *wrap.PublicKey
	share    atomic.Pointer[splitkey.Secret] // SealedShare opened, once needed
	newShare []byte                          // a new ring's share secret, until sealRing has sealed it
	sized                                    // bytes as read by loadRing: its size in a page
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
	// PublicKey is an asymmetric held key's public key, as
	// keytype.PublicKey encodes it; empty for the others.
	PublicKey string `json:"publicKey,omitempty"`

	// State is the key's lifecycle state; empty (the keys stored before
	// states existed) is enabled. DestroyAt is set in destroy_scheduled,
	// DestroyedAt in destroyed (keystate.go).
	State       string     `json:"state,omitempty"`
	DestroyAt   *time.Time `json:"destroyAt,omitempty"`
	DestroyedAt *time.Time `json:"destroyedAt,omitempty"`
	// Before is, while its held key's deletion is scheduled
	// (heldkeys_state.go), the state the version had before, which
	// cancelling the deletion gives back; empty otherwise.
	Before string `json:"before,omitempty"`
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

// The errors of a ring, a key, an Account or an API key not found.
var (
	errRingNotFound    = Errorf(KindNotFound, "key ring not found")
	errKeyNotFound     = Errorf(KindNotFound, "key not found")
	errAccountNotFound = Errorf(KindNotFound, "account not found")
	errAPIKeyNotFound  = Errorf(KindNotFound, "API key not found")
)

func loadRing(tx Txn, id string) (*ringRecord, error) {
	r, err := getSized[ringRecord](tx, join(pfxRing, []byte(id)), errRingNotFound)
	if err != nil {
		return nil, err
	}
	if r.pub, err = wrap.ParsePublicKey(r.PublicKey); err != nil {
		return nil, Errorf(KindInternal, "key ring %s has a corrupt public key", r.ID)
	}
	return r, nil
}

func loadKey(tx Txn, ringID, keyID string) (*keyRecord, error) {
	var k keyRecord
	if _, err := getJSON(tx, join(pfxKey, []byte(ringID), sep, []byte(keyID)), &k, errKeyNotFound); err != nil {
		return nil, err
	}
	return &k, nil
}

// decodeHexID turns an ID made by newID into its 16 bytes.
func decodeHexID(id string) ([16]byte, error) {
	b, ok := parseID(id)
	if !ok {
		return b, Errorf(KindInternal, "stored ID %q is malformed", id)
	}
	return b, nil
}

// Key lifecycle states. A key is made enabled. Disabling it, or
// scheduling its destruction, takes it out of use (encrypt never hands it
// out; decrypt and key reads refuse it) and can be undone; destruction
// erases its wrapped key material from the store for good and cannot.
// The key's metadata, its encrypt count and the activity about it stay.
//
//	enabled <-> disabled
//	enabled, disabled -> destroy_scheduled (POST .../destroy)
//	destroy_scheduled -> disabled (DELETE .../destroy, before destroyAt)
//	destroy_scheduled -> destroyed (at destroyAt, by the Service)
//
// A ring's active key cannot leave enabled: the ring is rotated first
// (or in the same call, with rotate).
const (
	KeyEnabled          = "enabled"
	KeyDisabled         = "disabled"
	KeyDestroyScheduled = "destroy_scheduled"
	KeyDestroyed        = "destroyed"
)

// state returns the key's state; a key stored without one is enabled.
func (k *keyRecord) state() string { return cmp.Or(k.State, KeyEnabled) }

// usable returns nil when k, a key of r, is enabled, and otherwise the
// error that a use of it answers: Disabled (disabled, or scheduled for
// destruction) or Destroyed. Error.State carries the key's state.
func (k *keyRecord) usable(r *ringRecord) error {
	switch st := k.state(); st {
	case KeyEnabled:
		return nil
	case KeyDestroyed:
		return errKeyDestroyed(r, k)
	case KeyDestroyScheduled:
		return &Error{Kind: KindDisabled, State: st, Message: fmt.Sprintf("key %s of ring %s is scheduled for destruction at %s and cannot be used: cancel the destruction and enable it to use it again",
			k.ID, r.Name, k.DestroyAt.Format(time.RFC3339))}
	default:
		return &Error{Kind: KindDisabled, State: st, Message: fmt.Sprintf("key %s of ring %s is disabled: enable it to use it again", k.ID, r.Name)}
	}
}

// heldSettings are the settings of Vault's transit engine that a ring
// keeps (ringRecord.Transit); the zero value is Vault's defaults.
type heldSettings struct {
	MinDecryptionVersion int  `json:"minDecryptionVersion,omitempty"` // 0 reads as 1
	MinEncryptionVersion int  `json:"minEncryptionVersion,omitempty"` // 0: any version
	DeletionAllowed      bool `json:"deletionAllowed,omitempty"`
	// Exportable lets the key's versions be exported (heldkeys.go); once
	// set, never unset.
	Exportable bool `json:"exportable,omitempty"`
	// Type is the key's type (internal/keytype), with its parameters as
	// they were filled in at its creation: KeySize for hmac keys,
	// ParameterSet for ml-dsa. Empty is aes256-gcm96, the one type the
	// held keys made before types existed have.
	Type         string `json:"type,omitempty"`
	KeySize      int    `json:"keySize,omitempty"`
	ParameterSet string `json:"parameterSet,omitempty"`
	// State is the state of the key as a whole (heldkeys_state.go):
	// empty (enabled), heldDisabled or heldPendingDeletion, with the
	// DeletionDate of the last.
	State        string     `json:"state,omitempty"`
	DeletionDate *time.Time `json:"deletionDate,omitempty"`
	// Description and Tags are what callers say of the key
	// (heldkeys_tags.go): metadata, never secret.
	Description string            `json:"description,omitempty"`
	Tags        map[string]string `json:"tags,omitempty"`
}

// keySpec is the type of r's keys: a held key's, and aes256-gcm96 (the
// 32-byte AES key of every ring) for the others.
func (r *ringRecord) keySpec() (keytype.Spec, error) {
	h := r.held()
	t, err := keytype.Parse(h.Type)
	if err != nil {
		return keytype.Spec{}, err
	}
	return keytype.NewSpec(t, keytype.Params{KeySize: h.KeySize, ParameterSet: keytype.ParameterSet(h.ParameterSet)})
}

// recordType is the Type of a key record of type t: aes256 for the AES
// keys of every ring (as it always was), the type's name for the others.
func recordType(t keytype.Type) string {
	if t == keytype.AES256GCM96 {
		return AlgoAES256
	}
	return string(t)
}

// held returns the held settings of r, Vault's defaults when it has
// none.
func (r *ringRecord) held() heldSettings {
	if r.Held == nil {
		return heldSettings{}
	}
	return *r.Held
}

// The origins of an /asym ring (ringRecord.Origin).
const (
	originAsym = "asym"    // CreateAsymKeyRing: its keys are handed out
	originHeld = "transit" // transit: its keys are held
)

// keysHeld reports whether the service holds r's keys for its own use:
// r is a held key's ring.
func (r *ringRecord) keysHeld() bool {
	switch r.Origin {
	case originHeld:
		return true
	case originAsym:
		return false
	}
	return r.Group == groupAsym && r.Held != nil
}

func errKeyDestroyed(r *ringRecord, k *keyRecord) error {
	return &Error{Kind: KindDestroyed, State: KeyDestroyed, Message: fmt.Sprintf("key %s of ring %s was destroyed: its key material is gone", k.ID, r.Name)}
}

// The values of dataKeys (split.go).
const (
	DataKeysRing  = "ring"
	DataKeysSplit = "split"
)

// dataKeys is the ring's dataKeys; a ring stored with none (made before
// the choice existed) has "ring": the default of new rings is for new
// rings only, and a stored ring keeps the kind it was made with.
func (r *ringRecord) dataKeys() string { return cmp.Or(r.DataKeys, DataKeysRing) }

// KeyData is a key wrapped for its ring's public key; docs/FORMAT.md
// describes it bit for bit.
type KeyData struct {
	Version   int          `json:"version"`
	Encrypted EncryptedKey `json:"encrypted"`
	// IV is the HPKE encapsulated key (standard base64); empty for RSA.
	IV string `json:"iv"`
}

// EncryptedKey holds the wrapped key.
type EncryptedKey struct {
	Key EncodedValue `json:"key"`
}

// EncodedValue is a wrapped value: Value is standard base64 of the
// ciphertext; Encoding names the wrapping scheme (hpke-xwing, hpke-x25519
// or rsa-oaep-sha256).
type EncodedValue struct {
	Value    string `json:"value"`
	Encoding string `json:"encoding"`
}

// The states of a held key (HeldKey.State). A key's record keeps none for
// enabled.
const (
	HeldKeyEnabled         = "enabled"
	HeldKeyDisabled        = "disabled"
	HeldKeyPendingDeletion = "pending-deletion"
)

// heldState is the state of r as a held key.
func (r *ringRecord) heldState() string { return cmp.Or(r.held().State, HeldKeyEnabled) }

// heldUsable returns nil when r, a held key, is enabled, and otherwise
// the error of a use of it: Disabled, with the key's state.
func (r *ringRecord) heldUsable() error {
	switch t := r.held(); t.State {
	case "":
		return nil
	case HeldKeyPendingDeletion:
		return &Error{Kind: KindDisabled, State: HeldKeyPendingDeletion, Message: fmt.Sprintf("key %s is pending deletion on %s and cannot be used: cancel its deletion and enable it to use it again",
			r.Name, t.deletionDay())}
	default:
		return &Error{Kind: KindDisabled, State: t.State, Message: fmt.Sprintf("key %s is disabled: enable it to use it again", r.Name)}
	}
}

// deletionDay is the deletion date of a held key pending deletion, for a
// message (a record that has none, which the service never writes, says
// so rather than panic).
func (t *heldSettings) deletionDay() string {
	if t.DeletionDate == nil {
		return "no date"
	}
	return t.DeletionDate.UTC().Format(time.RFC3339)
}

// notPendingDeletion refuses a change of cur, a held key, while its
// deletion is pending: Conflict, with the key's state.
func notPendingDeletion(cur *ringRecord) error {
	if t := cur.held(); t.State == HeldKeyPendingDeletion {
		return &Error{Kind: KindConflict, State: HeldKeyPendingDeletion,
			Message: fmt.Sprintf("key %s is pending deletion on %s: cancel its deletion first", cur.Name, t.deletionDay())}
	}
	return nil
}

// errHandedOut is the answer of a transit call on r, an /asym ring made
// by CreateAsymKeyRing.
func errHandedOut(r *ringRecord) error {
	return Errorf(KindInvalid, "key ring %q was made by POST /asym/keyrings, whose answer handed out its keys: transit uses only keys that the service holds and never hands out; make a transit key under another name", r.Name)
}
