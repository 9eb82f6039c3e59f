package keytype

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"testing"

	xhkdf "golang.org/x/crypto/hkdf"
)

// TestHMACKnownAnswer: an hmac key's HMAC is RFC 4231's, test case 6
// (a 131-byte key, within Vault's 32 to 512).
func TestHMACKnownAnswer(t *testing.T) {
	key := bytes.Repeat([]byte{0xaa}, 131)
	data := []byte("Test Using Larger Than Block-Size Key - Hash Key First")
	k, err := Load(mustSpec(HMAC, Params{KeySize: 131}), key)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		hash Hash
		want string
	}{
		{"", "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"},
		{SHA2_256, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"},
		{SHA2_224, "95e9a0db962095adaebe9b2d6f0dbce2d499f112f2d2b7273fa6870e"},
		{SHA2_384, "4ece084485813e9088d2c63a041bc5b44f9ef1012a2b588f3cd11f05033ac4c60c2ef6ab4030fe8296248df163f44952"},
		{SHA2_512, "80b24263c7c1a3ebb71493c1dd7be8b49b46d1f41b4aeec1121b013783f8f3526b56d037e05f2598bd0fd2215d6a1e5295e64f73f63f0aec8b915a985d786598"},
	}
	for _, tt := range tests {
		got, err := k.HMAC(tt.hash, data)
		if err != nil || hex.EncodeToString(got) != tt.want {
			t.Errorf("HMAC(%q) = %x, %v; want %s", tt.hash, got, err, tt.want)
		}
		ok, err := k.VerifyHMAC(tt.hash, data, got)
		if !ok || err != nil {
			t.Errorf("VerifyHMAC(%q, own MAC) = %v, %v", tt.hash, ok, err)
		}
		got[0] ^= 1
		if ok, err := k.VerifyHMAC(tt.hash, data, got); ok || err != nil {
			t.Errorf("VerifyHMAC(%q, altered MAC) = %v, %v; want false, nil", tt.hash, ok, err)
		}
	}
}

// TestHMACEveryHash: every hash but none computes an HMAC of its size,
// the same as crypto/hmac's; none and unknown hashes are ErrParameter.
func TestHMACEveryHash(t *testing.T) {
	k := testKey(t, mustSpec(HMAC, Params{}))
	for _, h := range hashes {
		mac, err := k.HMAC(h, []byte("data"))
		if h == HashNone {
			wantErr(t, "HMAC(none)", err, ErrParameter)
			continue
		}
		ch := cryptoHashes[h]
		m := hmac.New(ch.New, k.material)
		m.Write([]byte("data"))
		if err != nil || !bytes.Equal(mac, m.Sum(nil)) {
			t.Errorf("HMAC(%s) = %x, %v; want %x", h, mac, err, m.Sum(nil))
		}
	}
	_, err := k.HMAC("md5", nil)
	wantErr(t, "HMAC(md5)", err, ErrParameter)
	_, err = k.VerifyHMAC("sha256", nil, nil)
	wantErr(t, "VerifyHMAC(sha256)", err, ErrParameter)
}

// TestHMACDerivedKey: a key of another type HMACs under HKDF-SHA256 of its
// material with HMACKeyInfo (checked with x/crypto's HKDF), and keys
// with different material have different HMAC keys.
func TestHMACDerivedKey(t *testing.T) {
	for _, s := range specs {
		if s.t == HMAC || (s.t.rsa() && s.t != RSA2048) {
			continue
		}
		t.Run(name(s), func(t *testing.T) {
			k := testKey(t, s)
			want := make([]byte, 32)
			if _, err := io.ReadFull(xhkdf.New(sha256.New, k.material, nil, []byte("ringkms held key hmac v1")), want); err != nil {
				t.Fatal(err)
			}
			m := hmac.New(sha256.New, want)
			m.Write([]byte("data"))
			got, err := k.HMAC("", []byte("data"))
			if err != nil || !bytes.Equal(got, m.Sum(nil)) {
				t.Fatalf("HMAC = %x, %v; want %x", got, err, m.Sum(nil))
			}
			if bytes.Equal(k.hmacKey, k.material[:min(32, len(k.material))]) {
				t.Error("the HMAC key is the material itself")
			}
			m2, _ := Generate(s)
			k2, _ := Load(s, m2)
			if bytes.Equal(k2.hmacKey, k.hmacKey) {
				t.Error("two keys have one HMAC key")
			}
		})
	}
}

// TestHMACErrorsCarryNoInput: no error repeats the input.
func TestHMACErrorsCarryNoInput(t *testing.T) {
	k := testKey(t, mustSpec(HMAC, Params{}))
	_, err := k.HMAC("bogus", []byte("secret-input-1234"))
	if err == nil || bytes.Contains([]byte(err.Error()), []byte("secret-input")) {
		t.Errorf("err = %v", err)
	}
	if !errors.Is(err, ErrParameter) {
		t.Errorf("err = %v, want ErrParameter", err)
	}
}
