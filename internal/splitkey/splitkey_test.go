package splitkey

import (
	"bytes"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"testing"
)

// TestShareAndDataKey checks both derivations against crypto/hmac and
// crypto/hkdf, as the package comment writes them.
func TestShareAndDataKey(t *testing.T) {
	secret := bytes.Repeat([]byte{0x5a}, Size)
	ringKey := bytes.Repeat([]byte{0xa5}, Size)
	s, err := New(secret)
	if err != nil {
		t.Fatal(err)
	}
	for _, hash := range [][]byte{{}, {1}, bytes.Repeat([]byte{7}, 65), bytes.Repeat([]byte{8}, 5000)} {
		m := hmac.New(sha256.New, secret)
		m.Write([]byte("ringkms split share v1"))
		m.Write([]byte{0})
		m.Write(hash)
		want := m.Sum(nil)
		got := s.Share(hash)
		if !bytes.Equal(got[:], want) {
			t.Fatalf("Share(%d bytes) = %x, want %x", len(hash), got, want)
		}
		dk, err := DataKey(ringKey, got[:])
		if err != nil {
			t.Fatal(err)
		}
		wantDK, _ := hkdf.Key(sha256.New, ringKey, want, "ringkms split data key v1", 32)
		if !bytes.Equal(dk, wantDK) {
			t.Fatalf("DataKey = %x, want %x", dk, wantDK)
		}
	}
}

// TestSharesDiffer: another hash, another secret, another ring key each
// give another share or data key; neither input alone is the data key.
func TestSharesDiffer(t *testing.T) {
	s1, _ := New(bytes.Repeat([]byte{1}, Size))
	s2, _ := New(bytes.Repeat([]byte{2}, Size))
	h1, h2 := bytes.Repeat([]byte{1}, 65), bytes.Repeat([]byte{2}, 65)
	a, b, c := s1.Share(h1), s1.Share(h2), s2.Share(h1)
	if a == b || a == c {
		t.Fatal("two hashes or two secrets gave one share")
	}
	k1, k2 := bytes.Repeat([]byte{3}, Size), bytes.Repeat([]byte{4}, Size)
	d1, _ := DataKey(k1, a[:])
	d2, _ := DataKey(k2, a[:])
	d3, _ := DataKey(k1, b[:])
	if bytes.Equal(d1, d2) || bytes.Equal(d1, d3) || bytes.Equal(d1, k1) || bytes.Equal(d1, a[:]) {
		t.Fatal("the data key does not depend on both its inputs")
	}
}

func TestSizes(t *testing.T) {
	if _, err := New(make([]byte, 31)); err != ErrSize {
		t.Errorf("New(31 bytes) = %v, want ErrSize", err)
	}
	for _, c := range []struct{ key, share int }{{31, 32}, {32, 33}, {0, 32}, {32, 0}} {
		if _, err := DataKey(make([]byte, c.key), make([]byte, c.share)); err != ErrSize {
			t.Errorf("DataKey(%d, %d bytes) = %v, want ErrSize", c.key, c.share, err)
		}
	}
}

func BenchmarkShare(b *testing.B) {
	s, _ := New(make([]byte, Size))
	hash := make([]byte, 65)
	b.ReportAllocs()
	for b.Loop() {
		s.Share(hash)
	}
}
