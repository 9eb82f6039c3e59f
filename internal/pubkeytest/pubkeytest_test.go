package pubkeytest

import (
	"testing"

	"github.com/ringkms/kms/internal/keytype"
)

// TestParseVerify: the public key of a key of each asymmetric type, as
// internal/keytype writes it for the service, parses back, refuses
// another type's name, and verifies what the key signs with the
// service's default options, and not another message's signature.
func TestParseVerify(t *testing.T) {
	for _, tc := range []struct {
		typ       keytype.Type
		paramSet  keytype.ParameterSet
		wrongType string
	}{
		{keytype.Ed25519, "", "ml-dsa"},
		{keytype.ECDSAP256, "", "ecdsa-p384"},
		{keytype.ECDSAP384, "", "ecdsa-p256"},
		{keytype.RSA2048, "", "rsa-4096"},
		{keytype.MLDSA, keytype.MLDSA44, "ed25519"},
		{keytype.MLDSA, keytype.MLDSA87, "ml-dsa"}, // read as 65, the default
	} {
		spec, err := keytype.NewSpec(tc.typ, keytype.Params{ParameterSet: tc.paramSet})
		if err != nil {
			t.Fatal(err)
		}
		material, err := keytype.Generate(spec)
		if err != nil {
			t.Fatal(err)
		}
		key, err := keytype.Load(spec, material)
		if err != nil {
			t.Fatal(err)
		}
		text, err := key.PublicKey()
		if err != nil {
			t.Fatal(err)
		}
		msg := []byte("message")
		sig, err := key.Sign(msg, keytype.SignOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pub, err := Parse(string(tc.typ), string(tc.paramSet), text.Key)
		if err != nil {
			t.Fatalf("%s %s: Parse = %v", tc.typ, tc.paramSet, err)
		}
		if !Verify(pub, msg, sig) || Verify(pub, []byte("other"), sig) {
			t.Errorf("%s %s: Verify does not tell its signature from another message's", tc.typ, tc.paramSet)
		}
		if _, err := Parse(tc.wrongType, "", text.Key); err == nil {
			t.Errorf("%s %s: Parse as %s succeeded", tc.typ, tc.paramSet, tc.wrongType)
		}
	}
}
