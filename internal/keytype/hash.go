package keytype

import (
	"crypto"
	_ "crypto/sha1" // registers crypto.SHA1
	_ "crypto/sha256"
	_ "crypto/sha3"
	_ "crypto/sha512"
	"slices"
)

// Hash is a hash algorithm, as Vault's hash_algorithm (and HMAC's
// algorithm) names it.
type Hash string

// The hash algorithms. The zero Hash is DefaultHash.
const (
	SHA1     Hash = "sha1"
	SHA2_224 Hash = "sha2-224"
	SHA2_256 Hash = "sha2-256"
	SHA2_384 Hash = "sha2-384"
	SHA2_512 Hash = "sha2-512"
	SHA3_224 Hash = "sha3-224"
	SHA3_256 Hash = "sha3-256"
	SHA3_384 Hash = "sha3-384"
	SHA3_512 Hash = "sha3-512"
	// HashNone signs a prehashed input as it is: only with an RSA key,
	// prehashed input and pkcs1v15 (a PKCS #1 v1.5 signature without the
	// DigestInfo), as Vault allows it.
	HashNone Hash = "none"
)

// DefaultHash is the hash of the zero Hash, as Vault's default.
const DefaultHash = SHA2_256

var hashes = []Hash{SHA1, SHA2_224, SHA2_256, SHA2_384, SHA2_512, SHA3_224, SHA3_256, SHA3_384, SHA3_512, HashNone}

var cryptoHashes = map[Hash]crypto.Hash{
	SHA1:     crypto.SHA1,
	SHA2_224: crypto.SHA224,
	SHA2_256: crypto.SHA256,
	SHA2_384: crypto.SHA384,
	SHA2_512: crypto.SHA512,
	SHA3_224: crypto.SHA3_224,
	SHA3_256: crypto.SHA3_256,
	SHA3_384: crypto.SHA3_384,
	SHA3_512: crypto.SHA3_512,
	HashNone: 0,
}

// resolve returns the hash h names, with the zero Hash as DefaultHash;
// an unknown name is ErrParameter.
func (h Hash) resolve() (Hash, crypto.Hash, error) {
	if h == "" {
		h = DefaultHash
	}
	if !slices.Contains(hashes, h) {
		return "", 0, errorf(ErrParameter, "unknown hash algorithm %s; the hash algorithms are %s", quoted(string(h)), names(hashes))
	}
	return h, cryptoHashes[h], nil
}
