package kms_test

// These tests unwrap keys and decode hashes and headers with the standard
// library alone, following docs/FORMAT.md, so the document and the code
// cannot drift apart.

import (
	"bytes"
	"context"
	"crypto/ecdh"
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/hpke"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/docblock"
)

// wireKeyData is keyData as FORMAT.md describes it.
type wireKeyData struct {
	Version   int `json:"version"`
	Encrypted struct {
		Key struct {
			Value    string `json:"value"`
			Encoding string `json:"encoding"`
		} `json:"key"`
	} `json:"encrypted"`
	IV string `json:"iv"`
}

// unwrap opens keyData per FORMAT.md section 2. priv is the base64 private
// key of an HPKE ring, or an RSA key.
func unwrap(t *testing.T, kd wireKeyData, ringID, keyID, priv string, rsaKey *rsa.PrivateKey) []byte {
	t.Helper()
	if kd.Version != 1 {
		t.Fatalf("keyData version %d, want 1", kd.Version)
	}
	info := []byte("ringkms/keydata/v1/" + ringID + "/" + keyID)
	ct, err := base64.StdEncoding.DecodeString(kd.Encrypted.Key.Value)
	if err != nil {
		t.Fatal(err)
	}
	if kd.Encrypted.Key.Encoding == "rsa-oaep-sha256" {
		if kd.IV != "" {
			t.Fatalf("rsa keyData iv = %q, want empty", kd.IV)
		}
		key, err := rsa.DecryptOAEP(sha256.New(), nil, rsaKey, ct, info)
		if err != nil {
			t.Fatalf("RSA-OAEP unwrap: %v", err)
		}
		return key
	}
	var kem hpke.KEM
	switch kd.Encrypted.Key.Encoding {
	case "hpke-xwing":
		kem = hpke.MLKEM768X25519()
	case "hpke-x25519":
		kem = hpke.DHKEM(ecdh.X25519())
	default:
		t.Fatalf("unknown encoding %q", kd.Encrypted.Key.Encoding)
	}
	raw, err := base64.StdEncoding.DecodeString(priv)
	if err != nil {
		t.Fatal(err)
	}
	sk, err := kem.NewPrivateKey(raw)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := base64.StdEncoding.DecodeString(kd.IV)
	if err != nil {
		t.Fatal(err)
	}
	r, err := hpke.NewRecipient(enc, sk, hpke.HKDFSHA256(), hpke.AES256GCM(), info)
	if err != nil {
		t.Fatal(err)
	}
	key, err := r.Open(nil, ct)
	if err != nil {
		t.Fatalf("HPKE unwrap: %v", err)
	}
	return key
}

// viaJSON re-reads v as the JSON a client receives.
func viaJSON[T any](t *testing.T, v any) T {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out T
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

type wireKey struct {
	ID      string      `json:"id"`
	KeyData wireKeyData `json:"keyData"`
}

func TestUnwrapPerFormat(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(&rsaKey.PublicKey)
	rsaPEM := string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	callerX, _ := ecdh.X25519().GenerateKey(rand.Reader)

	tests := []struct {
		name     string
		in       kms.CreateKeyRingInput
		encoding string
		priv     string // caller-held private key, when the caller brought the public key
	}{
		{"default x-wing", kms.CreateKeyRingInput{}, "hpke-xwing", ""},
		{"generated x25519", kms.CreateKeyRingInput{KEM: "x25519"}, "hpke-x25519", ""},
		{"caller x25519", kms.CreateKeyRingInput{PublicKey: base64.StdEncoding.EncodeToString(callerX.PublicKey().Bytes())},
			"hpke-x25519", base64.StdEncoding.EncodeToString(callerX.Bytes())},
		{"caller rsa", kms.CreateKeyRingInput{PublicKey: rsaPEM}, "rsa-oaep-sha256", ""},
	}
	e := newEnv(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Name = strings.ReplaceAll(tt.name, " ", "-")
			created, err := e.svc.CreateKeyRing(e.root, tt.in)
			if err != nil {
				t.Fatal(err)
			}
			priv := created.PrivateKey
			if tt.priv != "" || tt.encoding == "rsa-oaep-sha256" {
				if priv != "" {
					t.Fatal("privateKey returned for a caller's public key")
				}
				priv = tt.priv
			}
			ringID := created.Ring.ID
			fromCreate := viaJSON[wireKey](t, created.Key)
			if fromCreate.KeyData.Encrypted.Key.Encoding != tt.encoding {
				t.Fatalf("encoding = %q, want %q", fromCreate.KeyData.Encrypted.Key.Encoding, tt.encoding)
			}
			want := unwrap(t, fromCreate.KeyData, ringID, fromCreate.ID, priv, rsaKey)
			if len(want) != 32 {
				t.Fatalf("unwrapped key has %d bytes, want 32", len(want))
			}
			enc, err := e.svc.Encrypt(e.root, kms.EncryptInput{RingName: tt.in.Name})
			if err != nil {
				t.Fatal(err)
			}
			dec, err := e.svc.Decrypt(e.root, kms.DecryptInput{Hash: enc.Hash, Header: enc.Header})
			if err != nil {
				t.Fatal(err)
			}
			read, err := e.svc.GetKey(e.root, kms.RingRef{Name: tt.in.Name}, fromCreate.ID)
			if err != nil {
				t.Fatal(err)
			}
			for what, k := range map[string]any{"encrypt": enc.Key, "decrypt": dec.Key, "key read": read} {
				wk := viaJSON[wireKey](t, k)
				if got := unwrap(t, wk.KeyData, ringID, wk.ID, priv, rsaKey); !bytes.Equal(got, want) {
					t.Errorf("key from %s unwraps to %x, want %x", what, got, want)
				}
			}
			// keyData bound to another key ID does not open.
			if tt.encoding != "rsa-oaep-sha256" {
				raw, _ := base64.StdEncoding.DecodeString(priv)
				kem := hpke.MLKEM768X25519()
				if tt.encoding == "hpke-x25519" {
					kem = hpke.DHKEM(ecdh.X25519())
				}
				sk, _ := kem.NewPrivateKey(raw)
				encap, _ := base64.StdEncoding.DecodeString(fromCreate.KeyData.IV)
				r, _ := hpke.NewRecipient(encap, sk, hpke.HKDFSHA256(), hpke.AES256GCM(), []byte("ringkms/keydata/v1/"+ringID+"/other"))
				ct, _ := base64.StdEncoding.DecodeString(fromCreate.KeyData.Encrypted.Key.Value)
				if _, err := r.Open(nil, ct); err == nil {
					t.Error("keyData opened with the info of another key")
				}
			}
		})
	}
}

func TestHashAndHeaderLayout(t *testing.T) {
	e := newEnv(t)
	created := e.ring(t, "layout")
	res := e.encrypt(t, "layout")
	hash, err := base64.RawURLEncoding.DecodeString(res.Hash)
	if err != nil || len(hash) != 65 || len(res.Hash) != 87 {
		t.Fatalf("hash = %d bytes (%d chars), %v; want 65 (87)", len(hash), len(res.Hash), err)
	}
	if hash[0] != 1 || hex.EncodeToString(hash[1:17]) != created.Ring.ID || hex.EncodeToString(hash[17:33]) != created.Key.ID {
		t.Fatalf("hash = %x, want version 1, ring %s, key %s", hash, created.Ring.ID, created.Key.ID)
	}
	header, err := base64.RawURLEncoding.DecodeString(res.Header)
	if err != nil || len(header) != 165 {
		t.Fatalf("header = %d bytes, %v; want 165 (signed alone: proof depth 0)", len(header), err)
	}
	if header[0] != 1 || header[1] != 0 || !bytes.Equal(header[18:83], hash) {
		t.Fatalf("header = %x: want version 1, no flags, the hash at 18..82", header)
	}
	pub := publishedKey(t, e.svc, hex.EncodeToString(header[2:10]))
	sum := sha256.Sum256(pub)
	if !bytes.Equal(sum[:8], header[2:10]) {
		t.Fatal("signing key ID is not the first 8 bytes of SHA-256 of the public key")
	}
	if err := verifyHeaderPerFormat(header, pub); err != nil {
		t.Fatal(err)
	}
}

// publishedKey returns the public key of the signing key id among those
// svc publishes; with id empty, of the active one.
func publishedKey(t testing.TB, svc *kms.Service, id string) ed25519.PublicKey {
	t.Helper()
	set, err := svc.SigningKeys(context.Background())
	if err != nil {
		t.Fatalf("SigningKeys() = %v", err)
	}
	for _, k := range set.Keys {
		if k.ID == id || id == "" && k.Active {
			pub, err := base64.StdEncoding.DecodeString(k.PublicKey)
			if err != nil || len(pub) != ed25519.PublicKeySize {
				t.Fatalf("signing key %s: publicKey %q", k.ID, k.PublicKey)
			}
			return pub
		}
	}
	t.Fatalf("signing key %q is not among SigningKeys %+v", id, set.Keys)
	return nil
}

// verifyHeaderPerFormat checks a header's signature as docs/FORMAT.md
// section 4 tells a third party to, with the standard library alone.
func verifyHeaderPerFormat(header []byte, pub ed25519.PublicKey) error {
	n := 83
	if header[1]&1 != 0 {
		n = 131
	}
	if len(header) < n+2 {
		return fmt.Errorf("header of %d bytes is too short", len(header))
	}
	depth, index := int(header[n]), int(header[n+1])
	if len(header) != n+2+32*depth+64+16 {
		return fmt.Errorf("header of %d bytes, want %d for proof depth %d", len(header), n+2+32*depth+64+16, depth)
	}
	h := sha256.Sum256(append([]byte("\x00ringkms-header-v1"), header[:n]...))
	for l := range depth {
		sib := header[n+2+32*l : n+2+32*(l+1)]
		if index>>l&1 == 0 {
			h = sha256.Sum256(slices.Concat([]byte{1}, h[:], sib))
		} else {
			h = sha256.Sum256(slices.Concat([]byte{1}, sib, h[:]))
		}
	}
	sig := header[n+2+32*depth : n+2+32*depth+64]
	if !ed25519.Verify(pub, append([]byte("ringkms-header-root-v1"), h[:]...), sig) {
		return fmt.Errorf("header signature does not verify as FORMAT.md says")
	}
	return nil
}

// TestBatchSignedHeadersPerFormat issues headers from many goroutines at
// once, so that they are signed in batches, and checks each as a third
// party would.
func TestBatchSignedHeadersPerFormat(t *testing.T) {
	e := newEnv(t)
	e.ring(t, "batch")
	var mu sync.Mutex
	var headers [][]byte
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for i := range 8 {
				in := kms.EncryptInput{RingName: "batch"}
				if i%2 == 0 {
					in.Asset = &kms.AssetInput{Data: map[string]any{"n": 1}}
				}
				res, err := e.svc.Encrypt(e.root, in)
				if err != nil {
					t.Error(err)
					return
				}
				h, _ := base64.RawURLEncoding.DecodeString(res.Header)
				mu.Lock()
				headers = append(headers, h)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	pub := publishedKey(t, e.svc, "")
	for _, h := range headers {
		if err := verifyHeaderPerFormat(h, pub); err != nil {
			t.Fatalf("header %x: %v", h, err)
		}
		// Any change to the body breaks the signature.
		bad := bytes.Clone(h)
		bad[12] ^= 1
		if verifyHeaderPerFormat(bad, pub) == nil {
			t.Fatalf("header with an altered issue time verifies")
		}
	}
}

// TestFormatExample unwraps the worked example of docs/FORMAT.md, and
// checks its worked example with an Asset (TestFormatExampleAsset).
func TestFormatExample(t *testing.T) {
	block := docblock.Fenced(t, "docs/FORMAT.md", "json format-example")
	var ex struct {
		PrivateKey, PublicKey, RingID, KeyID, Key, Hash, Header, SigningKey string
		KeyData                                                             wireKeyData
	}
	if err := json.Unmarshal([]byte(block), &ex); err != nil {
		t.Fatal(err)
	}
	got := unwrap(t, ex.KeyData, ex.RingID, ex.KeyID, ex.PrivateKey, nil)
	if hex.EncodeToString(got) != ex.Key {
		t.Fatalf("example unwraps to %x, want %s", got, ex.Key)
	}
	raw, _ := base64.StdEncoding.DecodeString(ex.PrivateKey)
	sk, _ := ecdh.X25519().NewPrivateKey(raw)
	if base64.StdEncoding.EncodeToString(sk.PublicKey().Bytes()) != ex.PublicKey {
		t.Error("example publicKey is not the public half of privateKey")
	}
	hash, _ := base64.RawURLEncoding.DecodeString(ex.Hash)
	header, _ := base64.RawURLEncoding.DecodeString(ex.Header)
	if hex.EncodeToString(hash[1:17]) != ex.RingID || hex.EncodeToString(hash[17:33]) != ex.KeyID || !bytes.Equal(header[18:83], hash) {
		t.Error("example hash and header do not match the layout")
	}
	pub, _ := base64.StdEncoding.DecodeString(ex.SigningKey)
	if len(pub) != ed25519.PublicKeySize {
		t.Fatalf("example signingKey has %d bytes", len(pub))
	}
	if err := verifyHeaderPerFormat(header, pub); err != nil {
		t.Errorf("example header: %v", err)
	}
	t.Run("asset", testFormatExampleAsset)
}

// testFormatExampleAsset checks the worked example with an Asset of
// docs/FORMAT.md section 5.1 as its text says: the canonical data, the
// Asset digest in the header, the signature under the published key, and
// the MACs under keys derived from the master key as section 8 says.
func testFormatExampleAsset(t *testing.T) {
	var ex struct {
		MasterKey, Hash, Header, CanonicalData, AssetDigest string
		SigningKey                                          kms.SigningKey
		Asset                                               struct {
			ID      string
			Data    json.RawMessage
			Parents []string
		}
	}
	if err := json.Unmarshal([]byte(docblock.Fenced(t, "docs/FORMAT.md", "json format-example-asset")), &ex); err != nil {
		t.Fatal(err)
	}
	var data any
	if err := json.Unmarshal(ex.Asset.Data, &data); err != nil {
		t.Fatal(err)
	}
	canon := canonicalPerFormat(data)
	if canon != ex.CanonicalData {
		t.Fatalf("asset.data written by the rules of section 4.1 = %s, want canonicalData %s", canon, ex.CanonicalData)
	}
	parents := slices.Clone(ex.Asset.Parents)
	slices.Sort(parents)
	sum := sha256.Sum256(slices.Concat([]byte("ringkms/asset/v1\x00"), []byte(canon), []byte{0}, []byte(strings.Join(parents, ","))))
	header, _ := base64.RawURLEncoding.DecodeString(ex.Header)
	hash, _ := base64.RawURLEncoding.DecodeString(ex.Hash)
	if hex.EncodeToString(sum[:]) != ex.AssetDigest || len(header) != 213 || header[1] != 1 ||
		!bytes.Equal(header[99:131], sum[:]) || hex.EncodeToString(header[83:99]) != ex.Asset.ID || !bytes.Equal(header[18:83], hash) {
		t.Fatalf("Asset digest %x: the example's is %s, the header (%d bytes) holds %x for asset %x", sum, ex.AssetDigest, len(header), header[99:131], header[83:99])
	}
	pub, _ := base64.StdEncoding.DecodeString(ex.SigningKey.PublicKey)
	id := sha256.Sum256(pub)
	if ex.SigningKey.ID != hex.EncodeToString(id[:8]) || ex.SigningKey.ID != hex.EncodeToString(header[2:10]) {
		t.Errorf("signingKey.id %s: SHA-256 of its key gives %x, the header names %x", ex.SigningKey.ID, id[:8], header[2:10])
	}
	if err := verifyHeaderPerFormat(header, pub); err != nil {
		t.Errorf("example header: %v", err)
	}
	mk, _ := base64.StdEncoding.DecodeString(ex.MasterKey)
	for _, m := range []struct {
		purpose string
		value   []byte
	}{{"hash-mac", hash}, {"header-mac", header}} {
		k, err := hkdf.Key(sha256.New, mk, make([]byte, 32), "ringkms/v1/"+m.purpose, 32)
		if err != nil {
			t.Fatal(err)
		}
		mac := hmac.New(sha256.New, k)
		mac.Write(m.value[:len(m.value)-16])
		if !bytes.Equal(mac.Sum(nil)[:16], m.value[len(m.value)-16:]) {
			t.Errorf("the MAC of the example's %s does not verify under the key derived with %s", m.purpose, m.purpose)
		}
	}
	// The library's verifier agrees.
	var asset kms.Asset
	asset.ID, asset.Parents = ex.Asset.ID, ex.Asset.Parents
	if err := json.Unmarshal(ex.Asset.Data, &asset.Data); err != nil {
		t.Fatal(err)
	}
	keys := &kms.SigningKeySet{Keys: []kms.SigningKey{ex.SigningKey}}
	if v, err := keys.VerifyHeader(ex.Header, &asset); err != nil || !v.Valid {
		t.Errorf("VerifyHeader(example) = %+v, %v; want valid", v, err)
	}
}

// canonicalPerFormat writes a JSON value decoded by encoding/json (numbers
// as float64) by the rules of docs/FORMAT.md section 4.1, independently of
// encoding/json's encoder.
func canonicalPerFormat(v any) string {
	var b strings.Builder
	writeCanonical(&b, v)
	return b.String()
}

func writeCanonical(b *strings.Builder, v any) {
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case float64:
		if a := math.Abs(v); a != 0 && (a < 1e-6 || a >= 1e21) {
			s := strconv.FormatFloat(v, 'e', -1, 64) // 1e+21, 1e-07
			mant, exp, _ := strings.Cut(s, "e")
			sign, digits := exp[:1], strings.TrimLeft(exp[1:], "0")
			b.WriteString(mant + "e" + sign + digits)
		} else {
			b.WriteString(strconv.FormatFloat(v, 'f', -1, 64))
		}
	case string:
		b.WriteByte('"')
		// Ranging over a string yields U+FFFD for each byte that does not
		// start a well-formed UTF-8 sequence: section 4.1's replacement.
		for _, r := range v {
			switch {
			case r == '"' || r == '\\':
				b.WriteString("\\" + string(r))
			case r == '\b':
				b.WriteString(`\b`)
			case r == '\f':
				b.WriteString(`\f`)
			case r == '\n':
				b.WriteString(`\n`)
			case r == '\r':
				b.WriteString(`\r`)
			case r == '\t':
				b.WriteString(`\t`)
			case r < 0x20 || r == '<' || r == '>' || r == '&' || r == 0x2028 || r == 0x2029:
				fmt.Fprintf(b, `\u%04x`, r)
			default:
				b.WriteRune(r)
			}
		}
		b.WriteByte('"')
	case []any:
		writeList(b, '[', ']', len(v), func(i int) { writeCanonical(b, v[i]) })
	case map[string]any:
		names := slices.Sorted(maps.Keys(v)) // byte order of the UTF-8 names
		writeList(b, '{', '}', len(names), func(i int) {
			writeCanonical(b, names[i])
			b.WriteByte(':')
			writeCanonical(b, v[names[i]])
		})
	}
}

// writeList writes n items, each by item, between open and close and
// separated by commas.
func writeList(b *strings.Builder, open, close byte, n int, item func(i int)) {
	b.WriteByte(open)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		item(i)
	}
	b.WriteByte(close)
}

// TestCanonicalDataPerFormat checks the canonical JSON rules of
// docs/FORMAT.md section 4.1 against what the service stores and signs,
// on values that exercise each rule: Asset data given over the Go API as
// a client decodes it verifies only if the service wrote it by the rules.
func TestCanonicalDataPerFormat(t *testing.T) {
	e := newEnv(t)
	e.ring(t, "canon")
	values := []any{
		0.0, math.Copysign(0, -1), 12.0, -7.0, 0.5, 1e-6, 1e-7, 9.99e-7, 1e20, 1e21, 123456789012345680000.0, 1.5e300, -3.25e-9, 0.1, 1.0 / 3,
		"", "plain", "quote\" back\\slash /", "\b\f\n\r\t", "\x00\x01\x1f\x7f", "<tag> & more", "\u2028\u2029", "é😀\uffff", "bad\xffutf8",
		true, false, nil, []any{}, map[string]any{},
	}
	data := map[string]any{"z": 1.0, "A": 2.0, "é": 3.0, "\uffff": 4.0, "😀": 5.0, "a": map[string]any{"y": []any{1.0, "x"}, "b": nil}}
	for i, v := range values {
		data[fmt.Sprintf("v%02d", i)] = v
	}
	enc, err := e.svc.Encrypt(e.root, kms.EncryptInput{RingName: "canon", Asset: &kms.AssetInput{Data: data}})
	if err != nil {
		t.Fatal(err)
	}
	stored, err := e.svc.GetAsset(e.root, enc.Asset.ID)
	if err != nil {
		t.Fatal(err)
	}
	got := viaJSON[map[string]any](t, stored.Data)
	canon := canonicalPerFormat(got)
	header, _ := base64.RawURLEncoding.DecodeString(enc.Header)
	sum := sha256.Sum256(slices.Concat([]byte("ringkms/asset/v1\x00"), []byte(canon), []byte{0}))
	if !bytes.Equal(header[99:131], sum[:]) {
		want, _ := json.Marshal(got)
		t.Fatalf("the Asset digest of %s is not the header's; the service wrote\n%s", canon, want)
	}
}

// TestFormatInvalidUnicodeGo gives the byte cases of docs/FORMAT.md
// section 4.1's block format-invalid-unicode as Go strings of an Asset's
// data, as a value and in a member name, and checks that the service
// stores and signs the string the document says: the Go library
// replaces what is not UTF-8 as the HTTP interface does.
func TestFormatInvalidUnicodeGo(t *testing.T) {
	var cases []struct{ SentBytes, SentText, Stored, Note string }
	if err := json.Unmarshal([]byte(docblock.Fenced(t, "docs/FORMAT.md", "json format-invalid-unicode")), &cases); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	e.ring(t, "text")
	n := 0
	for _, c := range cases {
		if c.SentBytes == "" {
			continue // an escape: JSON text, not a Go string
		}
		n++
		raw, err := hex.DecodeString(strings.ReplaceAll(c.SentBytes, " ", ""))
		if err != nil {
			t.Fatalf("%s: sentBytes: %v", c.Note, err)
		}
		sent := string(raw)
		enc, err := e.svc.Encrypt(e.root, kms.EncryptInput{RingName: "text", Asset: &kms.AssetInput{Data: map[string]any{"v": sent, "k" + sent: 1}}})
		if err != nil {
			t.Fatalf("%s: Encrypt = %v", c.Note, err)
		}
		stored, err := e.svc.GetAsset(e.root, enc.Asset.ID)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]any{"v": c.Stored, "k" + c.Stored: 1.0}
		if got := viaJSON[map[string]any](t, stored.Data); !maps.Equal(got, want) {
			t.Errorf("%s: stored data %q, want %q", c.Note, got, want)
		}
		canon := canonicalPerFormat(want)
		header, _ := base64.RawURLEncoding.DecodeString(enc.Header)
		sum := sha256.Sum256(slices.Concat([]byte("ringkms/asset/v1\x00"), []byte(canon), []byte{0}))
		if !bytes.Equal(header[99:131], sum[:]) {
			t.Errorf("%s: the header does not sign the digest of %s", c.Note, canon)
		}
	}
	if n == 0 {
		t.Fatal("the block has no sentBytes case")
	}
}
