package keytype

import (
	"bytes"
	"strings"
	"testing"
)

// TestSignRefuses: every request Sign and Verify refuse, with the kind
// of error the caller maps to its answer; a refused Sign answers no
// signature.
func TestSignRefuses(t *testing.T) {
	msg := []byte("secret-input-0123456789")
	d256 := digest(SHA2_256, msg)
	tests := []struct {
		name  string
		t     Type
		o     SignOptions
		input []byte
		kind  error
	}{
		{"aes signs", AES256GCM96, SignOptions{}, msg, ErrWrongType},
		{"chacha signs", ChaCha20Poly1305, SignOptions{}, msg, ErrWrongType},
		{"hmac signs", HMAC, SignOptions{}, msg, ErrWrongType},
		{"unknown hash", ECDSAP256, SignOptions{Hash: "sha256"}, msg, ErrParameter},
		{"unknown hash ed25519", Ed25519, SignOptions{Hash: "md5"}, msg, ErrParameter},
		{"unknown marshaling", ECDSAP256, SignOptions{Marshaling: "der"}, msg, ErrParameter},
		{"unknown algorithm", RSA2048, SignOptions{Algorithm: "pss256"}, msg, ErrParameter},
		{"unknown algorithm ecdsa", ECDSAP256, SignOptions{Algorithm: "x"}, msg, ErrParameter},
		{"salt not a number", RSA2048, SignOptions{SaltLength: "lots"}, msg, ErrParameter},
		{"salt below -1", RSA2048, SignOptions{SaltLength: "-2"}, msg, ErrParameter},
		{"salt above max", RSA2048, SignOptions{SaltLength: "223"}, msg, ErrParameter},
		{"salt above max sha2-512", RSA2048, SignOptions{SaltLength: "191", Hash: SHA2_512}, msg, ErrParameter},
		{"salt syntax on ecdsa", ECDSAP256, SignOptions{SaltLength: "x"}, msg, ErrParameter},
		{"none not prehashed", RSA2048, SignOptions{Hash: HashNone, Algorithm: PKCS1v15}, msg, ErrParameter},
		{"none with pss", RSA2048, SignOptions{Hash: HashNone, Prehashed: true}, d256, ErrParameter},
		{"none on ecdsa", ECDSAP256, SignOptions{Hash: HashNone, Prehashed: true, Algorithm: PKCS1v15}, d256, ErrParameter},
		{"none on ed25519", Ed25519, SignOptions{Hash: HashNone, Prehashed: true, Algorithm: PKCS1v15}, msg, ErrParameter},
		{"none on ml-dsa", MLDSA, SignOptions{Hash: HashNone}, msg, ErrParameter},
		{"ed25519 prehashed", Ed25519, SignOptions{Prehashed: true}, d256, ErrParameter},
		{"ml-dsa prehashed", MLDSA, SignOptions{Prehashed: true}, d256, ErrParameter},
		{"ecdsa prehashed short", ECDSAP256, SignOptions{Prehashed: true}, d256[:31], ErrInput},
		{"ecdsa prehashed long", ECDSAP384, SignOptions{Prehashed: true, Hash: SHA2_384}, append(d256, d256...), ErrInput},
		{"rsa prehashed wrong hash", RSA2048, SignOptions{Prehashed: true, Hash: SHA2_512}, d256, ErrInput},
		{"rsa prehashed pkcs1v15 wrong", RSA2048, SignOptions{Prehashed: true, Algorithm: PKCS1v15}, msg, ErrInput},
		{"rsa none too long", RSA2048, SignOptions{Hash: HashNone, Prehashed: true, Algorithm: PKCS1v15}, make([]byte, 246), ErrInput},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s Spec
			for _, sp := range specs {
				if sp.t == tt.t {
					s = sp
					break
				}
			}
			k := testKey(t, s)
			sig, err := k.Sign(tt.input, tt.o)
			wantErr(t, "Sign", err, tt.kind)
			if sig != nil {
				t.Errorf("Sign failed and answered %d bytes", len(sig))
			}
			if err != nil && (strings.Contains(err.Error(), "secret-input") || bytes.Contains([]byte(err.Error()), k.material[:16])) {
				t.Errorf("the error repeats the input or the key: %v", err)
			}
			if tt.name == "rsa none too long" {
				return // Verify has nothing to refuse: no signature matches
			}
			ok, err := k.Verify(tt.input, make([]byte, 64), tt.o)
			wantErr(t, "Verify", err, tt.kind)
			if ok {
				t.Error("Verify failed and answered true")
			}
		})
	}
}

// TestVerifyMalformed: an ASN.1 ECDSA signature that does not decode is
// ErrInput (Vault's "supplied signature is invalid"); every other wrong
// signature, of any length, is false without an error.
func TestVerifyMalformed(t *testing.T) {
	p256 := testKey(t, mustSpec(ECDSAP256, Params{}))
	good, _ := p256.Sign([]byte("m"), SignOptions{})
	for name, sig := range map[string][]byte{
		"empty":          nil,
		"garbage":        []byte("not asn.1"),
		"trailing bytes": append(bytes.Clone(good), 0),
		"truncated":      good[:len(good)-1],
	} {
		ok, err := p256.Verify([]byte("m"), sig, SignOptions{})
		wantErr(t, "Verify(asn1 "+name+")", err, ErrInput)
		if ok {
			t.Errorf("Verify(asn1 %s) = true", name)
		}
	}
	for _, s := range specs {
		if !s.t.Signs() || (s.t.rsa() && s.t != RSA2048) {
			continue
		}
		k := testKey(t, s)
		for _, n := range []int{0, 1, 63, 64, 65, 96, 256, 5000} {
			o := SignOptions{Marshaling: JWS}
			ok, err := k.Verify([]byte("m"), make([]byte, n), o)
			if ok || err != nil {
				t.Errorf("%s: Verify(%d zero bytes, jws) = %v, %v; want false, nil", name(s), n, ok, err)
			}
			if s.t.ecdsa() {
				continue
			}
			ok, err = k.Verify([]byte("m"), bytes.Repeat([]byte{0xff}, n), SignOptions{})
			if ok || err != nil {
				t.Errorf("%s: Verify(%d 0xff bytes) = %v, %v; want false, nil", name(s), n, ok, err)
			}
		}
	}
}
