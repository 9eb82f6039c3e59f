package kms_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ringkms/kms"
)

// TestHeldKeyAliases: an alias names its key wherever a key's name is
// taken (encrypt, decrypt, sign), with the key's flags, and moves to
// another key of the same use; deleted, it names nothing, and its key
// stays.
func TestHeldKeyAliases(t *testing.T) {
	e := newEnv(t)
	for _, in := range []kms.CreateHeldKeyInput{{Name: "a"}, {Name: "b", Type: "chacha20-poly1305"}, {Name: "sig", Type: "ed25519"}} {
		if _, err := e.svc.CreateHeldKey(e.root, in); err != nil {
			t.Fatal(err)
		}
	}
	configA := e.as(t, kms.Flags{"keyring.a.config": true})
	_, err := e.svc.CreateHeldKeyAlias(e.as(t, kms.Flags{"keyring.b.config": true}), "alias/app", "a")
	wantKind(t, "CreateHeldKeyAlias without keyring.a.config", err, kms.KindPermissionDenied)
	al, err := e.svc.CreateHeldKeyAlias(configA, "Alias/App", "A")
	if err != nil || al.Name != "Alias/App" || al.Target != "a" || al.TargetID == "" || al.CreatedAt.IsZero() {
		t.Fatalf("CreateHeldKeyAlias = %+v, %v", al, err)
	}
	_, err = e.svc.CreateHeldKeyAlias(e.root, "alias/APP", "b")
	wantKind(t, "CreateHeldKeyAlias of an alias that exists (in another case)", err, kms.KindConflict)

	useA := e.as(t, kms.Flags{"keyring.a.encrypt": true, "keyring.a.decrypt": true})
	ct := transitEncrypt(t, e.svc, useA, "alias/app", "hello")
	for _, name := range []string{"a", "alias/app", "ALIAS/APP"} {
		out, err := e.svc.DecryptWithHeldKey(useA, kms.HeldDecryptInput{Name: name, Items: []kms.HeldSealed{ct}})
		if err != nil || out[0].Err != nil || string(out[0].Plaintext) != "hello" {
			t.Fatalf("DecryptWithHeldKey(%s) of what the alias sealed = %+v, %v", name, out, err)
		}
	}
	_, err = e.svc.EncryptWithHeldKey(e.as(t, kms.Flags{"keyring.b.encrypt": true, "keyring.alias.encrypt": true}),
		kms.HeldEncryptInput{Name: "alias/app", Items: []kms.HeldPlaintext{{Plaintext: []byte("x")}}})
	wantKind(t, "EncryptWithHeldKey(alias of a) with keyring.b.encrypt", err, kms.KindPermissionDenied)
	if !strings.Contains(kms.ErrorMessage(err), "keyring.a.encrypt") {
		t.Errorf("the refusal of a call naming an alias = %v, want it to name the key's flag", err)
	}
	if recs := ringRecords(t, e, "a", "transit.encrypt"); len(recs) != 2 || !recs[0].Valid || recs[1].Valid {
		t.Fatalf("transit.encrypt records of key a = %+v, want the call through the alias and the refusal", recs)
	}

	if _, err := e.svc.CreateHeldKeyAlias(e.root, "alias/signer", "sig"); err != nil {
		t.Fatal(err)
	}
	signed, err := e.svc.SignWithHeldKey(e.root, kms.HeldSignInput{Name: "alias/signer", Inputs: [][]byte{[]byte("doc")}})
	if err != nil || signed[0].Err != nil {
		t.Fatalf("SignWithHeldKey(alias) = %+v, %v", signed, err)
	}
	checked, err := e.svc.VerifyWithHeldKey(e.root, kms.HeldVerifyInput{Name: "sig", Items: []kms.HeldCheck{{KeyVersion: 1, Input: []byte("doc"), Signature: signed[0].Signature}}})
	if err != nil || !checked[0].Valid {
		t.Fatalf("VerifyWithHeldKey of what the alias signed = %+v, %v", checked, err)
	}

	// Moved: the alias now names b, for callers of b.
	_, err = e.svc.UpdateHeldKeyAlias(e.as(t, kms.Flags{"keyring.b.config": true}), "alias/app", "b")
	wantKind(t, "UpdateHeldKeyAlias without keyring.a.config", err, kms.KindPermissionDenied)
	_, err = e.svc.UpdateHeldKeyAlias(configA, "alias/app", "b")
	wantKind(t, "UpdateHeldKeyAlias without keyring.b.config", err, kms.KindPermissionDenied)
	_, err = e.svc.UpdateHeldKeyAlias(e.root, "alias/app", "alias/signer")
	wantKind(t, "UpdateHeldKeyAlias to a key that signs", err, kms.KindInvalid)
	moved, err := e.svc.UpdateHeldKeyAlias(e.as(t, kms.Flags{"keyring.a.config": true, "keyring.b.config": true}), "alias/app", "b")
	if err != nil || moved.Target != "b" || !moved.CreatedAt.Equal(al.CreatedAt) {
		t.Fatalf("UpdateHeldKeyAlias = %+v, %v", moved, err)
	}
	ct = transitEncrypt(t, e.svc, e.root, "alias/app", "to b")
	out, err := e.svc.DecryptWithHeldKey(e.root, kms.HeldDecryptInput{Name: "b", Items: []kms.HeldSealed{ct}})
	if err != nil || out[0].Err != nil || string(out[0].Plaintext) != "to b" {
		t.Fatalf("DecryptWithHeldKey(b) of what the moved alias sealed = %+v, %v", out, err)
	}
	if recs := ringRecords(t, e, "b", "transit.alias.update"); len(recs) != 2 || recs[0].Valid || recs[1].Props["previousKey"] != "a" || recs[1].Props["alias"] != "alias/app" {
		t.Fatalf("transit.alias.update records of b = %+v, want the refusal for want of keyring.b.config and the move", recs)
	}

	// Disabled through its alias, the key refuses its uses by either name.
	if _, err := e.svc.DisableHeldKey(e.root, "alias/app"); err != nil {
		t.Fatal(err)
	}
	_, err = e.svc.GenerateHeldDataKey(e.root, kms.HeldDataKeyInput{Name: "b"})
	wantState(t, "GenerateHeldDataKey(b, disabled through its alias)", err, kms.KindDisabled, kms.HeldKeyDisabled)
	if _, err := e.svc.EnableHeldKey(e.root, "b"); err != nil {
		t.Fatal(err)
	}

	err = e.svc.DeleteHeldKeyAlias(configA, "alias/app")
	wantKind(t, "DeleteHeldKeyAlias without keyring.b.config", err, kms.KindPermissionDenied)
	if err := e.svc.DeleteHeldKeyAlias(e.as(t, kms.Flags{"keyring.b.config": true}), "alias/app"); err != nil {
		t.Fatal(err)
	}
	_, err = e.svc.EncryptWithHeldKey(e.root, kms.HeldEncryptInput{Name: "alias/app", Items: []kms.HeldPlaintext{{Plaintext: []byte("x")}}})
	wantKind(t, "EncryptWithHeldKey(deleted alias)", err, kms.KindNotFound)
	err = e.svc.DeleteHeldKeyAlias(e.root, "alias/app")
	wantKind(t, "DeleteHeldKeyAlias again", err, kms.KindNotFound)
	if _, err := e.svc.GetHeldKey(e.root, "b"); err != nil {
		t.Fatalf("GetHeldKey of a key whose alias was deleted = %v", err)
	}

	// Deleting a key deletes its aliases.
	if _, err := e.svc.ConfigureHeldKey(e.root, "alias/signer", kms.HeldKeyConfig{DeletionAllowed: ptr(true)}); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.DeleteHeldKey(e.root, "alias/signer"); err != nil {
		t.Fatal(err)
	}
	_, err = e.svc.GetHeldKey(e.root, "alias/signer")
	wantKind(t, "GetHeldKey(alias of a deleted key)", err, kms.KindNotFound)
	if _, err := e.svc.CreateHeldKeyAlias(e.root, "alias/signer", "a"); err != nil {
		t.Fatalf("CreateHeldKeyAlias of the name of a deleted key's alias = %v", err)
	}
}

// TestHeldKeyAliasNames: aliases are checked, and aliases and the names
// of key rings never meet; a key has at most 50 aliases.
func TestHeldKeyAliasNames(t *testing.T) {
	e := newEnv(t)
	if _, err := e.svc.CreateHeldKey(e.root, kms.CreateHeldKeyInput{Name: "a"}); err != nil {
		t.Fatal(err)
	}
	e.ring(t, "ks")
	for _, bad := range []string{"", strings.Repeat("x", 257), "alias/with space", "alias/é", "alias.dot", "rk_abcdef", "RK_abcdef"} {
		_, err := e.svc.CreateHeldKeyAlias(e.root, bad, "a")
		wantKind(t, fmt.Sprintf("CreateHeldKeyAlias(%q)", bad), err, kms.KindInvalid)
	}
	if _, err := e.svc.CreateHeldKeyAlias(e.root, "/"+strings.Repeat("x", 255), "a"); err != nil {
		t.Fatalf("an alias of 256 characters = %v", err)
	}
	for _, taken := range []string{"A", "ks"} {
		_, err := e.svc.CreateHeldKeyAlias(e.root, taken, "a")
		wantKind(t, "CreateHeldKeyAlias(the name of ring "+taken+")", err, kms.KindConflict)
	}
	if _, err := e.svc.CreateHeldKeyAlias(e.root, "app", "a"); err != nil {
		t.Fatal(err)
	}
	for name, call := range map[string]func() error{
		"CreateHeldKey": func() error { _, err := e.svc.CreateHeldKey(e.root, kms.CreateHeldKeyInput{Name: "App"}); return err },
		"CreateKeyRing": func() error { _, err := e.svc.CreateKeyRing(e.root, kms.CreateKeyRingInput{Name: "app"}); return err },
		"CreateAsymKeyRing": func() error {
			_, err := e.svc.CreateAsymKeyRing(e.root, kms.CreateAsymKeyRingInput{Name: "app"})
			return err
		},
	} {
		wantKind(t, name+" named as an alias", call(), kms.KindConflict)
	}
	for _, target := range []string{"ks", "none", "alias/none"} {
		_, err := e.svc.CreateHeldKeyAlias(e.root, "alias/x", target)
		if k := kms.ErrorKind(err); k != kms.KindInvalid && k != kms.KindNotFound {
			t.Errorf("CreateHeldKeyAlias to %s = %v, want it refused", target, err)
		}
	}
	// An alias as a target names its key.
	if al, err := e.svc.CreateHeldKeyAlias(e.root, "alias/again", "app"); err != nil || al.Target != "a" {
		t.Fatalf("CreateHeldKeyAlias to an alias = %+v, %v; want it to name the key", al, err)
	}
	for i := 3; i < 50; i++ {
		if _, err := e.svc.CreateHeldKeyAlias(e.root, fmt.Sprint("alias/", i), "a"); err != nil {
			t.Fatal(err)
		}
	}
	_, err := e.svc.CreateHeldKeyAlias(e.root, "alias/51st", "a")
	wantKind(t, "a 51st alias", err, kms.KindLimit)

	// A secret pasted where a key's name goes is not quoted back.
	pasted := "_" + strings.Repeat("Zq9-", 11)
	_, err = e.svc.EncryptWithHeldKey(e.root, kms.HeldEncryptInput{Name: pasted, Items: []kms.HeldPlaintext{{Plaintext: []byte("x")}}})
	wantKind(t, "EncryptWithHeldKey(a name shaped like a secret)", err, kms.KindNotFound)
	if strings.Contains(err.Error(), pasted) {
		t.Errorf("the error of a name shaped like a secret quotes it: %v", err)
	}
}

// TestListHeldKeyAliases: the aliases, all or a key's, page in the order
// of their names, each once; listing every alias needs keyring.*.read,
// a key's keyring.<key>.read.
func TestListHeldKeyAliases(t *testing.T) {
	e := newEnv(t)
	var all, ofA []string
	for _, key := range []string{"a", "b"} {
		if _, err := e.svc.CreateHeldKey(e.root, kms.CreateHeldKeyInput{Name: key}); err != nil {
			t.Fatal(err)
		}
		for i := range 4 {
			alias := fmt.Sprintf("alias/%d%s", i, key)
			if _, err := e.svc.CreateHeldKeyAlias(e.root, alias, key); err != nil {
				t.Fatal(err)
			}
			all = append(all, alias)
			if key == "a" {
				ofA = append(ofA, alias)
			}
		}
	}
	slices.Sort(all)
	for _, c := range []struct {
		target string
		want   []string
	}{{"", all}, {"a", ofA}, {"alias/0a", ofA}} {
		var got []string
		pages := 0
		eachPage(t, 3, func(req kms.PageRequest) (*kms.List[*kms.HeldKeyAlias], error) {
			return e.svc.ListHeldKeyAliases(e.root, c.target, req)
		}, func(l *kms.List[*kms.HeldKeyAlias]) {
			pages++
			for _, a := range l.Data {
				got = append(got, a.Name)
				if !strings.HasSuffix(a.Name, a.Target) {
					t.Errorf("alias %s names %s", a.Name, a.Target)
				}
			}
		})
		if !slices.Equal(got, c.want) || pages != (len(c.want)+2)/3 {
			t.Errorf("ListHeldKeyAliases(%q) in pages of 3 = %q in %d pages, want %q", c.target, got, pages, c.want)
		}
	}
	readA := e.as(t, kms.Flags{"keyring.a.read": true})
	_, err := e.svc.ListHeldKeyAliases(readA, "", kms.PageRequest{})
	wantKind(t, "ListHeldKeyAliases(all) with keyring.a.read", err, kms.KindPermissionDenied)
	_, err = e.svc.ListHeldKeyAliases(readA, "b", kms.PageRequest{})
	wantKind(t, "ListHeldKeyAliases(b) with keyring.a.read", err, kms.KindPermissionDenied)
	if l, err := e.svc.ListHeldKeyAliases(readA, "a", kms.PageRequest{}); err != nil || len(l.Data) != 4 {
		t.Fatalf("ListHeldKeyAliases(a) with keyring.a.read = %+v, %v", l, err)
	}
	l, err := e.svc.ListHeldKeyAliases(e.root, "a", kms.PageRequest{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.svc.ListHeldKeyAliases(e.root, "b", kms.PageRequest{Limit: 2, Cursor: l.Pagination.NextCursor})
	wantKind(t, "a cursor of a's aliases for b's", err, kms.KindInvalid)
}
