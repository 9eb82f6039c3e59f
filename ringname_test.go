package kms_test

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ringkms/kms"
)

// secretShapedNames are valid ring names shaped like a credential: the
// start of a secret the service issues, in any case, or 32 characters or
// more that are not an ID.
var secretShapedNames = []string{
	"rk_live_Q2hhbmdlTWU",
	"RKT_abc",
	"rki_invite",
	"rkr_reset",
	strings.Repeat("z", 32),
	"k" + strings.Repeat("9", 63),
}

// TestRingNameShapedLikeSecret: a name shaped like a credential makes no
// ring, whichever way a ring is made (a /ks ring, an /asym ring, a
// transit key by CreateTransitKey or by an encrypt that may create it):
// an Invalid error that does not quote the name, and no activity record
// that holds it. A name of 31 characters makes a ring.
func TestRingNameShapedLikeSecret(t *testing.T) {
	e := newEnv(t)
	makers := []struct {
		name string
		make func(name string) error
	}{
		{"CreateKeyRing", func(n string) error {
			_, err := e.svc.CreateKeyRing(e.root, kms.CreateKeyRingInput{Name: n, KEM: "x25519"})
			return err
		}},
		{"CreateAsymKeyRing", func(n string) error {
			_, err := e.svc.CreateAsymKeyRing(e.root, kms.CreateAsymKeyRingInput{Name: n})
			return err
		}},
		{"CreateTransitKey", func(n string) error {
			_, err := e.svc.CreateHeldKey(e.root, kms.CreateHeldKeyInput{Name: n})
			return err
		}},
		{"EncryptTransit", func(n string) error {
			_, err := e.svc.EncryptWithHeldKey(e.root, kms.HeldEncryptInput{Name: n, Create: true, Items: []kms.HeldPlaintext{{Plaintext: []byte("x")}}})
			return err
		}},
	}
	for i, m := range makers {
		for _, name := range secretShapedNames {
			err := m.make(name)
			wantKind(t, m.name+"(a name shaped like a credential)", err, kms.KindInvalid)
			msg := strings.ToLower(kms.ErrorMessage(err))
			if strings.Contains(msg, strings.ToLower(name)) || !strings.Contains(msg, "credential") {
				t.Errorf("%s(a name shaped like a credential) = %q, want a message that says why and does not quote the name", m.name, msg)
			}
		}
		if err := m.make(strings.Repeat("b", 30) + strconv.Itoa(i)); err != nil {
			t.Errorf("%s(a name of 31 characters) = %v", m.name, err)
		}
	}
	// Looking a name up records the look-up, found or not, granted or
	// denied; no record, nor the error of a denial, holds the name.
	nobody := e.as(t, kms.Flags{})
	for _, name := range secretShapedNames {
		_, ringErr := e.svc.GetKeyRing(e.root, kms.RingRef{Name: name})
		_, asymErr := e.svc.GetAsymConfig(e.root, kms.RingRef{Name: name})
		_, heldErr := e.svc.EncryptWithHeldKey(e.root, kms.HeldEncryptInput{Name: name, Items: []kms.HeldPlaintext{{Plaintext: []byte("x")}}})
		_, aliasErr := e.svc.EncryptWithHeldKey(e.root, kms.HeldEncryptInput{Name: "alias/" + name, Items: []kms.HeldPlaintext{{Plaintext: []byte("x")}}})
		_, deniedErr := e.svc.GetKeyRing(nobody, kms.RingRef{Name: name})
		for what, err := range map[string]error{"GetKeyRing": ringErr, "GetAsymConfig": asymErr, "EncryptWithHeldKey": heldErr, "EncryptWithHeldKey(an alias)": aliasErr,
			"GetKeyRing(without the flag)": deniedErr} {
			want := kms.KindNotFound
			if err == deniedErr {
				want = kms.KindPermissionDenied
			}
			wantKind(t, what+"(a name shaped like a credential)", err, want)
			if strings.Contains(strings.ToLower(err.Error()), strings.ToLower(name)) {
				t.Errorf("%s(a name shaped like a credential) quotes it: %v", what, err)
			}
		}
	}
	recs, err := e.svc.SearchActivity(e.root, kms.ActivityFilter{}, kms.PageRequest{Limit: 10000})
	if err != nil {
		t.Fatal(err)
	}
	trail, _ := json.Marshal(recs.Data)
	for _, name := range secretShapedNames {
		if strings.Contains(strings.ToLower(string(trail)), strings.ToLower(name)) {
			t.Errorf("an activity record holds the name %s", name)
		}
	}
}

// TestRingNameInvalidNotQuoted: a name that is not valid is quoted in the
// error, unless it is shaped like a credential.
func TestRingNameInvalidNotQuoted(t *testing.T) {
	for _, c := range []struct {
		name   string
		quoted bool
	}{
		{"bad name!", true},
		{"rk_live key", false},
		{strings.Repeat("c", 40) + "!", false},
	} {
		msg := kms.ErrorMessage(kms.ValidateRingName(c.name))
		if strings.Contains(msg, c.name) != c.quoted {
			t.Errorf("ValidateRingName(%q) = %q, want the name quoted: %v", c.name, msg, c.quoted)
		}
	}
}

// TestRingNameShapedLikeSecretMadeBefore: a ring whose name is shaped
// like a credential, made before such names were refused, is still found
// by its name and serves.
func TestRingNameShapedLikeSecretMadeBefore(t *testing.T) {
	long := strings.Repeat("d", 40)
	var id string
	svc, app := storedRing(t, func(tx kms.Txn, ringID string, rec map[string]json.RawMessage) error {
		if string(rec["name"]) != `"old"` {
			t.Fatalf("the ring's record %v has no name old: has the layout changed?", rec)
		}
		id = ringID
		rec["name"], rec["displayName"] = json.RawMessage(`"`+long+`"`), json.RawMessage(`"`+long+`"`)
		if err := tx.Delete([]byte("ring/name/old")); err != nil {
			return err
		}
		return tx.Set([]byte("ring/name/"+long), []byte(ringID))
	})
	if r, err := svc.GetKeyRing(app, kms.RingRef{Name: long}); err != nil || r.ID != id {
		t.Fatalf("GetKeyRing(a name made before) = %+v, %v", r, err)
	}
	enc, err := svc.Encrypt(app, kms.EncryptInput{RingName: long})
	if err != nil {
		t.Fatalf("Encrypt(a ring named before) = %v", err)
	}
	if _, err := svc.Decrypt(app, kms.DecryptInput{Hash: enc.Hash, Header: enc.Header}); err != nil {
		t.Fatalf("Decrypt(a ring named before) = %v", err)
	}
	// The ring's records name it: a ring found keeps its name in the trail.
	recs, err := svc.SearchActivity(app, kms.ActivityFilter{Ring: long}, kms.PageRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, r := range recs.Data {
		actions = append(actions, r.Action)
	}
	if !slices.Contains(actions, "keyring.read") || !slices.Contains(actions, "encrypt") || !slices.Contains(actions, "decrypt") {
		t.Errorf("the records of the ring named before are %q, want its read, encrypt and decrypt", actions)
	}
}
