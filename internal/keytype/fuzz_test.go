package keytype

import (
	"errors"
	"testing"
)

// fuzzSpecs are the specs the fuzz targets run over (no large RSA keys:
// their signatures only cost time).
func fuzzSpecs() []Spec {
	var out []Spec
	for _, s := range specs {
		if s.t.rsa() && s.t != RSA2048 {
			continue
		}
		out = append(out, s)
	}
	return out
}

// FuzzVerify: whatever the signature bytes and options, Verify answers
// false or an error of the package's kinds, never panics, and never
// takes a stranger's signature for the key's.
func FuzzVerify(f *testing.F) {
	for _, s := range fuzzSpecs() {
		if !s.t.Signs() {
			continue
		}
		k := testKey(f, s)
		for _, c := range signCases(s.t) {
			sig, err := k.Sign(c.input, c.o)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(string(s.t), string(c.o.Hash), c.o.Prehashed, string(c.o.Marshaling), string(c.o.Algorithm), string(c.o.SaltLength), c.input, sig)
		}
	}
	f.Add("ecdsa-p256", "", false, "asn1", "", "", []byte("m"), []byte{0x30, 0x06, 0x02, 0x01, 0x01, 0x02, 0x01, 0x01})
	f.Add("ecdsa-p384", "", false, "asn1", "", "", []byte("m"), []byte{0x30, 0x80, 0x02, 0x01, 0x01})
	keys := map[Type]*Key{}
	for _, s := range fuzzSpecs() {
		keys[s.t] = testKey(f, s)
	}
	f.Fuzz(func(t *testing.T, ty, hash string, prehashed bool, marshaling, alg, salt string, input, sig []byte) {
		k := keys[Type(ty)]
		if k == nil {
			return
		}
		o := SignOptions{Hash: Hash(hash), Prehashed: prehashed, Marshaling: Marshaling(marshaling), Algorithm: SignatureAlgorithm(alg), SaltLength: SaltLength(salt)}
		ok, err := k.Verify(input, sig, o)
		if err != nil {
			if ok {
				t.Fatal("Verify answered true with an error")
			}
			if !errors.Is(err, ErrWrongType) && !errors.Is(err, ErrParameter) && !errors.Is(err, ErrInput) {
				t.Fatalf("Verify: err = %v, of no kind of the package", err)
			}
			return
		}
		if ok {
			// A signature that verifies must be one the key could have
			// made: it verifies offline as well.
			if !offlineVerify(t, offlinePublic(t, k), input, sig, o) {
				t.Fatal("Verify accepted a signature that does not verify offline")
			}
		}
	})
}

// FuzzDecrypt: whatever the ciphertext, Decrypt answers ErrInput or the
// plaintext of a genuine ciphertext, never panics.
func FuzzDecrypt(f *testing.F) {
	aes := testKey(f, mustSpec(AES256GCM96, Params{}))
	chacha := testKey(f, mustSpec(ChaCha20Poly1305, Params{}))
	for _, k := range []*Key{aes, chacha} {
		ct, _ := k.Encrypt([]byte("plaintext"), []byte("ad"))
		f.Add(k == chacha, ct, []byte("ad"))
	}
	f.Add(false, []byte{}, []byte(nil))
	f.Fuzz(func(t *testing.T, useChaCha bool, blob, ad []byte) {
		k := aes
		if useChaCha {
			k = chacha
		}
		plain, err := k.Decrypt(blob, ad)
		if err != nil {
			if plain != nil || !errors.Is(err, ErrInput) {
				t.Fatalf("Decrypt = %d bytes, %v", len(plain), err)
			}
			return
		}
		if len(blob) != 12+len(plain)+16 {
			t.Fatalf("Decrypt of %d bytes answered %d", len(blob), len(plain))
		}
	})
}
