package envelope_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"testing"
	"testing/iotest"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/envelope"
	"github.com/ringkms/kms/store/badgerstore"
)

// service is an in-process Service on an in-memory store, and a context
// that acts as the embedding application.
func service(tb testing.TB) (context.Context, *kms.Service) {
	tb.Helper()
	st, err := badgerstore.OpenInMemory()
	if err != nil {
		tb.Fatal(err)
	}
	svc, err := kms.New(st, kms.Options{MasterKey: kms.GenerateMasterKey(), MinDestroyDelay: -1})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { svc.Close(); st.Close() })
	p, err := svc.Application(context.Background(), "envelope-test")
	if err != nil {
		tb.Fatal(err)
	}
	return kms.WithPrincipal(context.Background(), p), svc
}

// scheme is a ring of one wrapping scheme and its private key.
type scheme struct {
	name, ring string
	priv       *kms.PrivateKey
}

// schemes makes a ring of ring keys of every wrapping scheme (named so),
// and rings with split data keys (last: the default, and by name).
func schemes(tb testing.TB, ctx context.Context, svc *kms.Service) []scheme {
	tb.Helper()
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		tb.Fatal(err)
	}
	pub, _ := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	der, _ := x509.MarshalPKCS8PrivateKey(rsaKey)
	var out []scheme
	for _, c := range []struct {
		name string
		in   kms.CreateKeyRingInput
		priv []byte
	}{
		{"hpke-xwing", kms.CreateKeyRingInput{Name: "xwing", DataKeys: kms.DataKeysRing}, nil},
		{"hpke-x25519", kms.CreateKeyRingInput{Name: "x25519", KEM: "x25519", DataKeys: kms.DataKeysRing}, nil},
		{"rsa-oaep-sha256", kms.CreateKeyRingInput{Name: "rsa", DataKeys: kms.DataKeysRing, PublicKey: string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}))},
			pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})},
		{"split hpke-xwing", kms.CreateKeyRingInput{Name: "split-xwing"}, nil},
		{"split rsa-oaep-sha256", kms.CreateKeyRingInput{Name: "split-rsa", DataKeys: kms.DataKeysSplit,
			PublicKey: string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}))}, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})},
	} {
		r, err := svc.CreateKeyRing(ctx, c.in)
		if err != nil {
			tb.Fatal(err)
		}
		if c.priv == nil {
			c.priv = []byte(r.PrivateKey)
		}
		pk, err := kms.ParsePrivateKey(c.priv)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, scheme{c.name, c.in.Name, pk})
	}
	return out
}

var sizes = []int{0, 1, 100, envelope.ChunkSize - 1, envelope.ChunkSize, envelope.ChunkSize + 1, 3*envelope.ChunkSize + 17}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// TestRoundTrip: every scheme and size, through Seal and Open, through
// the Writer and the Reader, and across the two.
func TestRoundTrip(t *testing.T) {
	ctx, svc := service(t)
	ad := []byte("row 42")
	for _, sc := range schemes(t, ctx, svc) {
		s := envelope.New(svc, sc.priv)
		t.Run(sc.name, func(t *testing.T) {
			for _, n := range sizes {
				pt := randomBytes(n)
				sealed, err := s.Seal(ctx, envelope.SealInput{RingName: sc.ring, AssociatedData: ad}, pt)
				if err != nil {
					t.Fatalf("Seal(%d bytes) = %v", n, err)
				}
				if got, err := s.Open(ctx, sealed, ad); err != nil || !bytes.Equal(got, pt) {
					t.Fatalf("Open(Seal(%d bytes)) = %d bytes, %v", n, len(got), err)
				}
				if got := readAll(t, s, ctx, bytes.NewReader(sealed), ad); !bytes.Equal(got, pt) {
					t.Fatalf("NewReader(Seal(%d bytes)) = %d bytes, want the plaintext", n, len(got))
				}

				// Written in odd pieces, then with io.Copy (ReadFrom).
				var buf bytes.Buffer
				w, err := s.NewWriter(ctx, &buf, envelope.SealInput{RingName: sc.ring, AssociatedData: ad})
				if err != nil {
					t.Fatal(err)
				}
				for rest := pt; len(rest) > 0; {
					k := min(len(rest), 1+len(rest)%7919)
					if _, err := w.Write(rest[:k]); err != nil {
						t.Fatal(err)
					}
					rest = rest[k:]
				}
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
				if got, err := s.Open(ctx, buf.Bytes(), ad); err != nil || !bytes.Equal(got, pt) {
					t.Fatalf("Open(Writer(%d bytes)) = %d bytes, %v", n, len(got), err)
				}
				buf.Reset()
				w, err = s.NewWriter(ctx, &buf, envelope.SealInput{RingName: sc.ring, AssociatedData: ad})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := io.Copy(w, iotest.HalfReader(bytes.NewReader(pt))); err != nil {
					t.Fatal(err)
				}
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
				if got := readAll(t, s, ctx, iotest.OneByteReader(bytes.NewReader(buf.Bytes())), ad); !bytes.Equal(got, pt) {
					t.Fatalf("Reader(Writer(%d bytes)) = %d bytes, want the plaintext", n, len(got))
				}
			}
		})
	}
}

// readAll opens src with a Reader, with small reads and then io.Copy.
func readAll(t *testing.T, s *envelope.Sealer, ctx context.Context, src io.Reader, ad []byte) []byte {
	t.Helper()
	r, err := s.NewReader(ctx, src, ad)
	if err != nil {
		t.Fatalf("NewReader = %v", err)
	}
	small := make([]byte, 1000)
	n, err := io.ReadFull(r, small)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		t.Fatalf("Read = %v", err)
	}
	var rest bytes.Buffer
	if _, err := io.Copy(&rest, r); err != nil {
		t.Fatalf("Reader: io.Copy = %v", err)
	}
	return append(small[:n], rest.Bytes()...)
}

// TestTamper: flipping a bit anywhere, dropping, reordering or
// duplicating a chunk, cutting the stream anywhere, appending bytes, or
// other associated data: Open and the Reader fail, and the Reader never
// returns io.EOF.
func TestTamper(t *testing.T) {
	ctx, svc := service(t)
	sc := schemes(t, ctx, svc)[1]
	s := envelope.New(svc, sc.priv)
	ad := []byte("file.txt")
	pt := randomBytes(3*envelope.ChunkSize + 100)
	sealed, err := s.Seal(ctx, envelope.SealInput{RingName: sc.ring, AssociatedData: ad}, pt)
	if err != nil {
		t.Fatal(err)
	}
	info, err := envelope.ReadInfo(bytes.NewReader(sealed))
	if err != nil {
		t.Fatal(err)
	}
	prelude := len(sealed) - len(pt) - 4*16
	const ct = envelope.ChunkSize + 16
	chunk := func(i int) []byte {
		return sealed[prelude+i*ct : min(len(sealed), prelude+(i+1)*ct)]
	}
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	head := sealed[:prelude]
	if info.Hash == "" || prelude < 8+32+2+65+2 {
		t.Fatalf("ReadInfo = %+v, prelude %d bytes", info, prelude)
	}

	cases := map[string][]byte{
		"last chunk dropped":     cat(head, chunk(0), chunk(1), chunk(2)),
		"middle chunk dropped":   cat(head, chunk(0), chunk(2), chunk(3)),
		"chunks swapped":         cat(head, chunk(1), chunk(0), chunk(2), chunk(3)),
		"chunk duplicated":       cat(head, chunk(0), chunk(0), chunk(1), chunk(2), chunk(3)),
		"byte appended":          cat(sealed, []byte{0}),
		"chunk appended":         cat(sealed, chunk(3)),
		"cut within the last":    sealed[:len(sealed)-1],
		"cut within a chunk":     sealed[:prelude+ct+5],
		"cut after the prelude":  head,
		"cut within the prelude": sealed[:prelude-1],
		"empty":                  nil,
		"not an envelope":        []byte("hello, world, this is not an envelope at all"),
		"last chunk only a tag":  cat(head, chunk(0), chunk(1), chunk(2), chunk(3)[:16]),
		"prelude of another":     nil, // below
		"version 2":              cat(head[:7], []byte{2}, sealed[8:]),
	}
	other, err := s.Seal(ctx, envelope.SealInput{RingName: sc.ring, AssociatedData: ad}, pt)
	if err != nil {
		t.Fatal(err)
	}
	cases["prelude of another"] = cat(other[:prelude], sealed[prelude:])
	// A bit flipped in every byte of the prelude, and in a few of each
	// chunk (first, middle, last).
	for i := range prelude {
		b := bytes.Clone(sealed)
		b[i] ^= 1 << (i % 8)
		cases["prelude byte "+itoa(i)] = b
	}
	for c := range 4 {
		start := prelude + c*ct
		for _, off := range []int{0, len(chunk(c)) / 2, len(chunk(c)) - 1} {
			b := bytes.Clone(sealed)
			b[start+off] ^= 0x80
			cases["chunk "+itoa(c)+" byte "+itoa(off)] = b
		}
	}
	for name, b := range cases {
		if got, err := s.Open(ctx, b, ad); err == nil {
			t.Errorf("%s: Open succeeded with %d bytes", name, len(got))
		}
		r, err := s.NewReader(ctx, bytes.NewReader(b), ad)
		if err != nil {
			continue
		}
		if _, err := io.Copy(io.Discard, r); err == nil {
			t.Errorf("%s: the Reader read to the end", name)
		}
	}
	if _, err := s.Open(ctx, sealed, []byte("file.txx")); !errors.Is(err, envelope.ErrFormat) {
		t.Errorf("Open(other associated data) = %v, want ErrFormat", err)
	}
	if _, err := s.Open(ctx, sealed, nil); !errors.Is(err, envelope.ErrFormat) {
		t.Errorf("Open(no associated data) = %v, want ErrFormat", err)
	}
	if got, err := s.Open(ctx, sealed, ad); err != nil || !bytes.Equal(got, pt) {
		t.Fatalf("Open(the intact envelope) = %v", err)
	}
}

func itoa(i int) string {
	return string(rune('0'+i/1000%10)) + string(rune('0'+i/100%10)) + string(rune('0'+i/10%10)) + string(rune('0'+i%10))
}

// TestServiceRefuses: opening asks the service, so a disabled key, a
// changed Asset or a destroyed key refuses to open.
func TestServiceRefuses(t *testing.T) {
	ctx, svc := service(t)
	sc := schemes(t, ctx, svc)[0]
	s := envelope.New(svc, sc.priv)
	pt := []byte("the quarterly report")

	var buf bytes.Buffer
	w, err := s.NewWriter(ctx, &buf, envelope.SealInput{RingName: sc.ring, Asset: &kms.AssetInput{Data: map[string]any{"file": "q3.pdf"}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(pt); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	res := w.Result()
	if res.Asset == nil || res.Asset.ID == "" {
		t.Fatalf("Writer.Result() = %+v, want the Asset", res)
	}
	withAsset := bytes.Clone(buf.Bytes())
	r, err := s.NewReader(ctx, bytes.NewReader(withAsset), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Result(); !got.Asset.Valid || got.Key.ID != res.Key.ID {
		t.Fatalf("Reader.Result() = %+v", got)
	}

	// The Asset changes: the envelope no longer opens.
	if _, err := svc.Encrypt(ctx, kms.EncryptInput{RingName: sc.ring, Asset: &kms.AssetInput{AssetID: res.Asset.ID, Data: map[string]any{"file": "other.pdf"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Open(ctx, withAsset, nil); kms.ErrorKind(err) != kms.KindUnprocessable {
		t.Errorf("Open after the Asset changed = %v, want unprocessable", err)
	}

	plain, err := s.Seal(ctx, envelope.SealInput{RingName: sc.ring}, pt)
	if err != nil {
		t.Fatal(err)
	}
	ring := kms.RingRef{Name: sc.ring}
	if _, err := svc.SetKeyState(ctx, ring, res.Key.ID, kms.KeyStateInput{State: kms.KeyDisabled, Rotate: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Open(ctx, plain, nil); kms.ErrorKind(err) != kms.KindDisabled {
		t.Errorf("Open with the key disabled = %v, want disabled", err)
	}
	if _, err := svc.SetKeyState(ctx, ring, res.Key.ID, kms.KeyStateInput{State: kms.KeyEnabled}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Open(ctx, plain, nil); err != nil || !bytes.Equal(got, pt) {
		t.Fatalf("Open with the key enabled again = %q, %v", got, err)
	}
	if _, err := svc.DestroyKey(ctx, ring, res.Key.ID, kms.DestroyKeyInput{After: "0s"}); err != nil {
		t.Fatal(err)
	}
	// Destroyed at once (the destroyer is woken by the schedule).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		_, err := svc.GetKey(ctx, ring, res.Key.ID)
		if kms.ErrorKind(err) == kms.KindDestroyed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GetKey 10 s after destroying = %v", err)
		}
	}
	if _, err := s.Open(ctx, plain, nil); kms.ErrorKind(err) != kms.KindDestroyed {
		t.Errorf("Open with the key destroyed = %v, want destroyed", err)
	}
}

// TestWrongPrivateKey: an envelope does not open with another ring's
// private key, and says so.
func TestWrongPrivateKey(t *testing.T) {
	ctx, svc := service(t)
	sc := schemes(t, ctx, svc)
	sealed, err := envelope.New(svc, sc[0].priv).Seal(ctx, envelope.SealInput{RingName: sc[0].ring}, []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	for _, other := range sc[1:] {
		if _, err := envelope.New(svc, other.priv).Open(ctx, sealed, nil); err == nil {
			t.Errorf("Open with the private key of %s succeeded", other.name)
		}
	}
}

// shareless answers decrypt calls as the service does, but for the
// share: what whoever holds a ring's key, and no decrypt of the call,
// has. With other set, it answers that call's share instead.
type shareless struct {
	envelope.Keys
	other string
}

func (k shareless) Decrypt(ctx context.Context, in kms.DecryptInput) (*kms.DecryptResult, error) {
	res, err := k.Keys.Decrypt(ctx, in)
	if res != nil {
		res.KeyShare = k.other
	}
	return res, err
}

// TestSplitNeedsTheShare: an envelope sealed on a ring with split data
// keys does not open with the ring's key alone, nor with the share of
// another call; one sealed on a ring of ring keys does, which is what
// split keys are for.
func TestSplitNeedsTheShare(t *testing.T) {
	ctx, svc := service(t)
	sc := schemes(t, ctx, svc)
	pt := []byte("payroll, March")
	for _, c := range []struct {
		sc    scheme
		split bool
	}{{sc[0], false}, {sc[len(sc)-2], true}, {sc[len(sc)-1], true}} {
		t.Run(c.sc.name, func(t *testing.T) {
			s := envelope.New(svc, c.sc.priv)
			sealed, err := s.Seal(ctx, envelope.SealInput{RingName: c.sc.ring}, pt)
			if err != nil {
				t.Fatal(err)
			}
			w, err := s.NewWriter(ctx, io.Discard, envelope.SealInput{RingName: c.sc.ring})
			if err != nil {
				t.Fatal(err)
			}
			otherShare := w.Result().KeyShare
			if got, err := s.Open(ctx, sealed, nil); err != nil || !bytes.Equal(got, pt) {
				t.Fatalf("Open = %q, %v", got, err)
			}
			got, err := envelope.New(shareless{Keys: svc}, c.sc.priv).Open(ctx, sealed, nil)
			if !c.split {
				if err != nil || !bytes.Equal(got, pt) || otherShare != "" {
					t.Fatalf("Open on a ring of ring keys without a share = %q, %v", got, err)
				}
				return
			}
			if !errors.Is(err, envelope.ErrFormat) {
				t.Fatalf("Open with the ring's key alone = %q, %v; want ErrFormat", got, err)
			}
			if _, err := envelope.New(shareless{Keys: svc, other: otherShare}, c.sc.priv).Open(ctx, sealed, nil); !errors.Is(err, envelope.ErrFormat) {
				t.Fatalf("Open with another call's share = %v; want ErrFormat", err)
			}
			r, err := envelope.New(shareless{Keys: svc}, c.sc.priv).NewReader(ctx, bytes.NewReader(sealed), nil)
			if err == nil {
				_, err = io.ReadAll(r)
			}
			if !errors.Is(err, envelope.ErrFormat) {
				t.Fatalf("Reader with the ring's key alone = %v; want ErrFormat", err)
			}
		})
	}
}
