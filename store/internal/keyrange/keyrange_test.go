package keyrange

import (
	"bytes"
	"testing"
)

func TestPrefixEnd(t *testing.T) {
	tests := []struct {
		prefix, want []byte
	}{
		{nil, nil},
		{[]byte{0xFF}, nil},
		{[]byte{0xFF, 0xFF}, nil},
		{[]byte("a"), []byte("b")},
		{[]byte("b/"), []byte("b0")},
		{[]byte{'a', 0xFF}, []byte("b")},
		{[]byte{'a', 0xFE, 0xFF, 0xFF}, []byte{'a', 0xFF}},
		{[]byte{0x00}, []byte{0x01}},
	}
	for _, tc := range tests {
		in := bytes.Clone(tc.prefix)
		got := PrefixEnd(in)
		if !bytes.Equal(got, tc.want) || (tc.want == nil) != (got == nil) {
			t.Errorf("PrefixEnd(%q) = %q, want %q", tc.prefix, got, tc.want)
		}
		if !bytes.Equal(in, tc.prefix) {
			t.Errorf("PrefixEnd(%q) modified its argument to %q", tc.prefix, in)
		}
	}
}
