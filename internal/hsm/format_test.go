package hsm

import (
	"bytes"
	"strings"
	"testing"
)

func TestParseEd25519Point(t *testing.T) {
	key := bytes.Repeat([]byte{0x3c}, 32)
	for _, tc := range []struct {
		name string
		in   []byte
		ok   bool
	}{
		{"DER OCTET STRING", append([]byte{0x04, 0x20}, key...), true},
		{"raw", key, true},
		{"short", key[:31], false},
		{"DER of 31 bytes", append([]byte{0x04, 0x1f}, key[:31]...), false},
		{"DER, long length form", append([]byte{0x04, 0x81, 0x20}, key...), false},
		{"a BIT STRING", append([]byte{0x03, 0x20}, key...), false},
		{"uncompressed EC point", append([]byte{0x04}, bytes.Repeat(key, 2)...), false},
		{"empty", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := parseEd25519Point(tc.in)
			if ok != tc.ok || ok && !bytes.Equal(got, key) {
				t.Fatalf("parseEd25519Point(%x) = %x, %v; want ok %v", tc.in, got, ok, tc.ok)
			}
		})
	}
}

func TestIsEd25519Params(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		want bool
	}{
		{"OID 1.3.101.112", []byte{0x06, 0x03, 0x2b, 0x65, 0x70}, true},
		{"PrintableString", append([]byte{0x13, 0x0c}, "edwards25519"...), true},
		{"Ed448 OID", []byte{0x06, 0x03, 0x2b, 0x65, 0x71}, false},
		{"edwards448", append([]byte{0x13, 0x0a}, "edwards448"...), false},
		{"P-256", []byte{0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07}, false},
		{"empty", nil, false},
	} {
		if got := isEd25519Params(tc.in); got != tc.want {
			t.Errorf("isEd25519Params(%s) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestReasonString(t *testing.T) {
	seen := map[string]Reason{}
	for r := ReasonDevice; r <= ReasonClosed; r++ {
		s := r.String()
		if prev, dup := seen[s]; dup || s == "" || strings.HasPrefix(s, "reason(") {
			t.Errorf("Reason(%d).String() = %q (also Reason(%d)'s)", r, s, prev)
		}
		seen[s] = r
	}
	if s := Reason(200).String(); s != "reason(200)" {
		t.Errorf("Reason(200).String() = %q", s)
	}
}
