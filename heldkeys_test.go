package kms_test

import (
	"context"
	"crypto/cipher"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"strings"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/keytype"
	"github.com/ringkms/kms/internal/vaultct"
	"github.com/ringkms/kms/kmstest"
	"golang.org/x/crypto/chacha20poly1305"
)

// openOffline opens the held key's ciphertext ct with key, the material
// of an AEAD key of type typ, as anyone holding the key could, without
// the service (internal/vaultct frames both AEAD types with their nonce
// first: TestKnownAnswer).
func openOffline(typ keytype.Type, ct kms.HeldSealed, key []byte) ([]byte, bool) {
	var aead cipher.AEAD
	var err error
	if typ == keytype.ChaCha20Poly1305 {
		aead, err = chacha20poly1305.New(key)
	} else {
		aead, err = vaultct.NewAEAD(key)
	}
	if err != nil {
		return nil, false
	}
	plain, err := vaultct.OpenAD(aead, ct.Ciphertext, ct.AssociatedData)
	return plain, err == nil
}

// secretsIn returns every byte string that the strings of the JSON of
// answers could carry: each string as it is, decoded from base64 (each
// alphabet, padded or not) or hex, and the blocks of the PEM it holds,
// as it is or decoded: every key the answers could hold, in whatever
// encoding.
func secretsIn(t *testing.T, answers ...any) [][]byte {
	t.Helper()
	var out [][]byte
	decoded := func(s string) {
		found := [][]byte{[]byte(s)}
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
			if b, err := enc.DecodeString(s); err == nil && len(b) > 0 {
				found = append(found, b)
			}
		}
		if b, err := hex.DecodeString(s); err == nil && len(b) > 0 {
			found = append(found, b)
		}
		for _, b := range found {
			out = append(out, b)
			for rest := b; ; {
				var block *pem.Block
				if block, rest = pem.Decode(rest); block == nil {
					break
				}
				out = append(out, block.Bytes)
			}
		}
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			decoded(v)
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for k, e := range v {
				decoded(k)
				walk(e)
			}
		}
	}
	for _, a := range answers {
		b, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		walk(v)
	}
	return out
}

// transitEncrypt encrypts plain with the transit key name as ctx, and
// returns its ciphertext.
func transitEncrypt(t *testing.T, svc *kms.Service, ctx context.Context, name, plain string) kms.HeldSealed {
	t.Helper()
	out, err := svc.EncryptWithHeldKey(ctx, kms.HeldEncryptInput{Name: name, Items: []kms.HeldPlaintext{{Plaintext: []byte(plain)}}})
	if err != nil || out[0].Err != nil {
		t.Fatalf("EncryptTransit(%s) = %+v, %v", name, out, err)
	}
	return kms.HeldSealed{KeyVersion: out[0].KeyVersion, Ciphertext: out[0].Ciphertext}
}

// ringRecords returns the records of action on ring, oldest first.
func ringRecords(t *testing.T, e *env, ring, action string) []*kms.Activity {
	t.Helper()
	l, err := e.svc.SearchActivity(e.root, kms.ActivityFilter{Ring: ring, Action: action}, kms.PageRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return l.Data
}

// askEveryAsymRoute calls, as who, every /asym route on the held key
// name, whose first version's key is keyID, as a caller that may read,
// rotate, create, configure and manage its keys but not export them, and
// returns the answers: each call must answer the key's metadata, held,
// without its key, and the exports must be refused. It rotates the key
// once, and leaves the first version's key enabled.
func askEveryAsymRoute(t *testing.T, e *env, who context.Context, name, keyID string) []any {
	t.Helper()
	var answers []any
	ref := kms.RingRef{Name: name}
	for _, ref := range []kms.RingRef{ref, {Name: strings.ToUpper(name)}} {
		k, err := e.svc.GetAsymKey(who, ref, keyID)
		if err != nil || !k.Held || k.KeyData.Key != "" || k.Version != 1 {
			t.Fatalf("GetAsymKey of a transit key = %+v, %v; want its metadata, held, without its key", k, err)
		}
		answers = append(answers, k)
	}
	r, err := e.svc.RotateAsym(who, kms.RotateInput{RingName: name})
	if err != nil || !r.Held || r.KeyData.Key != "" {
		t.Fatalf("RotateAsym of a transit key = %+v, %v; want its new key's metadata without its key", r, err)
	}
	answers = append(answers, r)
	if k, err := e.svc.GetAsymKey(who, ref, r.ID); err != nil || k.KeyData.Key != "" {
		t.Fatalf("GetAsymKey of the new version = %+v, %v", k, err)
	}
	_, err = e.svc.CreateAsymKeyRing(who, kms.CreateAsymKeyRingInput{Name: name})
	wantKind(t, "CreateAsymKeyRing over a transit key", err, kms.KindConflict)
	ring, err := e.svc.GetHeldKey(who, name)
	if err != nil {
		t.Fatal(err)
	}
	held, err := e.svc.ConfigureHeldKey(who, name, kms.HeldKeyConfig{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := e.svc.GetAsymConfig(who, ref)
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err = e.svc.SetAsymConfig(who, ref, cfg); err != nil {
		t.Fatal(err)
	}
	usage, err := e.svc.AsymKeyUsage(who, ref, keyID)
	if err != nil {
		t.Fatal(err)
	}
	answers = append(answers, ring, held, cfg, usage)
	// The first version's key, no longer active, through the states.
	scheduled, err := e.svc.DestroyAsymKey(who, ref, keyID, kms.DestroyKeyInput{})
	if err != nil {
		t.Fatal(err)
	}
	cancelled, err := e.svc.CancelDestroyAsymKey(who, ref, keyID)
	if err != nil {
		t.Fatal(err)
	}
	enabled, err := e.svc.SetAsymKeyState(who, ref, keyID, kms.KeyStateInput{State: kms.KeyEnabled})
	if err != nil {
		t.Fatal(err)
	}
	answers = append(answers, scheduled, cancelled, enabled)
	_, err = e.svc.ExportAsymKey(who, ref, keyID)
	wantKind(t, "ExportAsymKey without the export flag", err, kms.KindPermissionDenied)
	_, err = e.svc.ExportHeldKey(who, kms.ExportHeldKeyInput{Name: name})
	wantKind(t, "ExportTransitKey without the export flag", err, kms.KindPermissionDenied)
	return answers
}

// TestHeldKeysNotHandedOut: a credential that may read, rotate, create,
// configure and manage the keys of a transit key's ring (every flag of it
// but export) gets none of its keys through any /asym call: the answers
// are the keys' metadata, and nothing in them opens a ciphertext that
// another caller made with the key.
func TestHeldKeysNotHandedOut(t *testing.T) {
	e := newEnv(t)
	if _, err := e.svc.CreateHeldKey(e.root, kms.CreateHeldKeyInput{Name: "app"}); err != nil {
		t.Fatal(err)
	}
	app := e.as(t, kms.Flags{"keyring.app.encrypt": true})
	ct := transitEncrypt(t, e.svc, app, "app", "the application's secret")
	tk, err := e.svc.GetHeldKey(e.root, "app")
	if err != nil {
		t.Fatal(err)
	}
	snoop := e.as(t, kms.Flags{"keyring.app.read": true, "keyring.app.rotate": true, "keyring.app.create": true,
		"keyring.app.config": true, "keyring.app.keys": true})
	wild := e.as(t, kms.Flags{"keyring.app.*": true, "keyring.*.read": true, "keyring.*.rotate": true})

	var answers []any
	for _, who := range []context.Context{snoop, wild} {
		answers = append(answers, askEveryAsymRoute(t, e, who, "app", tk.KeyIDs[1])...)
	}
	// What the ring's own ciphertexts need: a key among the answers.
	for _, key := range secretsIn(t, answers...) {
		if _, ok := openOffline(keytype.AES256GCM96, ct, key); ok {
			t.Fatal("a key in the answers of the /asym calls opens the transit ciphertext offline")
		}
	}
	// Whoever holds the key opens it so (what the check above looks for).
	if _, ok := openOffline(keytype.AES256GCM96, ct, make([]byte, 32)); ok {
		t.Fatal("openOffline opens with any key")
	}
	// The ciphertext still decrypts through the service.
	dec := e.as(t, kms.Flags{"keyring.app.decrypt": true})
	if out, err := e.svc.DecryptWithHeldKey(dec, kms.HeldDecryptInput{Name: "app", Items: []kms.HeldSealed{ct}}); err != nil || string(out[0].Plaintext) != "the application's secret" {
		t.Fatalf("DecryptTransit = %+v, %v", out, err)
	}
	// Every refused export is recorded.
	if n := len(ringRecords(t, e, "app", "asym.key.export")) + len(ringRecords(t, e, "app", "transit.key.export")); n != 4 {
		t.Errorf("export records = %d, want the 4 refusals", n)
	}
}

// TestTransitRefusesHandedOutRing: a ring made by CreateAsymKeyRing, whose
// answer handed out its key and private key, is no transit key: every
// transit call on it is Invalid, saying why and what to do, and recorded;
// the list of transit keys leaves it out. So a caller that may only
// create rings cannot make one ahead of an application's first encrypt
// and hold its keys.
func TestTransitRefusesHandedOutRing(t *testing.T) {
	e := newEnv(t)
	creator := e.as(t, kms.Flags{"keyring.pre.create": true})
	made, err := e.svc.CreateAsymKeyRing(creator, kms.CreateAsymKeyRingInput{Name: "pre"})
	if err != nil || made.Key.KeyData.Key == "" || made.Key.Held {
		t.Fatalf("CreateAsymKeyRing = %+v, %v; want its key in the clear", made, err)
	}
	if _, err := e.svc.CreateHeldKey(e.root, kms.CreateHeldKeyInput{Name: "real"}); err != nil {
		t.Fatal(err)
	}
	app := e.as(t, kms.Flags{"keyring.pre.encrypt": true, "keyring.pre.create": true})
	wantHandedOut := func(what string, err error) {
		t.Helper()
		wantKind(t, what, err, kms.KindInvalid)
		if msg := err.Error(); !strings.Contains(msg, "POST /asym/keyrings") || !strings.Contains(msg, "another name") {
			t.Errorf("%s = %v; want it to say why (made by POST /asym/keyrings) and what to do (another name)", what, err)
		}
	}
	out, err := e.svc.EncryptWithHeldKey(app, kms.HeldEncryptInput{Name: "pre", Create: true, Items: []kms.HeldPlaintext{{Plaintext: []byte("x")}}})
	if err == nil {
		t.Fatalf("EncryptTransit on a ring made by CreateAsymKeyRing = %+v", out)
	}
	wantHandedOut("EncryptTransit", err)
	_, err = e.svc.CreateHeldKey(e.root, kms.CreateHeldKeyInput{Name: "pre"})
	wantHandedOut("CreateTransitKey", err)
	_, err = e.svc.GetHeldKey(e.root, "pre")
	wantHandedOut("GetTransitKey", err)
	_, err = e.svc.DecryptWithHeldKey(e.root, kms.HeldDecryptInput{Name: "pre", Items: []kms.HeldSealed{{KeyVersion: 1, Ciphertext: []byte{0}}}})
	wantHandedOut("DecryptTransit", err)
	_, err = e.svc.RewrapWithHeldKey(e.root, kms.HeldRewrapInput{Name: "pre", Items: []kms.HeldRewrapItem{{HeldSealed: kms.HeldSealed{KeyVersion: 1, Ciphertext: []byte{0}}}}})
	wantHandedOut("RewrapTransit", err)
	_, err = e.svc.GenerateHeldDataKey(e.root, kms.HeldDataKeyInput{Name: "pre"})
	wantHandedOut("GenerateTransitDataKey", err)
	_, err = e.svc.RotateHeldKey(e.root, "pre")
	wantHandedOut("RotateTransitKey", err)
	yes := true
	_, err = e.svc.ConfigureHeldKey(e.root, "pre", kms.HeldKeyConfig{DeletionAllowed: &yes})
	wantHandedOut("ConfigureTransitKey", err)
	wantHandedOut("DeleteTransitKey", e.svc.DeleteHeldKey(e.root, "pre"))
	_, err = e.svc.ExportHeldKey(e.root, kms.ExportHeldKeyInput{Name: "pre"})
	wantHandedOut("ExportTransitKey", err)
	_, err = e.svc.ExportAsymKey(e.root, kms.RingRef{Name: "pre"}, made.Key.ID)
	wantKind(t, "ExportAsymKey of a ring made by CreateAsymKeyRing", err, kms.KindInvalid)
	if names, err := e.svc.ListHeldKeys(e.root); err != nil || strings.Join(names, ",") != "real" {
		t.Errorf("ListTransitKeys = %v, %v; want [real]", names, err)
	}
	recs := ringRecords(t, e, "pre", "transit.encrypt")
	if len(recs) != 1 || recs[0].Props["result"] != "invalid" {
		t.Errorf("transit.encrypt records of the ring = %+v, want one, invalid", recs)
	}
	// Nothing was written to the ring: its key is still its only one.
	if k, err := e.svc.GetAsymKey(e.root, kms.RingRef{Name: "pre"}, made.Key.ID); err != nil || k.KeyData.Key != made.Key.KeyData.Key || k.Version != 1 {
		t.Errorf("GetAsymKey after the refusals = %+v, %v", k, err)
	}
}

// TestExportNeedsExportableAndFlag: an export answers a transit key's
// versions only when the key is exportable and the caller holds
// keyring.<name>.export; each missing one is refused and recorded. What
// it answers opens the key's ciphertexts offline.
func TestExportNeedsExportableAndFlag(t *testing.T) {
	e := newEnv(t)
	if _, err := e.svc.CreateHeldKey(e.root, kms.CreateHeldKeyInput{Name: "closed"}); err != nil {
		t.Fatal(err)
	}
	k, err := e.svc.CreateHeldKey(e.root, kms.CreateHeldKeyInput{Name: "open", Exportable: true})
	if err != nil || !k.Exportable {
		t.Fatalf("CreateTransitKey(exportable) = %+v, %v", k, err)
	}
	if recs := ringRecords(t, e, "open", "transit.key.create"); len(recs) != 1 || recs[0].Props["exportable"] != true {
		t.Errorf("create record = %+v, want exportable true in its props", recs)
	}
	ct := transitEncrypt(t, e.svc, e.root, "open", "exported")

	closed, err := e.svc.GetHeldKey(e.root, "closed")
	if err != nil {
		t.Fatal(err)
	}

	// The flag, without exportable: refused, recorded.
	exporter := e.as(t, kms.Flags{"keyring.closed.export": true, "keyring.open.export": true})
	_, err = e.svc.ExportHeldKey(exporter, kms.ExportHeldKeyInput{Name: "closed"})
	wantKind(t, "ExportTransitKey of a key that is not exportable", err, kms.KindInvalid)
	if kms.ErrorMessage(err) != "key is not exportable" {
		t.Errorf("ExportTransitKey of a key that is not exportable = %q", kms.ErrorMessage(err))
	}
	_, err = e.svc.ExportAsymKey(exporter, kms.RingRef{Name: "closed"}, closed.KeyIDs[1])
	wantKind(t, "ExportAsymKey of a key that is not exportable", err, kms.KindInvalid)
	wantRefused := func(ring, action, result string, n int) {
		t.Helper()
		var got int
		for _, a := range ringRecords(t, e, ring, action) {
			if !a.Valid && a.Props["result"] == result {
				got++
			}
		}
		if got != n {
			t.Errorf("%s records of %s refused with %s = %d, want %d", action, ring, result, got, n)
		}
	}
	wantRefused("closed", "transit.key.export", "invalid", 1)
	wantRefused("closed", "asym.key.export", "invalid", 1)

	// Exportable, without the flag: refused, recorded, whatever else the
	// caller holds.
	for _, flags := range []kms.Flags{
		{"keyring.open.read": true, "keyring.open.rotate": true, "keyring.open.create": true, "keyring.open.config": true},
		{"keyring.open.*": true},
		{"keyring.closed.export": true},
	} {
		who := e.as(t, flags)
		_, err := e.svc.ExportHeldKey(who, kms.ExportHeldKeyInput{Name: "open"})
		wantKind(t, "ExportTransitKey without the flag", err, kms.KindPermissionDenied)
		_, err = e.svc.ExportAsymKey(who, kms.RingRef{Name: "open"}, k.KeyIDs[1])
		wantKind(t, "ExportAsymKey without the flag", err, kms.KindPermissionDenied)
	}
	wantRefused("open", "transit.key.export", "permission_denied", 3)
	wantRefused("open", "asym.key.export", "permission_denied", 3)

	// Both: the keys, which open the key's ciphertexts offline.
	for _, who := range []context.Context{exporter, e.as(t, kms.Flags{"keyring.*.export": true}), e.root} {
		out, err := e.svc.ExportHeldKey(who, kms.ExportHeldKeyInput{Name: "open"})
		if err != nil || len(out.Keys) != 1 || out.Keys[0].Version != 1 || out.Keys[0].KeyID != k.KeyIDs[1] {
			t.Fatalf("ExportTransitKey = %+v, %v", out, err)
		}
		if plain, ok := openOffline(keytype.AES256GCM96, ct, out.Keys[0].Key); !ok || string(plain) != "exported" {
			t.Fatal("the exported key does not open the key's ciphertext")
		}
		ak, err := e.svc.ExportAsymKey(who, kms.RingRef{Name: "open"}, k.KeyIDs[1])
		if err != nil || ak.KeyData.Key != base64.StdEncoding.EncodeToString(out.Keys[0].Key) || ak.Version != 1 {
			t.Fatalf("ExportAsymKey = %+v, %v; want the key ExportTransitKey answered", ak, err)
		}
	}
	granted := 0
	for _, a := range ringRecords(t, e, "open", "transit.key.export") {
		if a.Valid && a.Props["result"] == "ok" {
			granted++
			if v, _ := a.Props["versions"].([]any); len(v) != 1 {
				t.Errorf("export record %+v, want the version it answered", a.Props)
			}
		}
	}
	if granted != 3 {
		t.Errorf("granted transit.key.export records = %d, want 3", granted)
	}

	// Versions: every enabled one from the minimum decryption version on,
	// or one; below the minimum, none.
	for range 2 {
		if _, err := e.svc.RotateHeldKey(e.root, "open"); err != nil {
			t.Fatal(err)
		}
	}
	two := 2
	if _, err := e.svc.ConfigureHeldKey(e.root, "open", kms.HeldKeyConfig{MinDecryptionVersion: &two}); err != nil {
		t.Fatal(err)
	}
	all, err := e.svc.ExportHeldKey(exporter, kms.ExportHeldKeyInput{Name: "open"})
	if err != nil || len(all.Keys) != 2 || all.Keys[0].Version != 2 || all.Keys[1].Version != 3 || all.Name != "open" {
		t.Fatalf("ExportTransitKey of every version = %+v, %v; want versions 2 and 3", all, err)
	}
	latest, err := e.svc.ExportHeldKey(exporter, kms.ExportHeldKeyInput{Name: "open", Latest: true})
	if err != nil || len(latest.Keys) != 1 || latest.Keys[0].Version != 3 {
		t.Fatalf("ExportTransitKey(latest) = %+v, %v", latest, err)
	}
	_, err = e.svc.ExportHeldKey(exporter, kms.ExportHeldKeyInput{Name: "open", Version: 1})
	wantKind(t, "ExportTransitKey below the minimum decryption version", err, kms.KindInvalid)
	_, err = e.svc.ExportAsymKey(exporter, kms.RingRef{Name: "open"}, k.KeyIDs[1])
	wantKind(t, "ExportAsymKey below the minimum decryption version", err, kms.KindInvalid)
	if _, err := e.svc.SetAsymKeyState(e.root, kms.RingRef{Name: "open"}, all.Keys[0].KeyID, kms.KeyStateInput{State: kms.KeyDisabled}); err != nil {
		t.Fatal(err)
	}
	_, err = e.svc.ExportHeldKey(exporter, kms.ExportHeldKeyInput{Name: "open", Version: 2})
	wantKind(t, "ExportTransitKey of a disabled version", err, kms.KindDisabled)
	if all, err := e.svc.ExportHeldKey(exporter, kms.ExportHeldKeyInput{Name: "open"}); err != nil || len(all.Keys) != 1 || all.Keys[0].Version != 3 {
		t.Errorf("ExportTransitKey of every version, one disabled = %+v, %v; want version 3", all, err)
	}
}

// TestExportableCannotBeUnset: a key is made exportable by its
// configuration too, recorded; an attempt to unset it is Invalid and
// changes nothing.
func TestExportableCannotBeUnset(t *testing.T) {
	e := newEnv(t)
	if _, err := e.svc.CreateHeldKey(e.root, kms.CreateHeldKeyInput{Name: "k"}); err != nil {
		t.Fatal(err)
	}
	yes, no := true, false
	if k, err := e.svc.ConfigureHeldKey(e.root, "k", kms.HeldKeyConfig{Exportable: &no}); err != nil || k.Exportable {
		t.Fatalf("ConfigureTransitKey(exportable false) of a key that is not = %+v, %v", k, err)
	}
	if k, err := e.svc.ConfigureHeldKey(e.root, "k", kms.HeldKeyConfig{Exportable: &yes}); err != nil || !k.Exportable {
		t.Fatalf("ConfigureTransitKey(exportable) = %+v, %v", k, err)
	}
	recs := ringRecords(t, e, "k", "transit.key.config")
	if len(recs) != 2 || recs[0].Props["exportable"] != false || recs[1].Props["exportable"] != true {
		t.Errorf("config records = %+v, want exportable false then true in their props", recs)
	}
	_, err := e.svc.ConfigureHeldKey(e.root, "k", kms.HeldKeyConfig{Exportable: &no, DeletionAllowed: &yes})
	wantKind(t, "ConfigureTransitKey(exportable false) of an exportable key", err, kms.KindInvalid)
	if !strings.Contains(err.Error(), "cannot be unset") || !strings.Contains(err.Error(), "keyring.k.export") {
		t.Errorf("unset refused with %q; want it to say it cannot be unset, and to name the flag to take away", err)
	}
	if k, err := e.svc.GetHeldKey(e.root, "k"); err != nil || !k.Exportable || k.DeletionAllowed {
		t.Errorf("GetTransitKey after the refusal = %+v, %v; want it exportable, and nothing changed", k, err)
	}
	if recs := ringRecords(t, e, "k", "transit.key.config"); len(recs) != 3 || recs[2].Props["result"] != "invalid" {
		t.Errorf("config records = %+v, want the refusal recorded", recs)
	}
}

// editRingRecord edits the stored record of the ring name in st as JSON.
func editRingRecord(t *testing.T, st kms.Store, name string, edit func(m map[string]any)) {
	t.Helper()
	id := asymRingID(t, st, name)
	err := st.Update(context.Background(), func(tx kms.Txn) error {
		v, err := tx.Get([]byte("ring/id/" + id))
		if err != nil {
			return err
		}
		var m map[string]any
		if err := json.Unmarshal(v, &m); err != nil {
			return err
		}
		edit(m)
		b, err := json.Marshal(m)
		if err != nil {
			return err
		}
		return tx.Set([]byte("ring/id/"+id), b)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestHeldRingsOfEarlierRelease: rings are marked at their creation as
// made by transit or by CreateAsymKeyRing; a ring record as the release
// before the mark wrote it (no origin) reads as held when it has transit
// settings, as every ring made by transit then had, and as handed out
// otherwise.
func TestHeldRingsOfEarlierRelease(t *testing.T) {
	st := kmstest.MemoryStore(t)
	opts := kms.Options{MasterKey: kms.GenerateMasterKey()}
	svc, err := kms.New(st, opts)
	if err != nil {
		t.Fatal(err)
	}
	root := bootstrapRoot(t, svc)
	if _, err := svc.CreateHeldKey(root, kms.CreateHeldKeyInput{Name: "was-transit"}); err != nil {
		t.Fatal(err)
	}
	asym, err := svc.CreateAsymKeyRing(root, kms.CreateAsymKeyRingInput{Name: "was-asym"})
	if err != nil {
		t.Fatal(err)
	}
	svc.Close()
	for name, origin := range map[string]string{"was-transit": "transit", "was-asym": "asym"} {
		editRingRecord(t, st, name, func(m map[string]any) {
			if m["origin"] != origin {
				t.Errorf("ring %s was stored with origin %v, want %q", name, m["origin"], origin)
			}
			delete(m, "origin")
		})
	}
	svc, err = kms.New(st, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		svc.Close()
		st.Close()
	})
	tk, err := svc.GetHeldKey(root, "was-transit")
	if err != nil {
		t.Fatalf("GetTransitKey of a transit key without origin = %v", err)
	}
	if k, err := svc.GetAsymKey(root, kms.RingRef{Name: "was-transit"}, tk.KeyIDs[1]); err != nil || !k.Held || k.KeyData.Key != "" {
		t.Errorf("GetAsymKey of a transit key without origin = %+v, %v; want it held, without its key", k, err)
	}
	_, err = svc.EncryptWithHeldKey(root, kms.HeldEncryptInput{Name: "was-asym", Items: []kms.HeldPlaintext{{Plaintext: []byte("x")}}})
	wantKind(t, "EncryptTransit of an /asym ring without origin", err, kms.KindInvalid)
	if k, err := svc.GetAsymKey(root, kms.RingRef{Name: "was-asym"}, asym.Key.ID); err != nil || k.Held || k.KeyData.Key != asym.Key.KeyData.Key {
		t.Errorf("GetAsymKey of an /asym ring without origin = %+v, %v; want its key", k, err)
	}
}
