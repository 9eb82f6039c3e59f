package kms

import (
	"context"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"

	"github.com/ringkms/kms/internal/headersign"
)

// Hash and header formats, version 1. docs/FORMAT.md is their
// specification; the constants here are its numbers.
//
// hash (65 bytes, unpadded URL-safe base64, 87 characters):
//
//	0      version (0x01)
//	1..16  ring ID
//	17..32 key ID
//	33..48 nonce (random)
//	49..64 HMAC-SHA256(hash key, bytes 0..48), first 16 bytes
//
// header (unpadded URL-safe base64):
//
//	0       version (0x01)
//	1       flags: bit 0 set when an Asset is signed
//	2..9    signing key ID
//	10..17  issued at, epoch milliseconds, big-endian
//	18..82  the hash, raw
//	[83..98 Asset ID, 99..130 SHA-256 digest of the Asset: only with flag bit 0]
//	        (the bytes so far are the body)
//	then    proof depth d (0..4), leaf index (below 2^d)
//	then    d sibling digests of 32 bytes, from the leaf up
//	then    Ed25519 signature of the root of the batch's Merkle tree (internal/headersign)
//	then    HMAC-SHA256(header key, every byte before it), first 16 bytes
const (
	formatVersion = 1

	hashIDLen    = 16
	hashNonceLen = 16
	macLen       = 16
	hashLen      = 1 + 2*hashIDLen + hashNonceLen + macLen // 65

	headerFlagAsset = 1 << 0
	headerFixedLen  = 1 + 1 + 8 + 8 + hashLen // 83
	headerAssetLen  = 16 + 32
)

// newHash makes the hash of one encrypt call for the key keyID of ring ringID.
func (s *Service) newHash(ringID, keyID [16]byte) []byte {
	b := make([]byte, hashLen)
	b[0] = formatVersion
	copy(b[1:17], ringID[:])
	copy(b[17:33], keyID[:])
	rand.Read(b[33:49])
	var sum [32]byte
	copy(b[49:], s.hashMAC.Sum(sum[:0], b[:49])[:macLen])
	return b
}

// hashRef is what a verified hash names.
type hashRef struct {
	raw    []byte
	ringID string
	keyID  string
}

// parseHash decodes and verifies a hash. A malformed hash and a forged or
// altered one are both Invalid errors, whose message, "hash failed
// verification: ...", says which.
func (s *Service) parseHash(text string) (hashRef, error) {
	raw, err := b64url.DecodeString(text)
	if err != nil || len(raw) != hashLen {
		return hashRef{}, Errorf(KindInvalid, "hash failed verification: it is malformed")
	}
	if raw[0] != formatVersion {
		return hashRef{}, Errorf(KindInvalid, "hash failed verification: its version %d is unknown", raw[0])
	}
	var sum [32]byte
	if !hmac.Equal(s.hashMAC.Sum(sum[:0], raw[:49])[:macLen], raw[49:]) {
		return hashRef{}, Errorf(KindInvalid, "hash failed verification: it was altered or not issued by this service")
	}
	return hashRef{raw: raw, ringID: hex.EncodeToString(raw[1:17]), keyID: hex.EncodeToString(raw[17:33])}, nil
}

// assetSeal is what a header binds of an Asset.
type assetSeal struct {
	id     [16]byte
	digest [32]byte
}

// headerBody makes the body of the header of an encrypt call: what its
// signature covers. Bytes 2..9, the signing key ID, are left for the
// journal's signer, which writes the ID of the key it signs with.
func (s *Service) headerBody(hash []byte, issuedMs int64, asset *assetSeal) []byte {
	n := headerFixedLen
	if asset != nil {
		n += headerAssetLen
	}
	b := make([]byte, n, n+2+32*headersign.MaxDepth+ed25519.SignatureSize+macLen)
	b[0] = formatVersion
	binary.BigEndian.PutUint64(b[10:18], uint64(issuedMs))
	copy(b[18:83], hash)
	if asset != nil {
		b[1] |= headerFlagAsset
		copy(b[83:99], asset.id[:])
		copy(b[99:131], asset.digest[:])
	}
	return b
}

// finishHeader appends to a signed body its signature's tail and the MAC,
// and encodes the header.
func (s *Service) finishHeader(r *headersign.Req) string {
	b := append(r.Body, r.Proof...)
	var mac [32]byte // the whole sum: headerBody left room for macLen bytes of it
	return b64String(append(b, s.headerMAC.Sum(mac[:0], b)[:macLen]...))
}

// headerInfo is a decoded header.
type headerInfo struct {
	version  int
	issuedMs int64
	signID   [8]byte
	hash     []byte
	asset    *assetSeal
	body     []byte // the bytes of the Merkle leaf
	index    int    // of the leaf in the signed tree
	proof    []byte // sibling digests, from the leaf up
	sig      []byte
	macOK    bool
}

// parseHeader decodes a header and checks its MAC, which proves that this
// service issued it unchanged. It does not check the Ed25519 signature,
// which is for third parties; verifySignature does. It returns a value,
// not a pointer: one allocation fewer on every decrypt call.
func (s *Service) parseHeader(text string) (headerInfo, error) {
	h, raw, err := decodeHeader(text)
	if err != nil {
		return h, err
	}
	var sum [32]byte
	h.macOK = hmac.Equal(s.headerMAC.Sum(sum[:0], raw[:len(raw)-macLen])[:macLen], raw[len(raw)-macLen:])
	return h, nil
}

// decodeHeader decodes a header, checking its layout but neither its MAC
// nor its signature, and returns it with its raw bytes.
func decodeHeader(text string) (headerInfo, []byte, error) {
	raw, err := b64url.DecodeString(text)
	if err != nil || len(raw) < headerFixedLen+2+ed25519.SignatureSize+macLen {
		return headerInfo{}, nil, Errorf(KindInvalid, "header is malformed")
	}
	if raw[0] != formatVersion {
		return headerInfo{}, nil, Errorf(KindInvalid, "header has unknown version %d", raw[0])
	}
	h := headerInfo{version: int(raw[0])}
	n := headerFixedLen
	if raw[1]&headerFlagAsset != 0 {
		n += headerAssetLen
	}
	if raw[1]&^headerFlagAsset != 0 || len(raw) < n+2 {
		return headerInfo{}, nil, Errorf(KindInvalid, "header is malformed")
	}
	depth, index := int(raw[n]), int(raw[n+1])
	if depth > headersign.MaxDepth || index >= 1<<depth || len(raw) != n+2+32*depth+ed25519.SignatureSize+macLen {
		return headerInfo{}, nil, Errorf(KindInvalid, "header is malformed")
	}
	copy(h.signID[:], raw[2:10])
	h.issuedMs = int64(binary.BigEndian.Uint64(raw[10:18]))
	h.hash = raw[18:83]
	if n > headerFixedLen {
		h.asset = &assetSeal{}
		copy(h.asset.id[:], raw[83:99])
		copy(h.asset.digest[:], raw[99:131])
	}
	h.body, h.index = raw[:n], index
	h.proof = raw[n+2 : n+2+32*depth]
	h.sig = raw[n+2+32*depth : len(raw)-macLen]
	return h, raw, nil
}

// signedBy reports whether the header's Ed25519 signature, of the root its
// proof leads to, verifies under pub.
func (h *headerInfo) signedBy(pub ed25519.PublicKey) bool {
	return headersign.Verify(pub, h.body, h.index, h.proof, h.sig)
}

// verifySignature checks the header's signature against the signing key
// it names.
func (s *Service) verifySignature(h *headerInfo) bool {
	s.verifyMu.RLock()
	pub, ok := s.verify[h.signID]
	s.verifyMu.RUnlock()
	if !ok && h.macOK {
		// A key another process of a shared store made after this one
		// loaded its keys.
		pub, ok = s.loadVerifyKey(h.signID)
	}
	return ok && h.signedBy(pub)
}

// loadVerifyKey reads the public half of the signing key id from the
// store and keeps it, reporting whether there is one.
func (s *Service) loadVerifyKey(id [8]byte) (ed25519.PublicKey, bool) {
	key := join(pfxSigning, []byte(hex.EncodeToString(id[:])))
	var pub ed25519.PublicKey
	err := s.store.View(context.Background(), func(tx Txn) error {
		sealed, err := tx.Get(key)
		if err != nil {
			return err
		}
		_, pub, err = s.openSigningKey(key, sealed)
		return err
	})
	return pub, err == nil
}
