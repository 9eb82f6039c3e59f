package httpapi

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ringkms/kms"
)

// TestDecodeFast: the bodies that encrypt and decrypt are sent take the
// fast path and decode as json.Unmarshal decodes them; the rest fall back.
func TestDecodeFast(t *testing.T) {
	fast := []struct {
		body string
		into func() [2]any // a fresh input for the fast path, and one for json.Unmarshal
	}{
		{`{"ringname":"payments"}`, encryptPair},
		{" {\n\t\"ringname\" : \"a b-c_9\" ,\r\n \"ringname\":\"last wins\" } ", encryptPair},
		{`{}`, encryptPair},
		{`{}`, decryptPair},
		{`{"hash":"aGFzaA==","header":"AAEC+/=="}`, decryptPair},
		{`{"header":"","hash":""}`, decryptPair},
	}
	for _, c := range fast {
		pair := c.into()
		if !decodeFast([]byte(c.body), pair[0]) {
			t.Errorf("%s into %T: not decoded on the fast path", c.body, pair[0])
			continue
		}
		checkSame(t, c.body, pair[0], pair[1])
	}
	slow := []string{
		`{"ringname":"é"}`, `{"ringname":"a\"b"}`, `{"ringname":"a\u0041"}`, "{\"ringname\":\"a\tb\"}",
		`{"RingName":"x"}`, `{"ringname":null}`, `{"ringname":1}`, `{"ringname":"x","asset":{}}`,
		`{"other":"x"}`, `{"ringname":"x",}`, `{"ringname":"x"`, `{"ringname" "x"}`, `{"ringname":"x"}x`,
		`[]`, `"x"`, ``, `{`, `{"ringname":"x"}{}`, `{"hash":"h","header":"d","x":"y"}`, `{"hash":"h","ringname":"r"}`,
	}
	for _, body := range slow {
		for _, pair := range inputPairs() {
			if decodeFast([]byte(body), pair[0]) {
				t.Errorf("%s into %T: decoded on the fast path, want json.Unmarshal's", body, pair[0])
			}
		}
	}
	if decodeFast([]byte(`{}`), &kms.RotateInput{}) {
		t.Error("decodeFast decoded an input that it does not serve")
	}
}

func encryptPair() [2]any { return [2]any{&kms.EncryptInput{}, &kms.EncryptInput{}} }
func decryptPair() [2]any { return [2]any{&kms.DecryptInput{}, &kms.DecryptInput{}} }

// inputPairs are the inputs the fast path serves, each twice: one for it,
// one for json.Unmarshal.
func inputPairs() [][2]any { return [][2]any{encryptPair(), decryptPair()} }

// checkSame fails the test unless json.Unmarshal decodes body into want
// without error and to what got holds.
func checkSame(t *testing.T, body string, got, want any) {
	t.Helper()
	if err := json.Unmarshal([]byte(body), want); err != nil {
		t.Fatalf("%q: the fast path decoded what json.Unmarshal refuses: %v", body, err)
	}
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if string(g) != string(w) {
		t.Fatalf("%q: fast path %s, json.Unmarshal %s", body, g, w)
	}
}

// FuzzDecodeFast: whatever the body, when the fast path decodes it,
// json.Unmarshal decodes it too, to the same input.
func FuzzDecodeFast(f *testing.F) {
	for _, s := range []string{`{"ringname":"payments"}`, `{"hash":"h","header":"d"}`, ` { } `, `{"ringname":"a","ringname":"b"}`, `{"hash":"\u0041"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, pair := range inputPairs() {
			if decodeFast(body, pair[0]) {
				checkSame(t, string(body), pair[0], pair[1])
			}
		}
	})
}

// BenchmarkDecodeInput: an encrypt and a decrypt body, by json.Unmarshal
// and on the fast path.
func BenchmarkDecodeInput(b *testing.B) {
	bodies := []struct {
		name string
		body []byte
		into func() [2]any
	}{
		{"encrypt", []byte(`{"ringname":"kmsbench"}`), encryptPair},
		{"decrypt", []byte(`{"hash":"` + strings.Repeat("h", 64) + `","header":"` + strings.Repeat("d", 300) + `"}`), decryptPair},
	}
	decoders := []struct {
		name   string
		decode func([]byte, any) bool
	}{
		{"json.Unmarshal", func(data []byte, v any) bool { return json.Unmarshal(data, v) == nil }},
		{"fast", decodeFast},
	}
	for _, in := range bodies {
		for _, d := range decoders {
			b.Run(in.name+"/"+d.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if !d.decode(in.body, in.into()[0]) {
						b.Fatal("not decoded")
					}
				}
			})
		}
	}
}
