package hmackey

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"testing"
)

// TestKeySum checks Sum against crypto/hmac for parts of every size a
// pooled state meets, in an order that makes states keep, grow and drop
// their input buffers.
func TestKeySum(t *testing.T) {
	key := [32]byte{1, 2, 3}
	m := New(key)
	tests := []struct {
		name  string
		dst   []byte
		parts [][]byte
	}{
		{"none", nil, nil},
		{"empty part", nil, [][]byte{{}}},
		{"one", nil, [][]byte{[]byte("hash")}},
		{"two", []byte("prefix"), [][]byte{[]byte("prev"), []byte("body")}},
		{"past the kept input", nil, [][]byte{bytes.Repeat([]byte{'a'}, MaxInput), []byte("b")}},
		{"after a large one", []byte("x"), [][]byte{[]byte("small")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := hmac.New(sha256.New, key[:])
			for _, p := range tt.parts {
				h.Write(p)
			}
			want := h.Sum(bytes.Clone(tt.dst))
			for i := range 3 { // pooled states are reused
				if got := m.Sum(bytes.Clone(tt.dst), tt.parts...); !bytes.Equal(got, want) {
					t.Fatalf("Sum %d = %x, want %x", i, got, want)
				}
			}
		})
	}
}
