package envelope_test

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"testing"

	"github.com/ringkms/kms/envelope"
	"github.com/ringkms/kms/internal/docblock"
)

// TestFormatExampleEnvelope opens the worked example of docs/FORMAT.md
// section 9.3 by the document's steps, with the standard library alone,
// and checks that the package seals the same inputs to the same bytes:
// document and code cannot drift apart.
func TestFormatExampleEnvelope(t *testing.T) {
	block := docblock.Fenced(t, "docs/FORMAT.md", "json format-example-envelope")
	var ex struct {
		Key, Salt, AssociatedData, Plaintext, EnvKey, AAD, Nonce, Envelope string
	}
	if err := json.Unmarshal([]byte(block), &ex); err != nil {
		t.Fatal(err)
	}
	unhex := func(name, s string) []byte {
		b, err := hex.DecodeString(s)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return b
	}
	key, env := unhex("key", ex.Key), unhex("envelope", ex.Envelope)

	// 9.1: the prelude.
	if string(env[:7]) != "rkmsenv" || env[7] != 1 {
		t.Fatalf("magic and version: %x", env[:8])
	}
	salt := env[8:40]
	if !bytes.Equal(salt, unhex("salt", ex.Salt)) {
		t.Fatalf("salt = %x, want %s", salt, ex.Salt)
	}
	n := int(binary.BigEndian.Uint16(env[40:42]))
	hash := env[42 : 42+n]
	m := int(binary.BigEndian.Uint16(env[42+n : 44+n]))
	header := env[44+n : 44+n+m]
	prelude := env[:44+n+m]
	if len(hash) != 65 || hash[0] != 1 || header[0] != 1 || !bytes.Equal(header[18:83], hash) {
		t.Fatalf("the prelude's hash (%d bytes) and header (%d bytes) are not section 3's and 4's", len(hash), len(header))
	}

	// 9.2: the key, the associated data of the chunks, the chunks.
	envKey, err := hkdf.Key(sha256.New, key, salt, "ringkms/envelope/v1", 32)
	if err != nil || !bytes.Equal(envKey, unhex("envKey", ex.EnvKey)) {
		t.Fatalf("Kenv = %x, %v; want %s", envKey, err, ex.EnvKey)
	}
	h := sha256.New()
	h.Write([]byte("ringkms/envelope/v1/aad"))
	h.Write(binary.BigEndian.AppendUint64(nil, uint64(len(prelude))))
	h.Write(prelude)
	h.Write(binary.BigEndian.AppendUint64(nil, uint64(len(ex.AssociatedData))))
	h.Write([]byte(ex.AssociatedData))
	aad := h.Sum(nil)
	if !bytes.Equal(aad, unhex("aad", ex.AAD)) {
		t.Fatalf("A = %x, want %s", aad, ex.AAD)
	}
	block2, _ := aes.NewCipher(envKey)
	gcm, _ := cipher.NewGCM(block2)
	var plaintext []byte
	chunks := env[len(prelude):]
	for i := uint64(0); len(chunks) > 0; i++ {
		size := min(len(chunks), 65536+16)
		last := size == len(chunks)
		nonce := binary.BigEndian.AppendUint64([]byte{0, 0, 0}, i)
		nonce = append(nonce, 0)
		if last {
			nonce[11] = 1
			if i == 0 && !bytes.Equal(nonce, unhex("nonce", ex.Nonce)) {
				t.Fatalf("nonce = %x, want %s", nonce, ex.Nonce)
			}
		}
		pt, err := gcm.Open(nil, nonce, chunks[:size], aad)
		if err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
		plaintext = append(plaintext, pt...)
		chunks = chunks[size:]
	}
	if string(plaintext) != ex.Plaintext {
		t.Fatalf("plaintext = %q, want %q", plaintext, ex.Plaintext)
	}

	// The package makes the same bytes.
	got, err := envelope.SealWith(bytes.Clone(key), salt, hash, header, []byte(ex.AssociatedData), []byte(ex.Plaintext))
	if err != nil || !bytes.Equal(got, env) {
		t.Fatalf("the package seals the example to\n%x (%v), want\n%x", got, err, env)
	}
}
