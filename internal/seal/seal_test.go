package seal

import (
	"bytes"
	"testing"
)

func TestSealOpen(t *testing.T) {
	s := New(Derive([]byte("0123456789abcdef0123456789abcdef"), "test"))
	pt := []byte("secret material")
	sealed := s.Seal(pt, []byte("record/1"))
	got, err := s.Open(sealed, []byte("record/1"))
	if err != nil || !bytes.Equal(got, pt) {
		t.Fatalf("Open = %q, %v; want %q", got, err, pt)
	}
	if bytes.Contains(sealed, pt) {
		t.Fatal("sealed value contains the plaintext")
	}
	if _, err := s.Open(sealed, []byte("record/2")); err != ErrOpen {
		t.Errorf("Open with other aad = %v, want ErrOpen", err)
	}
	for i := range sealed {
		for bit := 0; bit < 8; bit++ {
			c := bytes.Clone(sealed)
			c[i] ^= 1 << bit
			if _, err := s.Open(c, []byte("record/1")); err == nil {
				t.Fatalf("Open accepted a flip of bit %d of byte %d", bit, i)
			}
		}
	}
	for n := 0; n < len(sealed); n++ {
		if _, err := s.Open(sealed[:n], []byte("record/1")); err == nil {
			t.Fatalf("Open accepted a truncation to %d bytes", n)
		}
	}
	other := New(Derive([]byte("0123456789abcdef0123456789abcdef"), "other"))
	if _, err := other.Open(sealed, []byte("record/1")); err == nil {
		t.Error("Open under another purpose key succeeded")
	}
}

func TestDeriveSeparatesPurposes(t *testing.T) {
	m := []byte("0123456789abcdef0123456789abcdef")
	if Derive(m, "a") == Derive(m, "b") {
		t.Fatal("Derive gave the same key for two purposes")
	}
	if Derive(m, "a") != Derive(m, "a") {
		t.Fatal("Derive is not deterministic")
	}
}
