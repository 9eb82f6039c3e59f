package envelope_test

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"testing"
	"testing/iotest"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/envelope"
)

// The chunk boundaries of docs/FORMAT.md section 9.2, by the document:
// what writers produce, what readers accept, what they refuse.

const (
	chunk   = envelope.ChunkSize
	chunkCT = chunk + 16
)

// boundarySizes are the plaintext sizes on and around chunk boundaries.
var boundarySizes = []int{0, 1, chunk - 1, chunk, chunk + 1, 2 * chunk}

// docCipher is an envelope's AEAD and chunk associated data, derived by
// the document's steps with the standard library alone.
func docCipher(key, prelude, ad []byte) (cipher.AEAD, []byte, error) {
	salt := prelude[8:40]
	kenv, err := hkdf.Key(sha256.New, key, salt, "ringkms/envelope/v1", 32)
	if err != nil {
		return nil, nil, err
	}
	block, err := aes.NewCipher(kenv)
	if err != nil {
		return nil, nil, err
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return nil, nil, err
	}
	h := sha256.New()
	h.Write([]byte("ringkms/envelope/v1/aad"))
	h.Write(binary.BigEndian.AppendUint64(nil, uint64(len(prelude))))
	h.Write(prelude)
	h.Write(binary.BigEndian.AppendUint64(nil, uint64(len(ad))))
	h.Write(ad)
	return gcm, h.Sum(nil), nil
}

func docNonce(i int, last bool) []byte {
	nonce := binary.BigEndian.AppendUint64([]byte{0, 0, 0}, uint64(i))
	if last {
		return append(nonce, 1)
	}
	return append(nonce, 0)
}

// preludeLen is the length of env's prelude (section 9.1).
func preludeLen(env []byte) int {
	n := int(binary.BigEndian.Uint16(env[40:42]))
	m := int(binary.BigEndian.Uint16(env[42+n : 44+n]))
	return 44 + n + m
}

// openAsDocumented opens env as a reader written from section 9.2 alone
// does: a chunk is the last when the input ends within or right after
// it. It returns the plaintext and each chunk's plaintext size.
func openAsDocumented(key, env, ad []byte) ([]byte, []int, error) {
	p := preludeLen(env)
	gcm, aad, err := docCipher(key, env[:p], ad)
	if err != nil {
		return nil, nil, err
	}
	var pt []byte
	var sizes []int
	body := env[p:]
	for i := 0; ; i++ {
		size := min(len(body), chunkCT)
		last := size == len(body)
		if size < 16 {
			return nil, nil, fmt.Errorf("chunk %d: %d bytes, shorter than a tag", i, size)
		}
		out, err := gcm.Open(nil, docNonce(i, last), body[:size], aad)
		if err != nil {
			return nil, nil, fmt.Errorf("chunk %d (last %v): %v", i, last, err)
		}
		pt = append(pt, out...)
		sizes = append(sizes, len(out))
		body = body[size:]
		if last {
			return pt, sizes, nil
		}
	}
}

// sealAsDocumented seals parts as the chunks of an envelope after
// prelude, by the document's steps; the last part gets the last flag
// when final is set.
func sealAsDocumented(t *testing.T, key, prelude, ad []byte, parts [][]byte, final bool) []byte {
	t.Helper()
	gcm, aad, err := docCipher(key, prelude, ad)
	if err != nil {
		t.Fatal(err)
	}
	env := bytes.Clone(prelude)
	for i, part := range parts {
		env = gcm.Seal(env, docNonce(i, final && i == len(parts)-1), part, aad)
	}
	return env
}

// writerForm reports whether chunk sizes are what section 9.2 says a
// writer produces: full chunks, then a last one of 1 to 65536 bytes, or
// a single empty chunk for an empty plaintext.
func writerForm(sizes []int, total int) bool {
	want := max(1, (total+chunk-1)/chunk)
	if len(sizes) != want {
		return false
	}
	for _, s := range sizes[:len(sizes)-1] {
		if s != chunk {
			return false
		}
	}
	last := sizes[len(sizes)-1]
	return last >= 1 && last <= chunk || total == 0 && last == 0
}

// noWriterTo hides a reader's WriteTo, so that io.Copy calls the
// Writer's ReadFrom, as it does for kmsctl's input.
type noWriterTo struct{ io.Reader }

// boundaryRing makes an X25519 ring of ring keys (whose key is the data
// key, as the document's reader here takes it) and returns its name and
// private key.
func boundaryRing(t *testing.T, ctx context.Context, svc *kms.Service) (string, *kms.PrivateKey) {
	t.Helper()
	r, err := svc.CreateKeyRing(ctx, kms.CreateKeyRingInput{Name: "boundaries", KEM: "x25519", DataKeys: kms.DataKeysRing})
	if err != nil {
		t.Fatal(err)
	}
	priv, err := kms.ParsePrivateKey([]byte(r.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	return r.Ring.Name, priv
}

// TestWriterChunkBoundaries: whichever way the plaintext is given (Seal,
// Write at once or in pieces, io.Copy through ReadFrom in any read
// sizes), a plaintext that ends on a chunk boundary ends with a full last
// chunk, never a full chunk and an empty last one: the envelope has the
// chunks section 9.2 says a writer makes, and a reader written from the
// document opens it, as do Open and the Reader.
func TestWriterChunkBoundaries(t *testing.T) {
	ctx, svc := service(t)
	ring, priv := boundaryRing(t, ctx, svc)
	s := envelope.New(svc, priv)
	ad := []byte("boundary")
	in := envelope.SealInput{RingName: ring, AssociatedData: ad}
	write := func(feed func(w *envelope.Writer, pt []byte) error) func(pt []byte) ([]byte, *kms.EncryptResult, error) {
		return func(pt []byte) ([]byte, *kms.EncryptResult, error) {
			var buf bytes.Buffer
			w, err := s.NewWriter(ctx, &buf, in)
			if err != nil {
				return nil, nil, err
			}
			if err := feed(w, pt); err != nil {
				return nil, nil, err
			}
			if err := w.Close(); err != nil {
				return nil, nil, err
			}
			return buf.Bytes(), w.Result(), nil
		}
	}
	copyFrom := func(wrap func(io.Reader) io.Reader) func(pt []byte) ([]byte, *kms.EncryptResult, error) {
		return write(func(w *envelope.Writer, pt []byte) error {
			n, err := io.Copy(w, noWriterTo{wrap(bytes.NewReader(pt))})
			if err == nil && n != int64(len(pt)) {
				err = fmt.Errorf("io.Copy = %d bytes, want %d", n, len(pt))
			}
			return err
		})
	}
	ways := []struct {
		name string
		seal func(pt []byte) ([]byte, *kms.EncryptResult, error)
	}{
		{"Seal", nil}, // below: Seal does not return the encrypt answer
		{"Write", write(func(w *envelope.Writer, pt []byte) error { _, err := w.Write(pt); return err })},
		{"Write in pieces", write(func(w *envelope.Writer, pt []byte) error {
			for rest := pt; len(rest) > 0; {
				k := min(len(rest), 4099)
				if _, err := w.Write(rest[:k]); err != nil {
					return err
				}
				rest = rest[k:]
			}
			return nil
		})},
		{"Write then io.Copy", write(func(w *envelope.Writer, pt []byte) error {
			k := min(len(pt), chunk)
			if _, err := w.Write(pt[:k]); err != nil {
				return err
			}
			_, err := io.Copy(w, noWriterTo{bytes.NewReader(pt[k:])})
			return err
		})},
		{"io.Copy", copyFrom(func(r io.Reader) io.Reader { return r })},
		{"io.Copy, data with EOF", copyFrom(iotest.DataErrReader)},
		{"io.Copy, half reads", copyFrom(iotest.HalfReader)},
		{"io.Copy, one byte reads", copyFrom(iotest.OneByteReader)},
	}
	for _, way := range ways {
		t.Run(way.name, func(t *testing.T) {
			for _, size := range boundarySizes {
				pt := randomBytes(size)
				var env []byte
				var key []byte
				if way.seal == nil {
					// Seal keeps the encrypt answer to itself: the key
					// comes back through decrypt.
					var err error
					if env, err = s.Seal(ctx, in, pt); err != nil {
						t.Fatal(err)
					}
					info, _ := envelope.ReadInfo(bytes.NewReader(env))
					res, err := svc.Decrypt(ctx, kms.DecryptInput{Hash: info.Hash, Header: info.Header})
					if err != nil {
						t.Fatal(err)
					}
					if key, err = priv.Unwrap(res.RingID, res.Key); err != nil {
						t.Fatal(err)
					}
				} else {
					var res *kms.EncryptResult
					var err error
					if env, res, err = way.seal(pt); err != nil {
						t.Fatalf("%d bytes: %v", size, err)
					}
					if key, err = priv.Unwrap(res.RingID, res.Key); err != nil {
						t.Fatal(err)
					}
				}
				chunks := max(1, (size+chunk-1)/chunk)
				if got, want := len(env)-preludeLen(env), size+16*chunks; got != want {
					t.Errorf("%d bytes: the chunks are %d bytes, want %d (%d chunks)", size, got, want, chunks)
				}
				got, sizes, err := openAsDocumented(key, env, ad)
				if err != nil || !bytes.Equal(got, pt) {
					t.Fatalf("%d bytes: opened by the document = %d bytes, %v", size, len(got), err)
				}
				if !writerForm(sizes, size) {
					t.Errorf("%d bytes: chunks of %v bytes of plaintext, not what a writer makes", size, sizes)
				}
				if got, err := s.Open(ctx, env, ad); err != nil || !bytes.Equal(got, pt) {
					t.Errorf("%d bytes: Open = %d bytes, %v", size, len(got), err)
				}
				if got := readAll(t, s, ctx, iotest.HalfReader(bytes.NewReader(env)), ad); !bytes.Equal(got, pt) {
					t.Errorf("%d bytes: the Reader read %d bytes, want the plaintext", size, len(got))
				}
			}
		})
	}
}

// docEnvelope is an encrypt call's key and the prelude of an envelope
// made for it by the document's steps, with a fresh salt.
func docEnvelope(t *testing.T, ctx context.Context, svc *kms.Service, priv *kms.PrivateKey, ring string) (key, prelude []byte) {
	t.Helper()
	res, err := svc.Encrypt(ctx, kms.EncryptInput{RingName: ring})
	if err != nil {
		t.Fatal(err)
	}
	if key, err = priv.Unwrap(res.RingID, res.Key); err != nil {
		t.Fatal(err)
	}
	hash, _ := base64.RawURLEncoding.DecodeString(res.Hash)
	header, _ := base64.RawURLEncoding.DecodeString(res.Header)
	prelude = append([]byte("rkmsenv\x01"), make([]byte, 32)...)
	rand.Read(prelude[8:])
	prelude = binary.BigEndian.AppendUint16(prelude, uint16(len(hash)))
	prelude = append(prelude, hash...)
	prelude = binary.BigEndian.AppendUint16(prelude, uint16(len(header)))
	return key, append(prelude, header...)
}

// split cuts pt into full chunks and the rest (none when empty).
func split(pt []byte) [][]byte {
	var parts [][]byte
	for len(pt) > 0 {
		k := min(len(pt), chunk)
		parts = append(parts, pt[:k])
		pt = pt[k:]
	}
	return parts
}

// TestReaderChunkBoundaries: what section 9.2 says a reader accepts and
// refuses at chunk boundaries. Envelopes in the writer's form open; so
// do envelopes that end with a full chunk and then an empty last one,
// which earlier Writers made when io.Copy fed them an input that ended
// on a boundary (kmsctl encrypt of such a file), so that files users
// have keep opening; and an envelope cut after a full chunk that is not
// the last, with or without such an empty chunk to follow, is refused
// by Open, by the Reader (which never reaches io.EOF) and by a reader
// written from the document.
func TestReaderChunkBoundaries(t *testing.T) {
	ctx, svc := service(t)
	ring, priv := boundaryRing(t, ctx, svc)
	s := envelope.New(svc, priv)
	ad := []byte("boundary")
	type variant struct {
		name  string
		parts [][]byte
		final bool // the last part has the last flag
	}
	for _, size := range boundarySizes {
		pt := randomBytes(size)
		parts := split(pt)
		variants := []variant{{"writer's form", parts, true}}
		if size == 0 {
			variants[0].parts = [][]byte{nil}
		}
		if size > 0 && size%chunk == 0 {
			variants = append(variants,
				variant{"full chunks and an empty last chunk", append(parts, nil), true},
				variant{"cut before the empty last chunk", parts, false})
		}
		if len(parts) > 1 {
			variants = append(variants, variant{"cut after a full chunk", parts[:len(parts)-1], false})
		}
		for _, v := range variants {
			name := fmt.Sprintf("%d bytes, %s", size, v.name)
			key, prelude := docEnvelope(t, ctx, svc, priv, ring)
			env := sealAsDocumented(t, key, prelude, ad, v.parts, v.final)
			want := bytes.Join(v.parts, nil)
			got, _, docErr := openAsDocumented(key, env, ad)
			opened, openErr := s.Open(ctx, env, ad)
			var readErr error
			var read []byte
			r, err := s.NewReader(ctx, iotest.OneByteReader(bytes.NewReader(env)), ad)
			if err != nil {
				t.Fatalf("%s: NewReader = %v", name, err)
			}
			read, readErr = io.ReadAll(r)
			if v.final {
				if docErr != nil || !bytes.Equal(got, want) {
					t.Errorf("%s: opened by the document = %d bytes, %v; want the plaintext", name, len(got), docErr)
				}
				if openErr != nil || !bytes.Equal(opened, want) {
					t.Errorf("%s: Open = %d bytes, %v; want the plaintext", name, len(opened), openErr)
				}
				if readErr != nil || !bytes.Equal(read, want) {
					t.Errorf("%s: the Reader read %d bytes, %v; want the plaintext", name, len(read), readErr)
				}
				continue
			}
			if docErr == nil {
				t.Errorf("%s: a reader written from the document opened it", name)
			}
			if !errors.Is(openErr, envelope.ErrFormat) {
				t.Errorf("%s: Open = %d bytes, %v; want ErrFormat", name, len(opened), openErr)
			}
			if !errors.Is(readErr, envelope.ErrFormat) {
				t.Errorf("%s: the Reader read %d bytes and ended with %v, want ErrFormat", name, len(read), readErr)
			}
		}
	}
}
