package envelope

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/ringkms/kms"
)

// Keys is where keys come from: the encrypt and decrypt calls of the
// service. *kms.Service (with a principal in the context) and
// *client.Client meet it.
type Keys interface {
	Encrypt(ctx context.Context, in kms.EncryptInput) (*kms.EncryptResult, error)
	Decrypt(ctx context.Context, in kms.DecryptInput) (*kms.DecryptResult, error)
}

// Unwrapper opens the keyData of a key of the ring ringID and returns its
// 32 bytes. *kms.PrivateKey meets it, for every wrapping scheme.
type Unwrapper interface {
	Unwrap(ringID string, k *kms.Key) ([]byte, error)
}

// The format's constants (docs/FORMAT.md section "Envelope").
const (
	// ChunkSize is the plaintext size of every chunk but the last.
	ChunkSize = 64 << 10

	magic      = "rkmsenv"
	version    = 1
	saltSize   = 32
	tagSize    = 16
	nonceSize  = 12
	chunkCT    = ChunkSize + tagSize
	maxField   = 1024 // bound on the hash and header lengths read
	kdfInfo    = "ringkms/envelope/v1"
	aadContext = "ringkms/envelope/v1/aad"
)

// ErrFormat is wrapped by every error about bytes that are not an
// envelope, or not an intact one: bad magic, unknown version, a chunk
// that fails authentication, a stream cut off or with bytes after its
// last chunk, other associated data.
var ErrFormat = errors.New("envelope: not an intact envelope")

func formatError(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrFormat}, args...)...)
}

// Sealer seals and opens envelopes with the keys of a service. It is safe
// for concurrent use.
type Sealer struct {
	keys   Keys
	unwrap Unwrapper
}

// New returns a Sealer that gets keys from keys and unwraps them with u
// (the private key of every ring it seals with or opens for).
func New(keys Keys, u Unwrapper) *Sealer {
	return &Sealer{keys: keys, unwrap: u}
}

// SealInput says how to seal.
type SealInput struct {
	// RingName is the /ks ring whose active key seals the data.
	RingName string
	// Asset, when set, creates or updates an Asset in the encrypt call;
	// the header signs it, and opening fails once it has changed.
	Asset *kms.AssetInput
	// AssociatedData is authenticated, not stored: opening needs the
	// same bytes.
	AssociatedData []byte
}

// Info is what an envelope says of itself before it is opened.
type Info struct {
	Version int
	Hash    string // the hash of the encrypt call, base64url as the service writes it
	Header  string // its header, base64url
}

// Seal encrypts plaintext into a new envelope. The encrypt call's result
// (the Asset, for one) is not returned: use NewWriter to get it.
func (s *Sealer) Seal(ctx context.Context, in SealInput, plaintext []byte) ([]byte, error) {
	_, prelude, st, err := s.begin(ctx, in)
	if err != nil {
		return nil, err
	}
	return st.sealAll(prelude, plaintext), nil
}

// begin makes the encrypt call of a new envelope and returns its answer,
// the envelope's prelude and the state that seals its chunks.
func (s *Sealer) begin(ctx context.Context, in SealInput) (*kms.EncryptResult, []byte, *state, error) {
	res, key, err := s.encrypt(ctx, in)
	if err != nil {
		return nil, nil, nil, err
	}
	prelude, err := newPrelude(res)
	if err != nil {
		clear(key)
		return nil, nil, nil, err
	}
	st, err := newState(key, prelude, in.AssociatedData)
	if err != nil {
		return nil, nil, nil, err
	}
	return res, prelude, st, nil
}

// sealAll returns the envelope of plaintext: prelude and chunks.
func (st *state) sealAll(prelude, plaintext []byte) []byte {
	chunks := max(1, (len(plaintext)+ChunkSize-1)/ChunkSize)
	out := make([]byte, len(prelude), len(prelude)+len(plaintext)+chunks*tagSize)
	copy(out, prelude)
	for i := range chunks {
		part := plaintext[i*ChunkSize : min(len(plaintext), (i+1)*ChunkSize)]
		out = st.seal(out, part, uint64(i), i == chunks-1)
	}
	return out
}

// Open checks an envelope's header with the service and decrypts it,
// with the associated data it was sealed with. It fails with an error
// wrapping ErrFormat when the bytes are not an intact envelope, and with
// the service's error (a *kms.Error) when the service refuses the key.
func (s *Sealer) Open(ctx context.Context, sealed, ad []byte) ([]byte, error) {
	info, n, err := parsePrelude(sealed)
	if err != nil {
		return nil, err
	}
	_, st, err := s.decrypt(ctx, info, sealed[:n], ad)
	if err != nil {
		return nil, err
	}
	body := sealed[n:]
	chunks := max(1, (len(body)+chunkCT-1)/chunkCT)
	if len(body) < tagSize || (len(body)-1)%chunkCT+1 < tagSize {
		return nil, formatError("the last chunk is shorter than its tag")
	}
	out := make([]byte, 0, len(body)-chunks*tagSize)
	for i := range chunks {
		part := body[i*chunkCT : min(len(body), (i+1)*chunkCT)]
		if out, err = st.open(out, part, uint64(i), i == chunks-1); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ReadInfo reads the hash and header at the start of an envelope, without
// opening it (to look them up with the service, say). It reads no more of
// r than the prelude.
func ReadInfo(r io.Reader) (*Info, error) {
	info, _, err := readPrelude(r)
	return info, err
}

// encrypt asks for a key and returns the call's data key.
func (s *Sealer) encrypt(ctx context.Context, in SealInput) (*kms.EncryptResult, []byte, error) {
	res, err := s.keys.Encrypt(ctx, kms.EncryptInput{RingName: in.RingName, Asset: in.Asset})
	if err != nil {
		return nil, nil, err
	}
	key, err := s.dataKey(res.RingID, res.Key, res.KeyShare)
	if err != nil {
		return nil, nil, err
	}
	return res, key, nil
}

// decrypt hands the hash and header back to the service and returns its
// answer and the state that opens the envelope of prelude, sealed with
// the associated data ad, with the call's data key.
func (s *Sealer) decrypt(ctx context.Context, info *Info, prelude, ad []byte) (*kms.DecryptResult, *state, error) {
	res, err := s.keys.Decrypt(ctx, kms.DecryptInput{Hash: info.Hash, Header: info.Header})
	if err != nil {
		return nil, nil, err
	}
	key, err := s.dataKey(res.RingID, res.Key, res.KeyShare)
	if err != nil {
		return nil, nil, err
	}
	st, err := newState(key, prelude, ad)
	if err != nil {
		return nil, nil, err
	}
	return res, st, nil
}

// dataKey unwraps the ring's key k and returns the call's data key: on a
// ring with split data keys (an answer with a keyShare) the key derived
// from both, docs/FORMAT.md section 2.1; on any other, the ring's key.
func (s *Sealer) dataKey(ringID string, k *kms.Key, keyShare string) ([]byte, error) {
	key, err := s.unwrap.Unwrap(ringID, k)
	if err != nil {
		return nil, err
	}
	defer clear(key)
	return kms.DataKey(key, keyShare)
}

// newPrelude returns the prelude of a new envelope for res, with a fresh
// salt.
func newPrelude(res *kms.EncryptResult) ([]byte, error) {
	hash, err := base64.RawURLEncoding.DecodeString(res.Hash)
	if err != nil || len(hash) == 0 || len(hash) > maxField {
		return nil, fmt.Errorf("envelope: the service answered a hash that is not base64url of 1 to %d bytes", maxField)
	}
	header, err := base64.RawURLEncoding.DecodeString(res.Header)
	if err != nil || len(header) == 0 || len(header) > maxField {
		return nil, fmt.Errorf("envelope: the service answered a header that is not base64url of 1 to %d bytes", maxField)
	}
	salt := make([]byte, saltSize)
	rand.Read(salt)
	return appendPrelude(nil, salt, hash, header), nil
}

// appendPrelude appends a prelude: magic, version, salt, the hash and
// the header.
func appendPrelude(b, salt, hash, header []byte) []byte {
	b = append(b, magic...)
	b = append(b, version)
	b = append(b, salt...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(hash)))
	b = append(b, hash...)
	b = binary.BigEndian.AppendUint16(b, uint16(len(header)))
	return append(b, header...)
}

// parsePrelude parses the prelude at the start of b and returns its length.
func parsePrelude(b []byte) (*Info, int, error) {
	info, raw, err := readPrelude(bytes.NewReader(b))
	return info, len(raw), err
}

// readPrelude reads a prelude from r and returns it, parsed and as read.
func readPrelude(r io.Reader) (*Info, []byte, error) {
	const fixed = len(magic) + 1 + saltSize + 2
	raw := make([]byte, fixed, fixed+2*maxField)
	if _, err := io.ReadFull(r, raw); err != nil {
		return nil, nil, truncated(err, "the prelude")
	}
	if string(raw[:len(magic)]) != magic {
		return nil, nil, formatError("it does not start with %q", magic)
	}
	if v := raw[len(magic)]; v != version {
		return nil, nil, formatError("version %d: this library reads version %d", v, version)
	}
	raw, hash, err := readField(r, raw, "hash", true)
	if err != nil {
		return nil, nil, err
	}
	raw, header, err := readField(r, raw, "header", false)
	if err != nil {
		return nil, nil, err
	}
	return &Info{Version: version, Hash: base64.RawURLEncoding.EncodeToString(hash), Header: base64.RawURLEncoding.EncodeToString(header)}, raw, nil
}

// readField reads a field of the prelude (its length, unless have says
// raw ends with it already, and its bytes) from r onto raw, and returns
// raw and the field.
func readField(r io.Reader, raw []byte, what string, have bool) ([]byte, []byte, error) {
	if !have {
		raw = append(raw, 0, 0)
		if _, err := io.ReadFull(r, raw[len(raw)-2:]); err != nil {
			return nil, nil, truncated(err, "the prelude")
		}
	}
	n := int(binary.BigEndian.Uint16(raw[len(raw)-2:]))
	if n == 0 || n > maxField {
		return nil, nil, formatError("a %s of %d bytes", what, n)
	}
	start := len(raw)
	raw = append(raw, make([]byte, n)...)
	if _, err := io.ReadFull(r, raw[start:]); err != nil {
		return nil, nil, truncated(err, "the "+what)
	}
	return raw, raw[start:], nil
}

// truncated turns the end of the input into a format error and passes
// any other read error on.
func truncated(err error, what string) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return formatError("it ends within %s", what)
	}
	return err
}

// state seals or opens the chunks of one envelope.
type state struct {
	aead  cipher.AEAD
	aad   [sha256.Size]byte
	nonce [nonceSize]byte
}

// newState derives the envelope's key from the data key (which it
// clears) and its salt, and the chunks' associated data from the prelude
// and the caller's associated data.
func newState(dataKey, prelude, ad []byte) (*state, error) {
	defer clear(dataKey)
	salt := prelude[len(magic)+1 : len(magic)+1+saltSize]
	k, err := hkdf.Key(sha256.New, dataKey, salt, kdfInfo, 32)
	if err != nil {
		return nil, err
	}
	defer clear(k)
	block, err := aes.NewCipher(k)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	st := &state{aead: aead}
	h := sha256.New()
	var n [8]byte
	h.Write([]byte(aadContext))
	h.Write(binary.BigEndian.AppendUint64(n[:0], uint64(len(prelude))))
	h.Write(prelude)
	h.Write(binary.BigEndian.AppendUint64(n[:0], uint64(len(ad))))
	h.Write(ad)
	h.Sum(st.aad[:0])
	return st, nil
}

// setNonce makes the nonce of chunk i: three zero bytes, i as 8 bytes,
// and 1 for the last chunk or 0.
func (st *state) setNonce(i uint64, last bool) []byte {
	binary.BigEndian.PutUint64(st.nonce[3:11], i)
	st.nonce[11] = 0
	if last {
		st.nonce[11] = 1
	}
	return st.nonce[:]
}

// seal appends the sealed chunk i of plaintext pt to dst. pt and dst's
// free capacity may overlap exactly (sealing in place).
func (st *state) seal(dst, pt []byte, i uint64, last bool) []byte {
	return st.aead.Seal(dst, st.setNonce(i, last), pt, st.aad[:])
}

// open appends the plaintext of sealed chunk i to dst.
func (st *state) open(dst, ct []byte, i uint64, last bool) ([]byte, error) {
	out, err := st.aead.Open(dst, st.setNonce(i, last), ct, st.aad[:])
	if err != nil {
		if last {
			return nil, formatError("chunk %d fails authentication as the last chunk (altered, out of order, the stream cut off, or other associated data)", i)
		}
		return nil, formatError("chunk %d fails authentication (altered, out of order, or other associated data)", i)
	}
	return out, nil
}
