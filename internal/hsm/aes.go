//go:build cgo

package hsm

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"

	"github.com/miekg/pkcs11"
)

// AESKey is an AES-256 key that stays in its token: the token seals and
// opens with it (CKM_AES_GCM), and the process never sees its bytes. It
// is safe for concurrent use, and valid until its Token is closed.
type AESKey struct {
	t    *Token
	h    pkcs11.ObjectHandle
	desc string
}

// AESKey finds the AES-256 secret key (CKO_SECRET_KEY, CKK_AES) that u's
// object and id name, and checks that it can be trusted with the root of
// trust: sensitive (CKA_SENSITIVE), not extractable (CKA_EXTRACTABLE
// false), allowed to encrypt and decrypt with CKM_AES_GCM. It seals and
// opens a probe with it, so that a token that cannot do AES-GCM says so
// now rather than at the next rekey.
func (t *Token) AESKey(u URI) (*AESKey, error) {
	h, err := t.findKey(u, pkcs11.CKO_SECRET_KEY, "secret-key", "an AES key is a secret-key object")
	if err != nil {
		return nil, err
	}
	desc := fmt.Sprintf("the secret key %s on token %q", u.objectDesc(), t.label)
	a, err := t.attrs(h, pkcs11.CKA_KEY_TYPE, pkcs11.CKA_VALUE_LEN, pkcs11.CKA_SENSITIVE, pkcs11.CKA_EXTRACTABLE, pkcs11.CKA_ENCRYPT, pkcs11.CKA_DECRYPT)
	if err != nil {
		return nil, err
	}
	if typ := ulong(a[0]); typ != pkcs11.CKK_AES {
		return nil, errorf(ReasonKeyType, nil, "%s is not an AES key (CKA_KEY_TYPE %#x)", desc, typ)
	}
	if n := ulong(a[1]); n != 32 {
		return nil, errorf(ReasonKeyType, nil, "%s is AES-%d, not AES-256 (CKA_VALUE_LEN %d, want 32)", desc, 8*n, n)
	}
	if !boolean(a[2]) {
		return nil, errorf(ReasonKeyPolicy, nil, "%s is not sensitive (CKA_SENSITIVE false): its value can be read off the token; make a new key with CKA_SENSITIVE true and CKA_EXTRACTABLE false", desc)
	}
	if boolean(a[3]) {
		return nil, errorf(ReasonKeyPolicy, nil, "%s is extractable (CKA_EXTRACTABLE true): it can be wrapped off the token; make a new key with CKA_EXTRACTABLE false", desc)
	}
	if !boolean(a[4]) || !boolean(a[5]) {
		return nil, errorf(ReasonKeyPolicy, nil, "%s may not encrypt and decrypt (CKA_ENCRYPT and CKA_DECRYPT must be true)", desc)
	}
	if !t.allowsMechanism(h, pkcs11.CKM_AES_GCM) {
		return nil, errorf(ReasonKeyPolicy, nil, "%s may not be used with CKM_AES_GCM (CKA_ALLOWED_MECHANISMS)", desc)
	}
	k := &AESKey{t: t, h: h, desc: desc}
	probe := []byte("ringkms hsm probe")
	sealed, err := k.Seal(probe, probe)
	if err != nil {
		return nil, err
	}
	if _, err := k.Open(sealed, probe); err != nil {
		return nil, errorf(ReasonDevice, err, "%s does not open what it sealed", desc)
	}
	return k, nil
}

// Seal encrypts plaintext bound to aad, in the token, under a fresh random
// IV. The result is version | IV | ciphertext and tag.
func (k *AESKey) Seal(plaintext, aad []byte) ([]byte, error) {
	iv := make([]byte, ivSize)
	rand.Read(iv)
	var ct, used []byte
	err := k.t.do(func(sh pkcs11.SessionHandle) error {
		params := pkcs11.NewGCMParams(iv, aad, 8*tagSize)
		defer params.Free()
		if err := k.t.mod.ctx.EncryptInit(sh, []*pkcs11.Mechanism{pkcs11.NewMechanism(pkcs11.CKM_AES_GCM, params)}, k.h); err != nil {
			return err
		}
		out, err := k.t.mod.ctx.Encrypt(sh, plaintext)
		if err != nil {
			return err
		}
		ct, used = out, params.IV()
		return nil
	})
	if err != nil {
		if isCode(err, pkcs11.CKR_MECHANISM_INVALID) || isCode(err, pkcs11.CKR_MECHANISM_PARAM_INVALID) {
			return nil, errorf(ReasonDevice, err, "token %q cannot seal with CKM_AES_GCM (12-byte IV, 128-bit tag)", k.t.label)
		}
		return nil, k.t.fail(err, "seal with %s", k.desc)
	}
	if len(used) != ivSize || len(ct) != len(plaintext)+tagSize {
		return nil, errorf(ReasonDevice, nil, "seal with %s: the token answered a %d-byte IV and %d bytes for %d", k.desc, len(used), len(ct), len(plaintext))
	}
	// A token may choose the IV itself (some do, whatever the caller
	// gives): what it used is what Open needs.
	out := make([]byte, 0, SealOverhead+len(plaintext))
	out = append(out, sealVersion)
	out = append(out, used...)
	return append(out, ct...), nil
}

// Open decrypts a value Seal returned, with the same aad. A value that
// was altered, truncated, sealed with another aad or under another key
// fails with ErrOpen.
func (k *AESKey) Open(sealed, aad []byte) ([]byte, error) {
	if len(sealed) < SealOverhead {
		return nil, errorf(ReasonOpen, nil, "sealed value is %d bytes, shorter than the %d of an empty one", len(sealed), SealOverhead)
	}
	if sealed[0] != sealVersion {
		return nil, errorf(ReasonOpen, nil, "sealed value has unknown version %d", sealed[0])
	}
	pt, atDecrypt, err := k.open(sealed, aad)
	if err == nil {
		return pt, nil
	}
	var p11 pkcs11.Error
	if atDecrypt && errors.As(err, &p11) && (dataError(p11) || k.wellAfter(p11)) {
		return nil, errorf(ReasonOpen, err, "sealed value failed to open with %s: altered, truncated, or sealed with another aad or key", k.desc)
	}
	return nil, k.t.fail(err, "open with %s", k.desc)
}

// open decrypts in the token, and tells whether an error came from
// C_Decrypt itself, that is after the token took the key and parameters.
func (k *AESKey) open(sealed, aad []byte) (pt []byte, atDecrypt bool, err error) {
	iv, ct := sealed[1:1+ivSize], sealed[1+ivSize:]
	err = k.t.do(func(sh pkcs11.SessionHandle) error {
		params := pkcs11.NewGCMParams(iv, aad, 8*tagSize)
		defer params.Free()
		if err := k.t.mod.ctx.DecryptInit(sh, []*pkcs11.Mechanism{pkcs11.NewMechanism(pkcs11.CKM_AES_GCM, params)}, k.h); err != nil {
			return err
		}
		atDecrypt = true
		out, err := k.t.mod.ctx.Decrypt(sh, ct)
		pt = out
		return err
	})
	return pt, atDecrypt, err
}

// wellAfter reports whether a C_Decrypt that failed with code, a failure
// that names no cause, failed on the data: so it did when the key still
// seals and opens. SoftHSM2 answers a wrong tag with CKR_GENERAL_ERROR
// rather than CKR_ENCRYPTED_DATA_INVALID; a token that is failing would
// fail the probe too, and is reported as failing.
func (k *AESKey) wellAfter(code pkcs11.Error) bool {
	if code != pkcs11.CKR_GENERAL_ERROR && code != pkcs11.CKR_FUNCTION_FAILED {
		return false
	}
	probe := []byte("ringkms hsm probe")
	sealed, err := k.Seal(probe, nil)
	if err != nil {
		return false
	}
	pt, _, err := k.open(sealed, nil)
	return err == nil && bytes.Equal(pt, probe)
}
