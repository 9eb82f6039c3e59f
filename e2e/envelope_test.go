package e2e

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"io"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/envelope"
)

// TestEnvelopeOverHTTP: envelopes seal and open through the real kmsd
// with the HTTP client, for every wrapping scheme; what the in-process
// Service seals the client opens, as one format; and kmsd refuses to
// open one whose header was altered.
func TestEnvelopeOverHTTP(t *testing.T) {
	_, _, _, root := serve(t)

	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	der, _ := x509.MarshalPKCS8PrivateKey(rsaKey)
	for _, c := range []struct {
		name string
		in   kms.CreateKeyRingInput
		priv []byte
	}{
		{"hpke-xwing", kms.CreateKeyRingInput{Name: "env-xwing"}, nil},
		{"hpke-x25519", kms.CreateKeyRingInput{Name: "env-x25519", KEM: "x25519"}, nil},
		{"rsa-oaep-sha256", kms.CreateKeyRingInput{Name: "env-rsa", PublicKey: string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}))},
			pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})},
	} {
		t.Run(c.name, func(t *testing.T) {
			ring := must[*kms.CreateKeyRingResult](t, "CreateKeyRing")(root.CreateKeyRing(bg, c.in))
			if c.priv == nil {
				c.priv = []byte(ring.PrivateKey)
			}
			if got := ring.Key.KeyData.Encrypted.Key.Encoding; got != c.name {
				t.Fatalf("ring's scheme = %s, want %s", got, c.name)
			}
			priv, err := kms.ParsePrivateKey(c.priv)
			if err != nil {
				t.Fatal(err)
			}
			s := envelope.New(root, priv)
			pt := make([]byte, 2*envelope.ChunkSize+333)
			rand.Read(pt)
			ad := []byte(c.name)
			sealed, err := s.Seal(bg, envelope.SealInput{RingName: c.in.Name, AssociatedData: ad,
				Asset: &kms.AssetInput{Data: map[string]any{"scheme": c.name}}}, pt)
			if err != nil {
				t.Fatalf("Seal = %v", err)
			}
			got, err := s.Open(bg, sealed, ad)
			if err != nil || !bytes.Equal(got, pt) {
				t.Fatalf("Open = %d bytes, %v", len(got), err)
			}
			r, err := s.NewReader(bg, bytes.NewReader(sealed), ad)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if _, err := io.Copy(&out, r); err != nil || !bytes.Equal(out.Bytes(), pt) {
				t.Fatalf("Reader = %d bytes, %v", out.Len(), err)
			}
			if res := r.Result(); !res.Asset.Valid || res.RingName != c.in.Name {
				t.Fatalf("Reader.Result() = %+v", res)
			}

			// The header's MAC byte changed: kmsd refuses, the envelope
			// does not open.
			info, err := envelope.ReadInfo(bytes.NewReader(sealed))
			if err != nil {
				t.Fatal(err)
			}
			bad := bytes.Clone(sealed)
			hdrEnd := 8 + 32 + 2 + 65 + 2 + base64.RawURLEncoding.DecodedLen(len(info.Header))
			bad[hdrEnd-1] ^= 1
			_, err = s.Open(bg, bad, ad)
			if kms.ErrorKind(err) != kms.KindUnprocessable || errors.Is(err, envelope.ErrFormat) {
				t.Fatalf("Open(header altered) = %v, want the service's unprocessable", err)
			}
		})
	}
}
