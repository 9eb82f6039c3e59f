package wrap

import (
	"bytes"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"strings"
	"testing"
)

func pemOf(t *testing.T, pub any) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

func TestGeneratedRoundTrip(t *testing.T) {
	for _, s := range []Scheme{XWing, X25519} {
		t.Run(string(s), func(t *testing.T) {
			k, err := Generate(s)
			if err != nil {
				t.Fatal(err)
			}
			pub, err := ParsePublicKey(k.Public().String())
			if err != nil {
				t.Fatalf("ParsePublicKey(String()) = %v", err)
			}
			if pub.Scheme() != s {
				t.Fatalf("Scheme() = %s, want %s", pub.Scheme(), s)
			}
			pt := bytes.Repeat([]byte{7}, 32)
			ct, enc, err := pub.Wrap(pt, []byte("info"))
			if err != nil {
				t.Fatal(err)
			}
			k2, err := ParsePrivateKey(s, k.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			got, err := k2.Unwrap(ct, enc, []byte("info"))
			if err != nil || !bytes.Equal(got, pt) {
				t.Fatalf("Unwrap = %x, %v; want %x", got, err, pt)
			}
			if _, err := k2.Unwrap(ct, enc, []byte("other")); err == nil {
				t.Error("Unwrap with another info succeeded")
			}
		})
	}
}

func TestParsePublicKey(t *testing.T) {
	x, _ := ecdh.X25519().GenerateKey(rand.Reader)
	r2048, _ := rsa.GenerateKey(rand.Reader, 2048)
	r1024, _ := rsa.GenerateKey(rand.Reader, 1024)
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tests := []struct {
		name   string
		text   string
		scheme Scheme
		err    string
	}{
		{"x25519 raw", base64.StdEncoding.EncodeToString(x.PublicKey().Bytes()), X25519, ""},
		{"x25519 pem", pemOf(t, x.PublicKey()), X25519, ""},
		{"rsa 2048", pemOf(t, &r2048.PublicKey), RSAOAEP, ""},
		{"rsa 1024", pemOf(t, &r1024.PublicKey), "", "1024 bits"},
		{"ecdsa", pemOf(t, &ec.PublicKey), "", "not supported"},
		{"garbage", "not a key!", "", "neither PEM"},
		{"short", base64.StdEncoding.EncodeToString(make([]byte, 31)), "", "31 bytes"},
		{"bad pem", "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n", "", "SubjectPublicKeyInfo"},
		{"private pem", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", "", "PRIVATE KEY"},
		{"empty", "", "", "0 bytes"},
		{"x-wing low-order point", base64.StdEncoding.EncodeToString(make([]byte, 1216)), "", "not a usable"},
		{"x25519 low-order point", base64.StdEncoding.EncodeToString(make([]byte, 32)), "", "not a usable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := ParsePublicKey(tt.text)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("ParsePublicKey = %v, want error containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParsePublicKey = %v", err)
			}
			if k.Scheme() != tt.scheme {
				t.Fatalf("Scheme() = %s, want %s", k.Scheme(), tt.scheme)
			}
		})
	}
}

func TestRSAWrapOpensWithStdlib(t *testing.T) {
	priv, _ := rsa.GenerateKey(rand.Reader, 2048)
	pub, err := ParsePublicKey(pemOf(t, &priv.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	pt := []byte("0123456789abcdef0123456789abcdef")
	ct, enc, err := pub.Wrap(pt, []byte("label"))
	if err != nil || enc != nil {
		t.Fatalf("Wrap = %v, enc %x", err, enc)
	}
	got, err := rsa.DecryptOAEP(sha256.New(), nil, priv, ct, []byte("label"))
	if err != nil || !bytes.Equal(got, pt) {
		t.Fatalf("DecryptOAEP = %x, %v", got, err)
	}
	if !strings.HasPrefix(pub.String(), "-----BEGIN PUBLIC KEY-----") {
		t.Errorf("String() = %q, want PEM", pub.String())
	}
}

func TestParseScheme(t *testing.T) {
	for in, want := range map[string]Scheme{"": XWing, "xwing": XWing, "hpke-xwing": XWing, "X25519": X25519, "hpke-x25519": X25519} {
		if got, err := ParseScheme(in); err != nil || got != want {
			t.Errorf("ParseScheme(%q) = %s, %v; want %s", in, got, err, want)
		}
	}
	if _, err := ParseScheme("rsa"); err == nil {
		t.Error("ParseScheme(rsa) succeeded")
	}
}
