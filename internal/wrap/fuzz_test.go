package wrap

import (
	"encoding/base64"
	"testing"
)

func FuzzParsePublicKey(f *testing.F) {
	x, _ := Generate(X25519)
	w, _ := Generate(XWing)
	f.Add(x.Public().String())
	f.Add(w.Public().String())
	f.Add("-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VuAyEAQBEJJBvAgLruMbDBfwyKbZewvVPlp/iXhszZ/jiIZU8=\n-----END PUBLIC KEY-----\n")
	f.Add("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n")
	f.Add(base64.StdEncoding.EncodeToString(make([]byte, 1216)))
	f.Add("")
	f.Fuzz(func(t *testing.T, text string) {
		k, err := ParsePublicKey(text)
		if err != nil {
			return
		}
		again, err := ParsePublicKey(k.String())
		if err != nil || again.Scheme() != k.Scheme() || again.String() != k.String() {
			t.Fatalf("ParsePublicKey(String()) = %v, %v; want the same key", again, err)
		}
		if _, _, err := k.Wrap(make([]byte, 32), []byte("info")); err != nil {
			t.Fatalf("Wrap with a parsed key = %v", err)
		}
	})
}
