// Package keytype is the cryptography of the service's held keys, type by
// type: it makes a key version's material, loads it, and encrypts,
// decrypts, signs, verifies and computes HMACs with it, with the
// parameters and encodings of HashiCorp Vault's transit engine. It knows
// nothing of rings, versions, permissions or storage: the domain keeps
// those rules, seals the material this package makes, and hands it back
// to Load.
//
// # Types
//
// A Type names a key type as Vault's transit names it (aes256-gcm96,
// chacha20-poly1305, hmac, ed25519, ecdsa-p256, ecdsa-p384, rsa-2048,
// rsa-3072, rsa-4096) plus ml-dsa, the pure ML-DSA of FIPS 204. A Spec is
// a Type with its checked parameters (the HMAC key size, the ML-DSA
// parameter set): NewSpec is the one way to make one, and everything else
// takes a Spec or a Key made from one, so no operation runs on unchecked
// parameters.
//
// # Material
//
// Generate answers the material the caller stores, sealed:
//
//   - aes256-gcm96, chacha20-poly1305: the 32-byte key;
//   - hmac: the key, of the Spec's key size (32 to 512 bytes);
//   - ed25519, ecdsa-p256, ecdsa-p384, rsa-*: the PKCS #8 DER private key;
//   - ml-dsa: the 32-byte seed ξ of FIPS 204 (the parameter set is the
//     Spec's, which the caller records beside it).
//
// Load checks that material against its Spec (length, algorithm, curve,
// modulus size) and parses it once; a Key is then safe for concurrent use.
//
// # HMAC keys
//
// Every key version has an HMAC key, as every Vault transit key has one
// (transit/hmac works on a key of any type). For the hmac type it is the
// key itself. For the others it is derived from the material, so that
// nothing more is stored and it can never drift from the key it belongs
// to: HKDF-SHA256 (RFC 5869) with the material as secret, no salt, the
// info string HMACKeyInfo and 32 bytes of output.
//
// # Encodings
//
// Ciphertexts are nonce | ciphertext | tag with a 12-byte nonce, as Vault
// frames them for both AEAD types (package internal/vaultct frames them;
// its "vault:vN:" text is the protocol's business). Signatures are the raw
// bytes Vault base64-encodes: ASN.1 DER or JWS r||s for ECDSA, the
// algorithm's own bytes for the others. The base64 (standard, or
// URL-safe unpadded for marshaling_algorithm=jws) and the "vault:vN:"
// prefix belong to the protocol package. PublicKey and Export answer the
// strings Vault answers in keys[N].public_key and transit/export, to the
// byte.
//
// # Errors
//
// Errors wrap one of ErrWrongType, ErrParameter or ErrInput (the caller's
// request is wrong: a 400) or ErrMaterial (stored material that does not
// load: an internal error). No error carries key material or the input of
// an operation.
package keytype
