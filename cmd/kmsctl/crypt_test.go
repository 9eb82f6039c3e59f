package main

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/envelope"
)

// TestEncryptOnChunkBoundary: encrypt of a file or standard input whose
// size is on or next to a multiple of 64 KiB writes the chunks that
// docs/FORMAT.md section 9.2 says a writer makes (a full chunk last when
// the input ends on a boundary, never a full chunk and an empty last
// one), and decrypt gives the input back.
func TestEncryptOnChunkBoundary(t *testing.T) {
	s := newServer(t, kms.Options{})
	keyFile := createRing(t, s, "chunks")
	e := s.env.with("KMS_PRIVATE_KEY_FILE", keyFile)
	dir := t.TempDir()
	for _, size := range []int{0, 1, envelope.ChunkSize - 1, envelope.ChunkSize, envelope.ChunkSize + 1, 2 * envelope.ChunkSize} {
		plain := make([]byte, size)
		rand.Read(plain)
		in := writeFile(t, dir, "plain", plain)
		sealed := filepath.Join(dir, "plain.rkms")
		kmsctl(t, e, "", "encrypt", "-ring", "chunks", "-in", in, "-out", sealed).want(t, 0, "encrypt a file")
		fromFile, _ := os.ReadFile(sealed)
		fromStdin := []byte(kmsctl(t, e, string(plain), "encrypt", "-ring", "chunks").want(t, 0, "encrypt standard input").stdout)
		for what, env := range map[string][]byte{"file": fromFile, "standard input": fromStdin} {
			info, err := envelope.ReadInfo(bytes.NewReader(env))
			if err != nil {
				t.Fatalf("%d bytes from %s: %v", size, what, err)
			}
			hash, _ := base64.RawURLEncoding.DecodeString(info.Hash)
			header, _ := base64.RawURLEncoding.DecodeString(info.Header)
			chunks := max(1, (size+envelope.ChunkSize-1)/envelope.ChunkSize)
			if got, want := len(env)-(44+len(hash)+len(header)), size+16*chunks; got != want {
				t.Errorf("%d bytes from %s: the chunks are %d bytes, want %d (%d chunks)", size, what, got, want, chunks)
			}
			out := kmsctl(t, e, string(env), "decrypt").want(t, 0, "decrypt")
			if out.stdout != string(plain) {
				t.Errorf("%d bytes from %s: decrypt gave %d bytes", size, what, len(out.stdout))
			}
		}
	}
}
