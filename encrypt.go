package kms

import (
	"bytes"
	"context"
	"encoding/base64"
	"strings"
)

// AssetInput creates or updates an Asset in an encrypt call.
type AssetInput struct {
	// AssetID, when set, names the Asset to update.
	AssetID string `json:"assetId,omitempty"`
	// Parents are the IDs of the Asset's parent Assets.
	Parents []string `json:"parents,omitempty"`
	// Data is stored on the Asset.
	Data map[string]any `json:"data"`
}

// EncryptInput asks for the active key of a ring.
type EncryptInput struct {
	RingName string      `json:"ringname"`
	Asset    *AssetInput `json:"asset,omitempty"`
}

// EncryptResult is the answer to Encrypt: the key to encrypt with (wrapped
// for the ring's public key), the unique hash of this call, and the signed
// header that binds it.
type EncryptResult struct {
	Key    *Key   `json:"key"`
	RingID string `json:"ringId"`
	Hash   string `json:"hash"`
	Header string `json:"header"`
	Asset  any    `json:"asset,omitempty"`
}

// DecryptInput names the key of an earlier encrypt call.
type DecryptInput struct {
	Hash   string `json:"hash"`
	Header string `json:"header"`
}

// SignedAsset is the result of verifying the Asset a header signs.
type SignedAsset struct {
	Valid   bool           `json:"valid"`
	ID      string         `json:"id"`
	Message string         `json:"message"`
	Data    map[string]any `json:"data"`
}

// DecryptResult is the answer to Decrypt. When verification fails, Decrypt
// returns it with Asset.Valid false, no Key, and an Unprocessable error.
type DecryptResult struct {
	RingID   string      `json:"ringId"`
	RingName string      `json:"ringname"`
	Key      *Key        `json:"key"`
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
// and a signed header. With a maxEncryptCount configured, the ring rotates
// by itself when its active key has served that many calls. It needs
// keyring.<name>.encrypt.
func (s *Service) Encrypt(ctx context.Context, in EncryptInput) (*EncryptResult, error) {
	if in.RingName == "" {
		return nil, Errorf(KindInvalid, "ringname is required")
	}
	p, r, err := s.resolveRing(ctx, groupKS, RingRef{Name: in.RingName}, "encrypt", OpEncrypt)
	if err != nil {
		return nil, err
	}
	lower := strings.ToLower(r.Name)
	if in.Asset != nil {
		return nil, s.recordFailure(p, "encrypt", lower, Errorf(KindInvalid, "asset: this server keeps no Asset store"))
	}
	if max := r.Algos.AES256.MaxEncryptCount; max > 0 {
		if r, err = s.reserveEncrypt(ctx, p, r, uint64(max)); err != nil {
			return nil, err
		}
	}
	k, err := s.keyByID(ctx, r.ID, r.ActiveKey)
	if err != nil {
		return nil, err
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
	header := s.newHeader(hash, s.now().UnixMilli(), nil)
	act := s.newActivity(p, "encrypt", lower, true, map[string]any{"ringId": r.ID, "keyId": k.ID})
	if err := s.journal.submit(act, nil, nil); err != nil {
		return nil, err
	}
	return &EncryptResult{
		Key:    k.key(true),
		RingID: r.ID,
		Hash:   base64.RawURLEncoding.EncodeToString(hash),
		Header: base64.RawURLEncoding.EncodeToString(header),
	}, nil
}

// Decrypt verifies a hash and its header and returns the key they name,
// with the result of verifying the Asset the header signs. A hash or header
// that was altered, that does not belong together, or whose Asset no longer
// matches, gives the result with Asset.Valid false and no key, together with
// an Unprocessable error whose message says which check failed. It needs
// keyring.<name>.decrypt on the ring the hash names.
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
		return s.decryptFailed(p, "", &DecryptResult{}, "hash failed verification: "+strings.TrimPrefix(ErrorMessage(err), "hash "))
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
	case h.asset != nil:
		return s.decryptFailed(p, lower, res, "asset failed verification: this server keeps no Asset store")
	}
	k, err := s.keyByID(ctx, r.ID, ref.keyID)
	if err != nil {
		return nil, s.recordFailure(p, "decrypt", lower, err)
	}
	if err := s.record(p, "decrypt", lower, map[string]any{"ringId": r.ID, "keyId": k.ID}, nil); err != nil {
		return nil, err
	}
	res.Key = k.key(true)
	res.Asset = SignedAsset{Valid: true, Message: "hash and header verified; the header signs no asset", Data: map[string]any{}}
	return res, nil
}

// decryptFailed records a decrypt that failed verification and returns its
// 422 result.
func (s *Service) decryptFailed(p *Principal, ring string, res *DecryptResult, msg string) (*DecryptResult, error) {
	res.Asset = SignedAsset{Valid: false, Message: msg, Data: map[string]any{}}
	opErr := Errorf(KindUnprocessable, "%s", msg)
	if err := s.record(p, "decrypt", ring, map[string]any{"reason": msg}, opErr); err != nil {
		return nil, err
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
		return nil, s.recordFailure(p, "hash.lookup", "", err)
	}
	r, err := s.ringByID(ctx, groupKS, ref.ringID)
	if err != nil {
		return nil, s.recordFailure(p, "hash.lookup", "", err)
	}
	lower := strings.ToLower(r.Name)
	if _, err := s.authorize(ctx, "hash.lookup", lower, RingFlag(r.Name, OpRead)); err != nil {
		return nil, err
	}
	if _, err := s.keyByID(ctx, r.ID, ref.keyID); err != nil {
		return nil, s.recordFailure(p, "hash.lookup", lower, err)
	}
	if err := s.record(p, "hash.lookup", lower, map[string]any{"ringId": r.ID, "keyId": ref.keyID}, nil); err != nil {
		return nil, err
	}
	return &HashInfo{RingID: r.ID, KeyID: ref.keyID}, nil
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
		return nil, s.recordFailure(p, "header.lookup", "", err)
	}
	info := &HeaderInfo{Version: h.version, HasSignedAsset: h.asset != nil, Hash: base64.RawURLEncoding.EncodeToString(h.hash)}
	ref, hashErr := s.parseHash(info.Hash)
	if !h.macOK || hashErr != nil || !s.verifySignature(h) {
		if err := s.record(p, "header.lookup", "", map[string]any{"valid": false}, nil); err != nil {
			return nil, err
		}
		return info, nil
	}
	r, err := s.ringByID(ctx, groupKS, ref.ringID)
	if err != nil {
		return nil, s.recordFailure(p, "header.lookup", "", err)
	}
	lower := strings.ToLower(r.Name)
	if _, err := s.authorize(ctx, "header.lookup", lower, RingFlag(r.Name, OpRead)); err != nil {
		return nil, err
	}
	if _, err := s.keyByID(ctx, r.ID, ref.keyID); err != nil {
		return nil, s.recordFailure(p, "header.lookup", lower, err)
	}
	if err := s.record(p, "header.lookup", lower, map[string]any{"ringId": r.ID, "valid": true}, nil); err != nil {
		return nil, err
	}
	info.Valid = true
	return info, nil
}
