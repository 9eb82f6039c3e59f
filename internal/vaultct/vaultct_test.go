package vaultct

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"golang.org/x/crypto/chacha20poly1305"
)

func testAEAD(t testing.TB, fill byte) cipher.AEAD {
	t.Helper()
	a, err := NewAEAD(bytes.Repeat([]byte{fill}, KeySize))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestKnownAnswer: a ciphertext made by hand from the key, the nonce and
// AES-256-GCM of the standard library (the layout the package comment
// gives) opens to its plaintext; so the framing is what the comment says,
// not merely what Seal happens to write.
func TestKnownAnswer(t *testing.T) {
	key, _ := hex.DecodeString("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f")
	nonce, _ := hex.DecodeString("0a0b0c0d0e0f101112131415")
	plain := []byte("the quick brown fox")
	block, _ := aes.NewCipher(key)
	gcm, _ := cipher.NewGCM(block)
	blob := gcm.Seal(append([]byte{}, nonce...), nonce, plain, nil)
	text := "vault:v3:" + base64.StdEncoding.EncodeToString(blob)
	if got := Format(3, blob); got != text {
		t.Fatalf("Format(3, blob) = %q, want %q", got, text)
	}
	v, parsed, err := Parse(text)
	if err != nil || v != 3 || !bytes.Equal(parsed, blob) {
		t.Fatalf("Parse(%q) = %d, %x, %v; want 3, %x, nil", text, v, parsed, err, blob)
	}
	a, err := NewAEAD(key)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Open(a, parsed)
	if err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("Open = %q, %v; want %q", got, err, plain)
	}
}

func TestRoundTrip(t *testing.T) {
	a := testAEAD(t, 7)
	for _, plain := range [][]byte{{}, []byte("x"), bytes.Repeat([]byte("abc"), 1000)} {
		blob := Seal(a, plain)
		if len(blob) != NonceSize+len(plain)+TagSize {
			t.Errorf("Seal(%d bytes) has %d bytes, want %d", len(plain), len(blob), NonceSize+len(plain)+TagSize)
		}
		v, parsed, err := Parse(Format(12, blob))
		if err != nil || v != 12 {
			t.Fatalf("Parse(Format(12, ...)) = %d, %v", v, err)
		}
		got, err := Open(a, parsed)
		if err != nil || !bytes.Equal(got, plain) {
			t.Errorf("Open(Seal(%q)) = %q, %v", plain, got, err)
		}
	}
	if bytes.Equal(Seal(a, []byte("same")), Seal(a, []byte("same"))) {
		t.Error("two Seals of one plaintext are equal: the nonce is not random")
	}
}

// TestTamper: every bit flipped, every truncation and another key fail
// to open, with ErrAuthFailed or ErrTooShort.
func TestTamper(t *testing.T) {
	a := testAEAD(t, 1)
	blob := Seal(a, []byte("secret data"))
	for i := range len(blob) * 8 {
		bad := bytes.Clone(blob)
		bad[i/8] ^= 1 << (i % 8)
		if _, err := Open(a, bad); !errors.Is(err, ErrAuthFailed) {
			t.Fatalf("Open with bit %d flipped = %v, want ErrAuthFailed", i, err)
		}
	}
	for n := range len(blob) {
		_, err := Open(a, blob[:n])
		if n < NonceSize+TagSize && !errors.Is(err, ErrTooShort) || n >= NonceSize+TagSize && !errors.Is(err, ErrAuthFailed) {
			t.Fatalf("Open of the first %d bytes = %v", n, err)
		}
	}
	if _, err := Open(testAEAD(t, 2), blob); !errors.Is(err, ErrAuthFailed) {
		t.Errorf("Open under another key = %v, want ErrAuthFailed", err)
	}
}

func TestParseErrors(t *testing.T) {
	good := base64.StdEncoding.EncodeToString(make([]byte, 40))
	for _, c := range []struct {
		name, in string
		want     error
		version  int
	}{
		{"ok", "vault:v1:" + good, nil, 1},
		{"version zero reads as one", "vault:v0:" + good, nil, 1},
		{"large version", "vault:v2147483647:" + good, nil, 2147483647},
		{"empty", "", ErrNoPrefix, 0},
		{"other prefix", "vaulx:v1:" + good, ErrNoPrefix, 0},
		{"upper case", "VAULT:v1:" + good, ErrNoPrefix, 0},
		{"no version separator", "vault:v1" + good, ErrFields, 0},
		{"no fields", "vault:v", ErrFields, 0},
		{"empty version", "vault:v:" + good, ErrVersion, 0},
		{"signed version", "vault:v+1:" + good, ErrVersion, 0},
		{"negative version", "vault:v-1:" + good, ErrVersion, 0},
		{"version too large", "vault:v2147483648:" + good, ErrVersion, 0},
		{"version too long", "vault:v00000000001:" + good, ErrVersion, 0},
		{"bad base64", "vault:v1:***", ErrBase64, 0},
		{"url base64", "vault:v1:" + strings.NewReplacer("+", "-", "/", "_").Replace(base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xfb, 0xff}, 20))), ErrBase64, 0},
		{"unpadded", "vault:v1:" + strings.TrimRight(base64.StdEncoding.EncodeToString(make([]byte, 41)), "="), ErrBase64, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			v, _, err := Parse(c.in)
			if !errors.Is(err, c.want) || err == nil && v != c.version {
				t.Errorf("Parse(%q) = %d, %v; want %d, %v", c.in, v, err, c.version, c.want)
			}
		})
	}
}

func TestNewAEADKeySize(t *testing.T) {
	for _, n := range []int{0, 16, 31, 33, 64} {
		if _, err := NewAEAD(make([]byte, n)); err == nil {
			t.Errorf("NewAEAD(%d bytes) = nil error", n)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add("vault:v1:" + base64.StdEncoding.EncodeToString(make([]byte, 30)))
	f.Add("vault:v0:")
	f.Add("vault:v99999999999:AA==")
	f.Add("vault:v1:***")
	a := testAEAD(f, 9)
	f.Fuzz(func(t *testing.T, s string) {
		v, blob, err := Parse(s)
		if err != nil {
			return
		}
		if v < 1 {
			t.Fatalf("Parse(%q) = version %d", s, v)
		}
		if back, _, err := Parse(Format(v, blob)); err != nil || back != v {
			t.Fatalf("Parse(Format(%d, ...)) = %d, %v", v, back, err)
		}
		Open(a, blob) // must not panic
	})
}

// TestSealAD: associated data is bound (another opens nothing), the
// framing serves ChaCha20-Poly1305 too, and an AEAD with another nonce
// size is refused as a programming error.
func TestSealAD(t *testing.T) {
	key := bytes.Repeat([]byte{3}, KeySize)
	chacha, err := chacha20poly1305.New(key)
	if err != nil {
		t.Fatal(err)
	}
	for name, a := range map[string]cipher.AEAD{"aes-gcm": testAEAD(t, 3), "chacha20-poly1305": chacha} {
		blob := SealAD(a, []byte("plain"), []byte("ad"))
		if len(blob) != NonceSize+5+TagSize {
			t.Errorf("%s: %d bytes", name, len(blob))
		}
		if got, err := OpenAD(a, blob, []byte("ad")); err != nil || string(got) != "plain" {
			t.Errorf("%s: OpenAD = %q, %v", name, got, err)
		}
		for _, ad := range [][]byte{nil, []byte("ae")} {
			if _, err := OpenAD(a, blob, ad); !errors.Is(err, ErrAuthFailed) {
				t.Errorf("%s: OpenAD with associated data %q: err = %v", name, ad, err)
			}
		}
		if _, err := Open(a, blob); !errors.Is(err, ErrAuthFailed) {
			t.Errorf("%s: Open of a blob sealed with associated data: err = %v", name, err)
		}
	}
	x, _ := chacha20poly1305.NewX(key)
	defer func() {
		if recover() == nil {
			t.Error("SealAD with a 24-byte nonce AEAD did not panic")
		}
	}()
	SealAD(x, nil, nil)
}

// TestFormatWith: a text in base64url without padding, as Vault writes a
// JWS signature, reads back only with that encoding.
func TestFormatWith(t *testing.T) {
	blob := []byte{0xfb, 0xff, 0xfe} // "+//+" in standard base64, "-__-" in base64url
	text := FormatWith(base64.RawURLEncoding, 7, blob)
	if text != "vault:v7:-__-" {
		t.Fatalf("FormatWith = %q", text)
	}
	if v, got, err := ParseWith(base64.RawURLEncoding, text); err != nil || v != 7 || !bytes.Equal(got, blob) {
		t.Fatalf("ParseWith = %d, %x, %v", v, got, err)
	}
	if _, _, err := Parse(text); err != ErrBase64 {
		t.Fatalf("Parse of base64url = %v, want ErrBase64", err)
	}
}
