package envelope_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/envelope"
)

// keyOf returns the key the hash of the envelope env names.
func keyOf(t *testing.T, ctx context.Context, svc *kms.Service, env []byte) string {
	t.Helper()
	info, err := envelope.ReadInfo(bytes.NewReader(env))
	if err != nil {
		t.Fatalf("ReadInfo = %v", err)
	}
	h, err := svc.LookupHash(ctx, info.Hash)
	if err != nil {
		t.Fatalf("LookupHash = %v", err)
	}
	return h.KeyID
}

// encryptCount returns how many encrypt calls handed out the ring's
// active key.
func encryptCount(t *testing.T, ctx context.Context, svc *kms.Service, ring string) uint64 {
	t.Helper()
	r, err := svc.GetKeyRing(ctx, kms.RingRef{Name: ring})
	if err != nil {
		t.Fatal(err)
	}
	u, err := svc.KeyUsage(ctx, kms.RingRef{Name: ring}, r.ActiveKey)
	if err != nil {
		t.Fatal(err)
	}
	return u.EncryptCount
}

// TestRewrap: on every scheme, with split data keys or not, an envelope
// of several chunks sealed before a rotation is rewrapped under the new
// active key: the new envelope names that key, opens to the same bytes
// with the same associated data, and its header signs the same Asset,
// unchanged, which the new key now finds; the old envelope still opens.
// An envelope without an Asset gives one without.
func TestRewrap(t *testing.T) {
	ctx, svc := service(t)
	ad := []byte("reports/q3.pdf")
	for _, sc := range schemes(t, ctx, svc) {
		t.Run(sc.name, func(t *testing.T) {
			s := envelope.New(svc, sc.priv)
			parent, err := svc.Encrypt(ctx, kms.EncryptInput{RingName: sc.ring, Asset: &kms.AssetInput{Data: map[string]any{"dir": "reports"}}})
			if err != nil {
				t.Fatal(err)
			}
			asset := &kms.AssetInput{Data: map[string]any{"file": "q3.pdf"}, Parents: []string{parent.Asset.ID}}
			pt := randomBytes(4*envelope.ChunkSize + 99)
			old, err := s.Seal(ctx, envelope.SealInput{RingName: sc.ring, Asset: asset, AssociatedData: ad}, pt)
			if err != nil {
				t.Fatal(err)
			}
			bare, err := s.Seal(ctx, envelope.SealInput{RingName: sc.ring, AssociatedData: ad}, pt[:10])
			if err != nil {
				t.Fatal(err)
			}
			oldKey := keyOf(t, ctx, svc, old)
			rotated, err := svc.Rotate(ctx, kms.RotateInput{RingName: sc.ring})
			if err != nil {
				t.Fatal(err)
			}

			var out bytes.Buffer
			res, err := s.Rewrap(ctx, &out, bytes.NewReader(old), envelope.RewrapInput{AssociatedData: ad})
			if err != nil {
				t.Fatalf("Rewrap = %v", err)
			}
			oldInfo, _ := envelope.ReadInfo(bytes.NewReader(old))
			if res.Opened.Hash != oldInfo.Hash || res.Decrypt.Key.ID != oldKey || res.Encrypt.Key.ID != rotated.ID || res.Size != int64(len(pt)) {
				t.Errorf("Rewrap = opened %s under %s, sealed under %s, %d bytes; want %s under %s, sealed under %s, %d bytes",
					res.Opened.Hash, res.Decrypt.Key.ID, res.Encrypt.Key.ID, res.Size, oldInfo.Hash, oldKey, rotated.ID, len(pt))
			}
			if got := keyOf(t, ctx, svc, out.Bytes()); got != rotated.ID {
				t.Errorf("the new envelope's hash names key %s, want the active %s", got, rotated.ID)
			}
			if want := len(old); out.Len() != want {
				t.Errorf("the new envelope is %d bytes, the old %d", out.Len(), want)
			}
			r, err := s.NewReader(ctx, bytes.NewReader(out.Bytes()), ad)
			if err != nil {
				t.Fatalf("NewReader(the new envelope) = %v", err)
			}
			if got, err := io.ReadAll(r); err != nil || !bytes.Equal(got, pt) {
				t.Fatalf("the new envelope opens to %d bytes, %v; want the %d sealed", len(got), err, len(pt))
			}
			a := r.Result().Asset
			if !a.Valid || a.ID != res.Decrypt.Asset.ID || a.ID == "" || a.Data["file"] != "q3.pdf" || !slices.Equal(a.Parents, []string{parent.Asset.ID}) {
				t.Errorf("the new envelope's Asset = %+v, want %s with its data and parent", a, res.Decrypt.Asset.ID)
			}
			found, err := svc.SearchAssets(ctx, kms.AssetFilter{KeyID: rotated.ID}, kms.PageRequest{})
			if err != nil || len(found.Data) != 1 || found.Data[0].ID != a.ID {
				t.Errorf("SearchAssets(the new key) = %+v, %v; want the Asset %s", found, err, a.ID)
			}
			if _, err := s.Open(ctx, out.Bytes(), nil); !errors.Is(err, envelope.ErrFormat) {
				t.Errorf("Open(the new envelope) without the associated data = %v, want ErrFormat", err)
			}
			if got, err := s.Open(ctx, old, ad); err != nil || !bytes.Equal(got, pt) {
				t.Errorf("Open(the old envelope) after the rewrap = %d bytes, %v", len(got), err)
			}

			out.Reset()
			res, err = s.Rewrap(ctx, &out, bytes.NewReader(bare), envelope.RewrapInput{AssociatedData: ad})
			if err != nil {
				t.Fatalf("Rewrap(an envelope without an Asset) = %v", err)
			}
			if res.Encrypt.Asset != nil || res.Decrypt.Asset.ID != "" {
				t.Errorf("Rewrap(an envelope without an Asset) made or named one: %+v", res.Encrypt.Asset)
			}
			if got, err := s.Open(ctx, out.Bytes(), ad); err != nil || !bytes.Equal(got, pt[:10]) || keyOf(t, ctx, svc, out.Bytes()) != rotated.ID {
				t.Errorf("the rewrapped envelope without an Asset opens to %q, %v", got, err)
			}
		})
	}
}

// TestRewrapFails: a rewrap that cannot open its envelope leaves no
// envelope that opens. What fails by the first chunk (a refused decrypt,
// other associated data, the first chunk altered) fails before the
// encrypt call, so no hash is issued and nothing is written; a later
// chunk altered, or the stream cut off, leaves an incomplete envelope.
func TestRewrapFails(t *testing.T) {
	ctx, svc := service(t)
	sc := schemes(t, ctx, svc)[3] // split data keys
	s := envelope.New(svc, sc.priv)
	pt := randomBytes(3*envelope.ChunkSize + 5)
	sealed, err := s.Seal(ctx, envelope.SealInput{RingName: sc.ring}, pt)
	if err != nil {
		t.Fatal(err)
	}
	oldKey := keyOf(t, ctx, svc, sealed)
	prelude := len(sealed) - len(pt) - 4*16
	flip := func(i int) []byte {
		b := bytes.Clone(sealed)
		b[i] ^= 1
		return b
	}

	early := map[string]struct {
		env []byte
		ad  []byte
	}{
		"other associated data": {sealed, []byte("x")},
		"first chunk altered":   {flip(prelude + 3), nil},
		"hash altered":          {flip(45), nil},
		"cut within chunk 0":    {sealed[:prelude+10], nil},
	}
	for name, c := range early {
		before := encryptCount(t, ctx, svc, sc.ring)
		var out bytes.Buffer
		if _, err := s.Rewrap(ctx, &out, bytes.NewReader(c.env), envelope.RewrapInput{AssociatedData: c.ad}); err == nil {
			t.Errorf("%s: Rewrap succeeded", name)
		}
		if out.Len() != 0 || encryptCount(t, ctx, svc, sc.ring) != before {
			t.Errorf("%s: Rewrap wrote %d bytes and made %d encrypt calls, want none", name, out.Len(), encryptCount(t, ctx, svc, sc.ring)-before)
		}
	}

	late := map[string][]byte{
		"last chunk altered":   flip(len(sealed) - 1),
		"middle chunk altered": flip(prelude + 2*(envelope.ChunkSize+16) + 7),
		"cut after chunk 1":    sealed[:prelude+2*(envelope.ChunkSize+16)],
		"last chunk dropped":   sealed[:prelude+3*(envelope.ChunkSize+16)],
	}
	for name, env := range late {
		var out bytes.Buffer
		_, err := s.Rewrap(ctx, &out, bytes.NewReader(env), envelope.RewrapInput{})
		if !errors.Is(err, envelope.ErrFormat) {
			t.Errorf("%s: Rewrap = %v, want ErrFormat", name, err)
		}
		if out.Len() == 0 {
			t.Errorf("%s: Rewrap wrote nothing before chunk 0 failed", name)
			continue
		}
		if _, err := s.Open(ctx, out.Bytes(), nil); !errors.Is(err, envelope.ErrFormat) {
			t.Errorf("%s: Open(what Rewrap wrote) = %v, want ErrFormat", name, err)
		}
	}

	// A key disabled: the decrypt call is refused, before any encrypt.
	if _, err := svc.SetKeyState(ctx, kms.RingRef{Name: sc.ring}, oldKey, kms.KeyStateInput{State: kms.KeyDisabled, Rotate: true}); err != nil {
		t.Fatal(err)
	}
	before := encryptCount(t, ctx, svc, sc.ring)
	var out bytes.Buffer
	if _, err := s.Rewrap(ctx, &out, bytes.NewReader(sealed), envelope.RewrapInput{}); kms.ErrorKind(err) != kms.KindDisabled {
		t.Errorf("Rewrap under a disabled key = %v, want disabled", err)
	}
	if out.Len() != 0 || encryptCount(t, ctx, svc, sc.ring) != before {
		t.Errorf("Rewrap under a disabled key wrote %d bytes, made %d encrypt calls", out.Len(), encryptCount(t, ctx, svc, sc.ring)-before)
	}
}
