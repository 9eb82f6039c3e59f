package k8skms

import (
	"encoding/binary"
	"errors"
)

// formatV1 is the first byte of a ciphertext of this package: a version
// of the key (uvarint) follows, then what the held key's AEAD made
// (nonce | ciphertext | tag).
const formatV1 = 0x01

// MaxCiphertext is the size a ciphertext stays under: the API server
// refuses one of 1 KiB or more.
const MaxCiphertext = 1024

// overhead is the most a ciphertext adds to its plaintext: the format
// byte, a version of up to 5 bytes and the AEAD's 12-byte nonce and
// 16-byte tag.
const overhead = 1 + binary.MaxVarintLen32 + 12 + 16

// MaxPlaintext is the largest plaintext Encrypt takes, so that every
// ciphertext stays under MaxCiphertext. The API server sends 32 bytes.
const MaxPlaintext = MaxCiphertext - 1 - overhead

var errFormat = errors.New("not a ciphertext of this plugin")

// marshal frames sealed, made by version of the key.
func marshal(version int, sealed []byte) []byte {
	out := make([]byte, 0, 1+binary.MaxVarintLen32+len(sealed))
	out = append(out, formatV1)
	out = binary.AppendUvarint(out, uint64(version))
	return append(out, sealed...)
}

// unmarshal reads what marshal framed.
func unmarshal(ct []byte) (version int, sealed []byte, err error) {
	if len(ct) < 2 || ct[0] != formatV1 {
		return 0, nil, errFormat
	}
	v, n := binary.Uvarint(ct[1:])
	if n <= 0 || n > binary.MaxVarintLen32 || v == 0 || v > 1<<31-1 {
		return 0, nil, errFormat
	}
	return int(v), ct[1+n:], nil
}
