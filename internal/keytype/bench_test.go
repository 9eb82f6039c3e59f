package keytype

import "testing"

// benchSpecs are the signing keys the signing benchmarks compare.
var benchSpecs = []struct {
	name string
	spec Spec
}{
	{"ml-dsa-65", mustSpec(MLDSA, Params{ParameterSet: MLDSA65})},
	{"ed25519", mustSpec(Ed25519, Params{})},
	{"ecdsa-p256", mustSpec(ECDSAP256, Params{})},
}

var benchInput = make([]byte, 256)

func BenchmarkSign(b *testing.B) {
	for _, bs := range benchSpecs {
		b.Run(bs.name, func(b *testing.B) {
			k := testKey(b, bs.spec)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := k.Sign(benchInput, SignOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkVerify(b *testing.B) {
	for _, bs := range benchSpecs {
		b.Run(bs.name, func(b *testing.B) {
			k := testKey(b, bs.spec)
			sig, err := k.Sign(benchInput, SignOptions{})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if ok, err := k.Verify(benchInput, sig, SignOptions{}); !ok || err != nil {
					b.Fatal(ok, err)
				}
			}
		})
	}
}

func BenchmarkHMAC(b *testing.B) {
	k := testKey(b, mustSpec(AES256GCM96, Params{}))
	b.SetBytes(int64(len(benchInput)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := k.HMAC(SHA2_256, benchInput); err != nil {
			b.Fatal(err)
		}
	}
}
