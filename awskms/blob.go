package awskms

import (
	"encoding/binary"
	"slices"
)

// A ciphertext blob is what Encrypt answers and Decrypt takes:
//
//	0x01 | len(key) | key | uvarint(version) | nonce | ciphertext | tag
//
// the name of the held key (1 to 64 bytes) and the version that sealed
// it, then what the key's AEAD made. Decrypt reads the key from it, so a
// KeyId is optional there, as in AWS KMS.
const blobV1 = 0x01

// marshalBlob frames sealed, made by version of the key name.
func marshalBlob(name string, version int, sealed []byte) []byte {
	out := make([]byte, 0, 2+len(name)+binary.MaxVarintLen32+len(sealed))
	out = append(out, blobV1, byte(len(name)))
	out = append(out, name...)
	out = binary.AppendUvarint(out, uint64(version))
	return append(out, sealed...)
}

// unmarshalBlob reads what marshalBlob framed; a blob of another shape
// is InvalidCiphertextException.
func unmarshalBlob(b []byte) (name string, version int, sealed []byte, err error) {
	bad := fail("InvalidCiphertextException", "the ciphertext is not one that this service made")
	if len(b) < 3 || b[0] != blobV1 || int(b[1]) == 0 || len(b) < 2+int(b[1])+1 {
		return "", 0, nil, bad
	}
	n := int(b[1])
	name = string(b[2 : 2+n])
	v, m := binary.Uvarint(b[2+n:])
	if m <= 0 || m > binary.MaxVarintLen32 || v == 0 || v > 1<<31-1 {
		return "", 0, nil, bad
	}
	return name, int(v), b[2+n+m:], nil
}

// contextAAD is the associated data that binds an EncryptionContext to a
// ciphertext: its pairs in key order, each key and value preceded by its
// length (uvarint), after a label of this format; nil for no context, so
// that an empty context and none are the same, as in AWS KMS.
func contextAAD(ctx map[string]string) []byte {
	if len(ctx) == 0 {
		return nil
	}
	keys := make([]string, 0, len(ctx))
	for k := range ctx {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := []byte("ringkms/aws-encryption-context/v1\x00")
	for _, k := range keys {
		out = binary.AppendUvarint(out, uint64(len(k)))
		out = append(out, k...)
		out = binary.AppendUvarint(out, uint64(len(ctx[k])))
		out = append(out, ctx[k]...)
	}
	return out
}
