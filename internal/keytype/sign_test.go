package keytype

import (
	"bytes"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/asn1"
	"encoding/hex"
	"testing"

	"filippo.io/mldsa"
)

// digest returns h's digest of b.
func digest(h Hash, b []byte) []byte {
	hh := cryptoHashes[h].New()
	hh.Write(b)
	return hh.Sum(nil)
}

// signCases are the options each signing type is tried with, and the
// input for each.
type signCase struct {
	name  string
	o     SignOptions
	input []byte
}

func signCases(t Type) []signCase {
	msg := []byte("attack at dawn")
	cases := []signCase{{"defaults", SignOptions{}, msg}, {"empty input", SignOptions{}, nil}}
	if t == Ed25519 || t == MLDSA {
		// The hash is ignored; jws changes only the text.
		return append(cases,
			signCase{"sha2-512 ignored", SignOptions{Hash: SHA2_512}, msg},
			signCase{"jws", SignOptions{Marshaling: JWS}, msg})
	}
	for _, h := range []Hash{SHA1, SHA2_224, SHA2_384, SHA2_512, SHA3_224, SHA3_256, SHA3_384, SHA3_512} {
		cases = append(cases, signCase{string(h), SignOptions{Hash: h}, msg})
	}
	cases = append(cases,
		signCase{"prehashed sha2-256", SignOptions{Prehashed: true}, digest(SHA2_256, msg)},
		signCase{"prehashed sha2-384", SignOptions{Hash: SHA2_384, Prehashed: true}, digest(SHA2_384, msg)},
		signCase{"jws", SignOptions{Marshaling: JWS}, msg},
		signCase{"jws sha2-384", SignOptions{Marshaling: JWS, Hash: SHA2_384}, msg})
	if t.rsa() {
		cases = append(cases,
			signCase{"pkcs1v15", SignOptions{Algorithm: PKCS1v15}, msg},
			signCase{"pkcs1v15 sha3-512", SignOptions{Algorithm: PKCS1v15, Hash: SHA3_512}, msg},
			signCase{"pkcs1v15 prehashed", SignOptions{Algorithm: PKCS1v15, Prehashed: true}, digest(SHA2_256, msg)},
			signCase{"pkcs1v15 none", SignOptions{Algorithm: PKCS1v15, Hash: HashNone, Prehashed: true}, []byte("forty bytes of something signed as is..")},
			signCase{"pss salt hash", SignOptions{SaltLength: SaltHash}, msg},
			signCase{"pss salt -1", SignOptions{SaltLength: "-1"}, msg},
			signCase{"pss salt 20", SignOptions{SaltLength: "20"}, msg},
			signCase{"pss salt AUTO", SignOptions{SaltLength: "AUTO"}, msg},
			signCase{"pss salt 0", SignOptions{SaltLength: "0"}, msg},
			signCase{"pss salt max", SignOptions{SaltLength: SaltLength(itoa(t.rsaBits()/8 - 2 - 32))}, msg},
			signCase{"pss prehashed sha2-512", SignOptions{Hash: SHA2_512, Prehashed: true}, digest(SHA2_512, msg)})
	}
	return cases
}

// TestSignVerify signs with every signing type and option, and checks
// each signature with Verify, offline from the public key encoding the
// key answers, against an altered signature, another input and another
// key.
func TestSignVerify(t *testing.T) {
	for _, s := range specs {
		if !s.t.Signs() {
			continue
		}
		t.Run(name(s), func(t *testing.T) {
			k := testKey(t, s)
			pub := offlinePublic(t, k)
			m, _ := Generate(s)
			other, err := Load(s, m)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range signCases(s.t) {
				t.Run(c.name, func(t *testing.T) {
					sig, err := k.Sign(c.input, c.o)
					if err != nil {
						t.Fatalf("Sign = %v", err)
					}
					if ok, err := k.Verify(c.input, sig, c.o); !ok || err != nil {
						t.Fatalf("Verify(own signature) = %v, %v", ok, err)
					}
					if !offlineVerify(t, pub, c.input, sig, c.o) {
						t.Fatal("the signature does not verify offline")
					}
					if ok, err := other.Verify(c.input, sig, c.o); ok || err != nil {
						t.Errorf("another key's Verify = %v, %v; want false, nil", ok, err)
					}
					altered := append(bytes.Clone(c.input), 0)
					if c.o.Prehashed {
						altered = bytes.Clone(c.input)
						altered[0] ^= 1
					}
					if ok, err := k.Verify(altered, sig, c.o); ok || err != nil {
						t.Errorf("Verify(other input) = %v, %v; want false, nil", ok, err)
					}
					for _, i := range []int{0, len(sig) / 2, len(sig) - 1} {
						bad := bytes.Clone(sig)
						bad[i] ^= 0x10
						ok, err := k.Verify(c.input, bad, c.o)
						if ok {
							t.Errorf("Verify(signature with byte %d altered) = true", i)
						}
						if err != nil && !(s.t.ecdsa() && c.o.Marshaling != JWS) {
							t.Errorf("Verify(signature with byte %d altered): err = %v; only an ECDSA ASN.1 signature may fail to decode", i, err)
						}
					}
					if ok, _ := k.Verify(c.input, sig[:len(sig)-1], c.o); ok {
						t.Error("Verify(truncated signature) = true")
					}
				})
			}
		})
	}
}

// TestSignEncodings: an ECDSA signature is DER in asn1 and r||s of the
// order's width in jws; the other types' bytes do not depend on it.
func TestSignEncodings(t *testing.T) {
	for _, ty := range []Type{ECDSAP256, ECDSAP384} {
		k := testKey(t, mustSpec(ty, Params{}))
		w := orderBytes(ty)
		for range 20 {
			sig, err := k.Sign([]byte("m"), SignOptions{Marshaling: JWS})
			if err != nil || len(sig) != 2*w {
				t.Fatalf("%s jws: %d bytes, %v; want %d", ty, len(sig), err, 2*w)
			}
			sig, err = k.Sign([]byte("m"), SignOptions{})
			var rs ecdsaSignature
			rest, perr := asn1.Unmarshal(sig, &rs)
			if err != nil || perr != nil || len(rest) != 0 || rs.R.Sign() <= 0 || rs.S.Sign() <= 0 {
				t.Fatalf("%s asn1: %x is not a DER ECDSA signature: %v %v", ty, sig, err, perr)
			}
		}
		// Read as the other layout, a signature does not verify.
		sig, _ := k.Sign([]byte("m"), SignOptions{Marshaling: JWS})
		if ok, err := k.Verify([]byte("m"), sig, SignOptions{}); ok {
			t.Errorf("%s: a jws signature verified as asn1 (%v)", ty, err)
		}
		sig, _ = k.Sign([]byte("m"), SignOptions{})
		if ok, err := k.Verify([]byte("m"), sig, SignOptions{Marshaling: JWS}); ok || err != nil {
			t.Errorf("%s: an asn1 signature read as jws = %v, %v; want false, nil", ty, ok, err)
		}
	}
	ed := testKey(t, mustSpec(Ed25519, Params{}))
	a, _ := ed.Sign([]byte("m"), SignOptions{})
	b, _ := ed.Sign([]byte("m"), SignOptions{Marshaling: JWS, Hash: SHA3_512})
	if !bytes.Equal(a, b) {
		t.Error("ed25519 signatures depend on marshaling or hash")
	}
}

// TestPSSAndPKCS1v15: the two RSA schemes give signatures the other
// does not verify; pkcs1v15 is deterministic and PSS is not.
func TestPSSAndPKCS1v15(t *testing.T) {
	k := testKey(t, mustSpec(RSA2048, Params{}))
	msg := []byte("m")
	pss1, _ := k.Sign(msg, SignOptions{})
	pss2, _ := k.Sign(msg, SignOptions{Algorithm: PSS})
	v1, _ := k.Sign(msg, SignOptions{Algorithm: PKCS1v15})
	v2, _ := k.Sign(msg, SignOptions{Algorithm: PKCS1v15})
	if bytes.Equal(pss1, pss2) {
		t.Error("two PSS signatures are equal: no salt")
	}
	if !bytes.Equal(v1, v2) {
		t.Error("two PKCS #1 v1.5 signatures differ")
	}
	if ok, _ := k.Verify(msg, pss1, SignOptions{Algorithm: PKCS1v15}); ok {
		t.Error("a PSS signature verified as PKCS #1 v1.5")
	}
	if ok, _ := k.Verify(msg, v1, SignOptions{}); ok {
		t.Error("a PKCS #1 v1.5 signature verified as PSS")
	}
	// Signed with a hash-sized salt, verified with auto (which detects
	// it) and with hash, not with another fixed length.
	sig, _ := k.Sign(msg, SignOptions{SaltLength: SaltHash})
	for sl, want := range map[SaltLength]bool{SaltAuto: true, SaltHash: true, "32": true, "20": false} {
		if ok, err := k.Verify(msg, sig, SignOptions{SaltLength: sl}); ok != want || err != nil {
			t.Errorf("Verify(salt hash signature, salt_length %q) = %v, %v; want %v", sl, ok, err, want)
		}
	}
	// none signs the input without a DigestInfo, as Vault's
	// PKCS1v15_NoOID: it verifies as a raw PKCS #1 v1.5 signature only.
	in := digest(SHA2_256, msg)
	none, err := k.Sign(in, SignOptions{Algorithm: PKCS1v15, Hash: HashNone, Prehashed: true})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(none, v1) {
		t.Error("a none signature equals a sha2-256 one")
	}
	pub := offlinePublic(t, k)
	if !offlineVerify(t, pub, in, none, SignOptions{Algorithm: PKCS1v15, Hash: HashNone, Prehashed: true}) {
		t.Error("the none signature does not verify as raw PKCS #1 v1.5")
	}
	if offlineVerify(t, pub, in, none, SignOptions{Algorithm: PKCS1v15, Prehashed: true}) {
		t.Error("the none signature verifies with a sha2-256 DigestInfo")
	}
}

// TestEd25519KnownAnswer: RFC 8032's test vectors 1 and 2.
func TestEd25519KnownAnswer(t *testing.T) {
	tests := []struct{ seed, pub, msg, sig string }{
		{"9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
			"d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "",
			"e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"},
		{"4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
			"3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", "72",
			"92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"},
	}
	for _, tt := range tests {
		seed, _ := hex.DecodeString(tt.seed)
		msg, _ := hex.DecodeString(tt.msg)
		material, err := x509.MarshalPKCS8PrivateKey(ed25519.NewKeyFromSeed(seed))
		if err != nil {
			t.Fatal(err)
		}
		k, err := Load(mustSpec(Ed25519, Params{}), material)
		if err != nil {
			t.Fatal(err)
		}
		sig, err := k.Sign(msg, SignOptions{})
		if err != nil || hex.EncodeToString(sig) != tt.sig {
			t.Errorf("Sign(%q) = %x, %v; want %s", tt.msg, sig, err, tt.sig)
		}
		if got := offlinePublic(t, k).(ed25519.PublicKey); hex.EncodeToString(got) != tt.pub {
			t.Errorf("public key %x, want %s", got, tt.pub)
		}
	}
}

// TestMLDSAPure: an ML-DSA signature is of the parameter set's size and
// is over the message itself with an empty context: it does not verify
// under a context, nor as a signature of the message's digest.
func TestMLDSAPure(t *testing.T) {
	for _, p := range parameterSets {
		k := testKey(t, mustSpec(MLDSA, Params{ParameterSet: p}))
		sig, err := k.Sign([]byte("m"), SignOptions{})
		if err != nil || len(sig) != p.params().SignatureSize() {
			t.Fatalf("%s: %d bytes, %v; want %d", p, len(sig), err, p.params().SignatureSize())
		}
		pub := offlinePublic(t, k)
		if offlineVerify(t, pub, digest(SHA2_256, []byte("m")), sig, SignOptions{}) {
			t.Errorf("%s: the signature verifies over the message's digest", p)
		}
		if mldsa.Verify(pub.(*mldsa.PublicKey), []byte("m"), sig, &mldsa.Options{Context: "ctx"}) == nil {
			t.Errorf("%s: the signature verifies under a context", p)
		}
		if ok, err := k.Verify([]byte("m"), sig, SignOptions{}); !ok || err != nil {
			t.Errorf("%s: Verify = %v, %v", p, ok, err)
		}
	}
}
