package keytype

import (
	"errors"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, ty := range types {
		got, err := Parse(string(ty))
		if err != nil || got != ty {
			t.Errorf("Parse(%q) = %q, %v; want %q", ty, got, err, ty)
		}
	}
	if got, err := Parse(""); err != nil || got != AES256GCM96 {
		t.Errorf(`Parse("") = %q, %v; want %q`, got, err, AES256GCM96)
	}
	for _, bad := range []string{"aes128-gcm96", "AES256-GCM96", "rsa", "ecdsa-p521", "xchacha20-poly1305", " ed25519"} {
		_, err := Parse(bad)
		wantErr(t, "Parse("+bad+")", err, ErrParameter)
		if err != nil && !strings.Contains(err.Error(), "aes256-gcm96, chacha20-poly1305, hmac, ed25519, ecdsa-p256, ecdsa-p384, rsa-2048, rsa-3072, rsa-4096, ml-dsa") {
			t.Errorf("Parse(%q) error %q does not list the key types", bad, err)
		}
	}
	_, err := Parse(strings.Repeat("x", 10000))
	if err == nil || len(err.Error()) > 300 {
		t.Errorf("Parse(long) error = %v: want a short error", err)
	}
}

func TestCapabilities(t *testing.T) {
	tests := []struct {
		t                                   Type
		encrypts, signs, asymmetric, hmacOn bool
	}{
		{AES256GCM96, true, false, false, false},
		{ChaCha20Poly1305, true, false, false, false},
		{HMAC, false, false, false, true},
		{Ed25519, false, true, true, false},
		{ECDSAP256, false, true, true, false},
		{ECDSAP384, false, true, true, false},
		{RSA2048, false, true, true, false},
		{RSA3072, false, true, true, false},
		{RSA4096, false, true, true, false},
		{MLDSA, false, true, true, false},
	}
	if len(tests) != len(Types()) {
		t.Fatalf("the table has %d types, Types() %d", len(tests), len(Types()))
	}
	for _, tt := range tests {
		if tt.t.Encrypts() != tt.encrypts || tt.t.Signs() != tt.signs || tt.t.Asymmetric() != tt.asymmetric || tt.t.HMACOnly() != tt.hmacOn {
			t.Errorf("%s: Encrypts, Signs, Asymmetric, HMACOnly = %v %v %v %v; want %v %v %v %v", tt.t,
				tt.t.Encrypts(), tt.t.Signs(), tt.t.Asymmetric(), tt.t.HMACOnly(), tt.encrypts, tt.signs, tt.asymmetric, tt.hmacOn)
		}
	}
}

func TestNewSpec(t *testing.T) {
	tests := []struct {
		name string
		t    Type
		p    Params
		want Params // zero with wantErr
		err  bool
	}{
		{"aes", AES256GCM96, Params{}, Params{}, false},
		{"hmac default", HMAC, Params{}, Params{KeySize: 32}, false},
		{"hmac min", HMAC, Params{KeySize: 32}, Params{KeySize: 32}, false},
		{"hmac max", HMAC, Params{KeySize: 512}, Params{KeySize: 512}, false},
		{"hmac too small", HMAC, Params{KeySize: 31}, Params{}, true},
		{"hmac too large", HMAC, Params{KeySize: 513}, Params{}, true},
		{"hmac negative", HMAC, Params{KeySize: -32}, Params{}, true},
		{"hmac parameter_set", HMAC, Params{ParameterSet: MLDSA65}, Params{}, true},
		{"mldsa default", MLDSA, Params{}, Params{ParameterSet: MLDSA65}, false},
		{"mldsa 44", MLDSA, Params{ParameterSet: "44"}, Params{ParameterSet: MLDSA44}, false},
		{"mldsa 87", MLDSA, Params{ParameterSet: "87"}, Params{ParameterSet: MLDSA87}, false},
		{"mldsa 66", MLDSA, Params{ParameterSet: "66"}, Params{}, true},
		{"mldsa full name", MLDSA, Params{ParameterSet: "ML-DSA-65"}, Params{}, true},
		{"mldsa key_size", MLDSA, Params{KeySize: 32}, Params{}, true},
		{"ed25519 key_size", Ed25519, Params{KeySize: 32}, Params{}, true},
		{"aes key_size", AES256GCM96, Params{KeySize: 32}, Params{}, true},
		{"rsa parameter_set", RSA2048, Params{ParameterSet: "65"}, Params{}, true},
		{"unknown type", "aes128-gcm96", Params{}, Params{}, true},
		{"empty type", "", Params{}, Params{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewSpec(tt.t, tt.p)
			if tt.err {
				wantErr(t, "NewSpec", err, ErrParameter)
				if s != (Spec{}) {
					t.Errorf("NewSpec failed and answered %+v", s)
				}
				return
			}
			if err != nil || s.Type() != tt.t || s.Params() != tt.want {
				t.Fatalf("NewSpec(%q, %+v) = %v %+v, %v; want %+v", tt.t, tt.p, s.Type(), s.Params(), err, tt.want)
			}
			// What the caller records gives the same Spec back.
			again, err := NewSpec(s.Type(), s.Params())
			if err != nil || again != s {
				t.Errorf("NewSpec(recorded) = %+v, %v; want %+v", again, err, s)
			}
		})
	}
}

// TestZeroSpec: the zero Spec does nothing.
func TestZeroSpec(t *testing.T) {
	_, err := Generate(Spec{})
	wantErr(t, "Generate(Spec{})", err, ErrParameter)
	_, err = Load(Spec{}, make([]byte, 32))
	wantErr(t, "Load(Spec{})", err, ErrParameter)
}

// TestMessage: an error's message for a caller drops the package's kind.
func TestMessage(t *testing.T) {
	_, err := Parse("aes128-gcm96")
	if got := Message(err); strings.HasPrefix(got, "keytype") || !strings.Contains(got, "aes128-gcm96") {
		t.Errorf("Message(%v) = %q", err, got)
	}
	if got := Message(errors.New("other")); got != "other" {
		t.Errorf("Message(other) = %q", got)
	}
}
