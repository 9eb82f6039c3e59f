package httpapi_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/docblock"
)

// invalidUnicodeCase is a case of the block format-invalid-unicode of
// docs/FORMAT.md section 4.1.
type invalidUnicodeCase struct {
	SentBytes, SentText, Stored, Note string
}

// sent is what the case puts between the quotes of a JSON string.
func (c invalidUnicodeCase) sent(t testing.TB) []byte {
	t.Helper()
	if c.SentText != "" {
		return []byte(c.SentText)
	}
	b, err := hex.DecodeString(strings.ReplaceAll(c.SentBytes, " ", ""))
	if err != nil || len(b) == 0 {
		t.Fatalf("case %q: sentBytes %q is not hex: %v", c.Note, c.SentBytes, err)
	}
	return b
}

// invalidUnicodeCases reads the cases out of docs/FORMAT.md.
func invalidUnicodeCases(t testing.TB) []invalidUnicodeCase {
	t.Helper()
	block := docblock.Fenced(t, "docs/FORMAT.md", "json format-invalid-unicode")
	var cases []invalidUnicodeCase
	if err := json.Unmarshal([]byte(block), &cases); err != nil || len(cases) == 0 {
		t.Fatalf("format-invalid-unicode block: %d cases, %v", len(cases), err)
	}
	return cases
}

// TestFormatInvalidUnicode sends every case of docs/FORMAT.md section
// 4.1's block over HTTP, as a value and in a member name of an Asset's
// data, and checks that the encrypt answer, GET /assets/{id} and the
// decrypt answer give the string the document says, and that the header
// signs the digest of the canonical JSON of that string, U+FFFD written
// as itself: the replacement of what is not Unicode is pinned to the
// document.
func TestFormatInvalidUnicode(t *testing.T) {
	e := newEnv(t)
	e.createRing(t, "text")
	for _, c := range invalidUnicodeCases(t) {
		sent := c.sent(t)
		body := slices.Concat([]byte(`{"ringname":"text","asset":{"data":{"v":"`), sent, []byte(`","k`), sent, []byte(`":1}}}`))
		r := e.do(t, "POST", "/ks/encrypt", e.root, body).want(t, http.StatusOK)
		res := decode[kms.EncryptResult](t, r)
		want := map[string]any{"v": c.Stored, "k" + c.Stored: 1.0}
		canonical, _ := json.Marshal(want)
		if !bytes.Contains(r.body, []byte(c.Stored)) {
			t.Errorf("%s: the encrypt answer %q does not hold %q as itself", c.Note, r.body, c.Stored)
		}
		got := map[string]map[string]any{"encrypt": res.Asset.Data}
		got["GET /assets/{id}"] = decode[kms.Asset](t, e.do(t, "GET", "/assets/"+res.Asset.ID, e.root, nil).want(t, http.StatusOK)).Data
		got["decrypt"] = decode[kms.DecryptResult](t, e.do(t, "POST", "/ks/decrypt", e.root,
			map[string]any{"hash": res.Hash, "header": res.Header}).want(t, http.StatusOK)).Asset.Data
		for where, data := range got {
			if g, _ := json.Marshal(data); !bytes.Equal(g, canonical) {
				t.Errorf("%s: %s data = %q, want %q", c.Note, where, g, canonical)
			}
		}
		header, _ := base64.RawURLEncoding.DecodeString(res.Header)
		sum := sha256.Sum256(slices.Concat([]byte("ringkms/asset/v1\x00"), canonical, []byte{0}))
		if len(header) < 131 || !bytes.Equal(header[99:131], sum[:]) {
			t.Errorf("%s: the header does not sign the digest of %q", c.Note, canonical)
		}
	}
}
