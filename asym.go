package kms

import (
	"context"
	"encoding/base64"
	"strings"
	"time"

	"github.com/ringkms/kms/internal/wrap"
)

// AsymKeyRing is a key ring of the /asym group, whose keys are handed out
// as plain key strings; but for a held key's, whose keys the service
// holds (heldkeys.go).
type AsymKeyRing struct {
	ID              string    `json:"id"`
	Name            string    `json:"name"`
	DisplayName     string    `json:"displayName"`
	ActiveKey       string    `json:"activeKey"`
	ActiveAlgorithm string    `json:"activeAlgorithm"`
	PublicKey       string    `json:"publicKey"`
	CreatedAt       time.Time `json:"createdAt"`
	UpdatedAt       time.Time `json:"updatedAt"`
}

// AsymKey is a key of an /asym ring, with the key itself unless the
// service holds it (Held).
type AsymKey struct {
	Type    string         `json:"type"`
	ID      string         `json:"id"`
	Props   map[string]any `json:"props"`
	KeyData AsymKeyData    `json:"keyData"`
	State   string         `json:"state"` // always enabled: no other key is answered
	// Version is the key's place in its ring (Key.Version).
	Version int `json:"version,omitempty"`
	// Held reports a key that the service holds for its own use (a
	// held key's, heldkeys.go): KeyData then carries no key, which
	// only the export of an exportable key answers (ExportAsymKey).
	Held bool `json:"held,omitempty"`
}

// AsymKeyData carries a plain key: standard base64 of its 32 bytes. It is
// empty for a key the service holds (AsymKey.Held).
type AsymKeyData struct {
	Key string `json:"key,omitempty"`
}

// CreateAsymKeyRingInput creates an /asym key ring.
type CreateAsymKeyRingInput struct {
	Name        string         `json:"name"`
	DisplayName string         `json:"displayName"`
	Algo        string         `json:"algo"`
	Props       map[string]any `json:"props"`
	KeyProps    map[string]any `json:"keyProps"`
}

// CreateAsymKeyRingResult is the answer to CreateAsymKeyRing.
type CreateAsymKeyRingResult struct {
	Ring *AsymKeyRing `json:"ring"`
	Key  *AsymKey     `json:"key"`
	// PrivateKey is standard base64 of the ring's X-Wing private key. The
	// service keeps it, sealed under the master key, to unwrap the ring's
	// keys; it is returned once so the caller can do the same offline.
	PrivateKey string `json:"privateKey"`
}

func (r *ringRecord) asymKeyRing() *AsymKeyRing {
	return &AsymKeyRing{ID: r.ID, Name: r.Name, DisplayName: r.DisplayName, ActiveKey: r.ActiveKey, ActiveAlgorithm: AlgoAES256,
		PublicKey: r.PublicKey, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
}

// CreateAsymKeyRing creates an /asym key ring and its first key. It needs
// the flag keyring.<name>.create.
func (s *Service) CreateAsymKeyRing(ctx context.Context, in CreateAsymKeyRingInput) (*CreateAsymKeyRingResult, error) {
	if err := checkNewRingName(in.Name); err != nil {
		return nil, err
	}
	p, err := s.authorize(ctx, "asym.keyring.create", strings.ToLower(in.Name), RingFlag(in.Name, OpCreate))
	if err != nil {
		return nil, err
	}
	if err := checkAlgo(in.Algo); err != nil {
		return nil, err
	}
	priv, err := wrap.Generate(wrap.XWing)
	if err != nil {
		return nil, internalError("generate key pair", err)
	}
	raw := priv.Bytes()
	defer clear(raw)
	r, k, err := s.createRing(p, ringSpec{group: groupAsym, name: in.Name, display: in.DisplayName, props: in.Props, keyProps: in.KeyProps,
		pub: priv.Public(), private: raw, origin: originAsym})
	if err != nil {
		return nil, err
	}
	plain, err := s.openKey(r, k)
	if err != nil {
		return nil, err
	}
	return &CreateAsymKeyRingResult{Ring: r.asymKeyRing(), Key: plain, PrivateKey: base64.StdEncoding.EncodeToString(raw)}, nil
}

// GetAsymKey returns a key of an /asym ring, unwrapped, or without its
// key when the service holds it (a held key's: AsymKey.Held). It needs
// keyring.<name>.read.
func (s *Service) GetAsymKey(ctx context.Context, ref RingRef, keyID string) (*AsymKey, error) {
	p, r, k, err := s.resolveKey(ctx, groupAsym, ref, keyID, "asym.key.read")
	if err != nil {
		return nil, err
	}
	if err := k.usable(r); err != nil {
		return nil, s.recordFailure(p, "asym.key.read", strings.ToLower(r.Name), err)
	}
	out, err := s.openKey(r, k)
	if err != nil {
		return nil, s.recordFailure(p, "asym.key.read", strings.ToLower(r.Name), err)
	}
	if err := s.record(p, "asym.key.read", strings.ToLower(r.Name), map[string]any{"ringId": r.ID, "keyId": k.ID}, nil); err != nil {
		return nil, err
	}
	return out, nil
}

// openKey answers k, a key of the /asym ring r: unwrapped with the ring's
// sealed private key, or without its key when the service holds r's keys
// (keysHeld), which it then does not unwrap.
func (s *Service) openKey(r *ringRecord, k *keyRecord) (*AsymKey, error) {
	out := &AsymKey{Type: "AES256", ID: k.ID, Props: orEmpty(k.Props), State: k.state(), Version: k.Version}
	if r.keysHeld() {
		out.Held = true
		return out, nil
	}
	plain, err := s.unwrapKey(r, k)
	if err != nil {
		return nil, err
	}
	defer clear(plain)
	out.KeyData.Key = base64.StdEncoding.EncodeToString(plain)
	return out, nil
}

// unwrapKey returns the 32 bytes of k, a key of the /asym ring r, unwrapped
// with the ring's sealed private key. The caller clears them.
func (s *Service) unwrapKey(r *ringRecord, k *keyRecord) ([]byte, error) {
	raw, err := s.barrier.Open(r.SealedPrivate, ringPrivateAAD(r.ID))
	if err != nil {
		return nil, internalError("open ring private key", err)
	}
	defer clear(raw)
	priv, err := wrap.ParsePrivateKey(wrap.Scheme(k.KeyData.Encrypted.Key.Encoding), raw)
	if err != nil {
		return nil, internalError("parse ring private key", err)
	}
	ct, err1 := base64.StdEncoding.DecodeString(k.KeyData.Encrypted.Key.Value)
	enc, err2 := base64.StdEncoding.DecodeString(k.KeyData.IV)
	if err1 != nil || err2 != nil {
		return nil, Errorf(KindInternal, "key %s has corrupt key data", k.ID)
	}
	plain, err := priv.Unwrap(ct, enc, keyInfo(r.ID, k.ID))
	if err != nil {
		return nil, internalError("unwrap key", err)
	}
	return plain, nil
}

// RotateAsym gives an /asym ring a new active key and returns it,
// unwrapped, or without its key when the service holds it (a transit
// key's: AsymKey.Held). It needs keyring.<name>.rotate.
func (s *Service) RotateAsym(ctx context.Context, in RotateInput) (*AsymKey, error) {
	k, r, err := s.rotateCmd(ctx, groupAsym, in, "asym.keyring.rotate")
	if err != nil {
		return nil, err
	}
	return s.openKey(r, k)
}
