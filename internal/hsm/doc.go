// Package hsm keeps keys in a PKCS#11 token (a hardware security module,
// or SoftHSM2 in tests): an AES-256 key that seals and opens the store's
// root secret, and Ed25519 key pairs that sign. The process never holds
// the keys' bytes; the token does the work. It is the one package of the
// module that uses cgo (through github.com/miekg/pkcs11); it imports
// nothing of the domain.
//
// # URIs
//
// A key is named by a PKCS#11 URI (RFC 7512), parsed by ParseURI:
//
//	pkcs11:token=kms;object=kms-master?module-path=/usr/lib/softhsm/libsofthsm2.so&pin-source=file:/etc/kms/pin
//
// The URI must name the module to load (module-path) and the key (object,
// its CKA_LABEL, or id, its CKA_ID as percent-encoded bytes). The PIN is
// never part of it: pin-value is refused, and URI.ReadPIN reads the
// pin-source file or takes what the caller read from the environment
// (PINEnv). Attributes the RFC does not define are refused, except the
// vendors' own (x-...), which are ignored.
//
// # Tokens and sessions
//
// Open loads the module, selects the one initialised token the URI's
// token attributes match, opens a small pool of sessions and logs in as
// the user. Each operation takes a session of its own, so a Token and its
// keys are safe for concurrent use; a session on which an operation
// failed is replaced. A module is initialised once per process and shared
// by the Tokens on it, as is the login to one token (a second Open of it
// must give the same PIN); Close gives them back, and the last one out
// logs out and finalizes the module.
//
// # Keys
//
// Token.AESKey finds an AES-256 secret key and refuses one that is not
// sensitive or is extractable; AESKey.Seal and AESKey.Open use CKM_AES_GCM
// with a random 12-byte IV and a 16-byte tag, and the value they pass is
// version (0x01) | IV | ciphertext and tag. Token.Ed25519Key finds a key
// pair (CKK_EC_EDWARDS on edwards25519) and returns a crypto.Signer
// whose signatures crypto/ed25519.Verify accepts; Token.GenerateEd25519
// makes a new one in the token. Both check a key when they find it, with
// a probe operation, so that a token that cannot do the work says so at
// start.
//
// Plaintexts pass through the module's memory, which this package cannot
// clear; what Open returns belongs to the caller, who clears it.
//
// # Errors
//
// Every error is an *Error whose Reason says what went wrong (a module
// that does not load, no such token, a wrong or locked PIN, no such key,
// more than one, a key of the wrong type or size, a key that could leave
// the token, a value that does not open); the sentinels (ErrPINIncorrect,
// ...) let callers branch with errors.Is. Messages name the token and the
// key and say what to do; they never hold a PIN or a plaintext.
//
// # Builds without cgo
//
// With CGO_ENABLED=0 the package has the same API, and Open (like every
// other constructor) answers ErrNoSupport: "this build of ringkms has no
// PKCS#11 support".
//
// # SoftHSM2
//
// The tests run on SoftHSM2 2.6 (internal/hsmtest), which does
// CKM_AES_GCM and CKM_EDDSA with these quirks: a wrong GCM tag fails
// C_Decrypt with CKR_GENERAL_ERROR, not CKR_ENCRYPTED_DATA_INVALID (so
// AESKey.Open takes a general failure of C_Decrypt for a value that does
// not open only when a probe right after it seals and opens: a failing
// token is reported as one); it takes edwards25519 in CKA_EC_PARAMS as
// the OID or as the PrintableString, keeps the public key's as given but
// writes the private key's as the PrintableString; it keeps CKA_EC_POINT
// as a DER OCTET STRING; it presents an uninitialised token in an extra
// slot (skipped here); and it never locks a PIN, though it sets
// CKF_USER_PIN_COUNT_LOW after a wrong one.
package hsm
