package kms

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// answerAppender is what the HTTP layer uses instead of json.Marshal.
type answerAppender interface {
	AppendJSON([]byte) ([]byte, error)
}

// wantMarshalJSON fails the test unless appendJSON, a hand-written
// encoder of v, appends to prefix what json.Marshal writes of v.
func wantMarshalJSON(t testing.TB, v any, appendJSON func([]byte) ([]byte, error), prefix string) {
	t.Helper()
	want, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	got, err := appendJSON([]byte(prefix))
	if err != nil || !bytes.Equal(got, append([]byte(prefix), want...)) {
		t.Errorf("AppendJSON =\n%q, %v\nwant\n%q", got, err, prefix+string(want))
	}
}

// TestAnswerJSONMatchesEncodingJSON holds the hand-written encoders of the
// Encrypt and Decrypt answers to json.Marshal, byte for byte, for answers
// with and without every optional part and with strings that need
// escaping.
func TestAnswerJSONMatchesEncodingJSON(t *testing.T) {
	count := uint64(17)
	destroy := time.Date(2026, 3, 4, 5, 6, 7, 890, time.FixedZone("x", 3600))
	full := &Key{Type: AlgoAES256, ID: "k1", Props: map[string]any{"b": 1, "a": "x<y", "c": nil, "d": []any{1.5, "q\""}},
		KeyData: &KeyData{Version: 1, Encrypted: EncryptedKey{Key: EncodedValue{Value: "AAEC+/==", Encoding: "hpke-x25519"}}, IV: "iv/+"},
		State:   KeyEnabled, DestroyAt: &destroy, EncryptCount: &count, Version: 7}
	bare := &Key{Type: AlgoAES256, ID: "k2", Props: map[string]any{}, State: "disabled"}
	nilProps := &Key{ID: "\u2028\x01é"}
	asset := &Asset{ID: "a1", CreatedAt: destroy, Data: map[string]any{"n": 1, "m": map[string]any{"z": true}}, Parents: []string{"p"}}
	values := []answerAppender{
		&EncryptResult{Key: full, RingID: "r", Hash: "h+/=", Header: "hd"},
		&EncryptResult{Key: full, KeyShare: "c2hhcmU+/w==", RingID: "r", Hash: "h", Header: "hd", Asset: asset},
		&EncryptResult{Key: bare, RingID: "r", Hash: "h", Header: "<&>"},
		&EncryptResult{Key: nilProps, Asset: asset},
		&EncryptResult{Asset: &Asset{}},
		&EncryptResult{},
		&DecryptResult{RingID: "r", RingName: "payments", Key: full, Asset: SignedAsset{Valid: true, ID: "a1", Message: "ok", Data: asset.Data, Parents: []string{"p1", "p<2>"}}},
		&DecryptResult{RingID: "r", Key: bare, Asset: SignedAsset{Message: "tab\tand \"quote\""}},
		&DecryptResult{RingID: "r", Key: full, KeyShare: "c2hhcmU+/w==", Asset: SignedAsset{Valid: true, Data: map[string]any{}, Parents: []string{}}},
		&DecryptResult{Asset: SignedAsset{Data: map[string]any{}, Parents: []string{}}},
		&DecryptResult{Asset: SignedAsset{Parents: []string{"\u2028\xff"}}},
		&DecryptResult{},
	}
	for _, v := range values {
		wantMarshalJSON(t, v, v.AppendJSON, "prefix")
	}
	bad := map[string]any{"c": make(chan int)}
	for _, v := range []answerAppender{
		&EncryptResult{Key: &Key{Props: bad}},
		&EncryptResult{Asset: &Asset{Data: bad}},
		&DecryptResult{Asset: SignedAsset{Data: bad}},
		&DecryptResult{Key: &Key{Props: bad}},
	} {
		if _, err := v.AppendJSON(nil); err == nil {
			t.Errorf("AppendJSON of %+v with a channel = nil error, want json's error", v)
		}
	}
}

// FuzzAnswerJSON: for any strings, the hand-written encoder writes what
// json.Marshal writes.
func FuzzAnswerJSON(f *testing.F) {
	f.Add("k", "r", "hash", "hdr", "prop", "val", "hpke-x25519", 3, true)
	f.Add("\u2028", "<", "\\", "\"", "\xff", "\x00", "é", -1, false)
	f.Fuzz(func(t *testing.T, id, ring, hash, hdr, prop, val, enc string, version int, valid bool) {
		k := &Key{Type: AlgoAES256, ID: id, Props: map[string]any{prop: val, "n": version},
			KeyData: &KeyData{Version: version, Encrypted: EncryptedKey{Key: EncodedValue{Value: val, Encoding: enc}}, IV: hdr}, State: ring}
		for _, v := range []answerAppender{
			&EncryptResult{Key: k, KeyShare: val, RingID: ring, Hash: hash, Header: hdr},
			&DecryptResult{RingID: ring, RingName: id, Key: k, KeyShare: hdr, Asset: SignedAsset{Valid: valid, ID: prop, Message: val, Data: map[string]any{val: prop}, Parents: []string{hash, hdr}}},
		} {
			wantMarshalJSON(t, v, v.AppendJSON, "")
		}
	})
}

// BenchmarkAnswerJSON: an encrypt answer as the HTTP layer encodes it,
// by json.Marshal and by AppendJSON into a reused buffer.
func BenchmarkAnswerJSON(b *testing.B) {
	res := &EncryptResult{
		Key: &Key{Type: AlgoAES256, ID: "01JD3Z6Q7W8X9Y0ZA1B2C3D4E5", Props: map[string]any{},
			KeyData: &KeyData{Version: 1, Encrypted: EncryptedKey{Key: EncodedValue{Value: string(bytes.Repeat([]byte("A"), 64)), Encoding: "hpke-x25519"}}, IV: string(bytes.Repeat([]byte("B"), 44))},
			State:   KeyEnabled},
		RingID: "01JD3Z6Q7W8X9Y0ZA1B2C3D4E6", Hash: string(bytes.Repeat([]byte("C"), 64)), Header: string(bytes.Repeat([]byte("D"), 300)),
	}
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(res); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("AppendJSON", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			var err error
			if buf, err = res.AppendJSON(buf[:0]); err != nil {
				b.Fatal(err)
			}
		}
	})
}
