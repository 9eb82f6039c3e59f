package kms_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/kmstest"
)

// heldUses are calls of every use of two held keys: app, an exportable
// aes256-gcm96 key, and sig, an ed25519 key, named by name (a key's name
// or an alias of it) as ctx, with what they made while they could
// (a ciphertext, a signature, an HMAC); each answers the error of the
// call or of its item.
func heldUses(t *testing.T, e *env, ctx context.Context, app, sig string) map[string]func() error {
	t.Helper()
	ct := transitEncrypt(t, e.svc, e.root, app, "secret")
	signed, err := e.svc.SignWithHeldKey(e.root, kms.HeldSignInput{Name: sig, Inputs: [][]byte{[]byte("doc")}})
	if err != nil || signed[0].Err != nil {
		t.Fatalf("SignWithHeldKey = %+v, %v", signed, err)
	}
	macs, err := e.svc.HMACWithHeldKey(e.root, kms.HeldSignInput{Name: app, Inputs: [][]byte{[]byte("doc")}})
	if err != nil || macs[0].Err != nil {
		t.Fatalf("HMACWithHeldKey = %+v, %v", macs, err)
	}
	appKey, err := e.svc.GetHeldKey(e.root, app)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]func() error{
		"encrypt": func() error {
			return failed(e.svc.EncryptWithHeldKey(ctx, kms.HeldEncryptInput{Name: app, Items: []kms.HeldPlaintext{{Plaintext: []byte("x")}}}))
		},
		"decrypt": func() error {
			return failed(e.svc.DecryptWithHeldKey(ctx, kms.HeldDecryptInput{Name: app, Items: []kms.HeldSealed{ct}}))
		},
		"rewrap": func() error {
			return failed(e.svc.RewrapWithHeldKey(ctx, kms.HeldRewrapInput{Name: app, Items: []kms.HeldRewrapItem{{HeldSealed: ct}}}))
		},
		"datakey": func() error {
			_, err := e.svc.GenerateHeldDataKey(ctx, kms.HeldDataKeyInput{Name: app})
			return err
		},
		"hmac": func() error {
			return failed(e.svc.HMACWithHeldKey(ctx, kms.HeldSignInput{Name: app, Inputs: [][]byte{[]byte("doc")}}))
		},
		"verify hmac": func() error {
			return failed(e.svc.VerifyHMACWithHeldKey(ctx, kms.HeldVerifyInput{Name: app, Items: []kms.HeldCheck{{KeyVersion: 1, Input: []byte("doc"), Signature: macs[0].Signature}}}))
		},
		"sign": func() error {
			return failed(e.svc.SignWithHeldKey(ctx, kms.HeldSignInput{Name: sig, Inputs: [][]byte{[]byte("doc")}}))
		},
		"verify": func() error {
			return failed(e.svc.VerifyWithHeldKey(ctx, kms.HeldVerifyInput{Name: sig, Items: []kms.HeldCheck{{KeyVersion: 1, Input: []byte("doc"), Signature: signed[0].Signature}}}))
		},
		"ready": func() error {
			_, err := e.svc.HeldKeyReady(ctx, app)
			return err
		},
		"export": func() error {
			out, err := e.svc.ExportHeldKey(ctx, kms.ExportHeldKeyInput{Name: app})
			if err == nil {
				out.Clear()
			}
			return err
		},
		"export public key": func() error {
			_, err := e.svc.ExportHeldKey(ctx, kms.ExportHeldKeyInput{Name: sig, Kind: kms.ExportPublicKey})
			return err
		},
		"export asym": func() error {
			_, err := e.svc.ExportAsymKey(ctx, kms.RingRef{Name: appKey.Name}, appKey.KeyIDs[1])
			return err
		},
	}
}

// failed is the error of a call of one item: the call's, or its item's
// (the field Err of the held keys' answers).
func failed[T any](out []T, err error) error {
	if err != nil || len(out) == 0 {
		return err
	}
	itemErr, _ := reflect.ValueOf(out[0]).FieldByName("Err").Interface().(error)
	return itemErr
}

// makeUsedKeys makes app and sig, the keys of heldUses.
func makeUsedKeys(t *testing.T, e *env) {
	t.Helper()
	for _, in := range []kms.CreateHeldKeyInput{{Name: "app", Exportable: true}, {Name: "sig", Type: "ed25519"}} {
		if _, err := e.svc.CreateHeldKey(e.root, in); err != nil {
			t.Fatal(err)
		}
	}
}

// wantUses runs every use and wants each to fail with kind and state
// (KindNone: to succeed).
func wantUses(t *testing.T, uses map[string]func() error, kind kms.Kind, state, message string) {
	t.Helper()
	for name, use := range uses {
		err := use()
		if kind == kms.KindNone {
			if err != nil {
				t.Errorf("%s = %v, want it to work", name, err)
			}
			continue
		}
		if kms.ErrorKind(err) != kind || kms.AsError(err).State != state || !strings.Contains(kms.ErrorMessage(err), message) {
			t.Errorf("%s = %v, want kind %s, state %q, saying %q", name, err, kind, state, message)
		}
	}
}

// TestHeldKeyDisabled: a held key disabled as a whole refuses every use
// (Disabled, recorded as a refusal) and every rotation, and still answers
// its reads, which say so; enabled again, it serves as before, the
// ciphertexts it made included.
func TestHeldKeyDisabled(t *testing.T) {
	e := newEnv(t)
	makeUsedKeys(t, e)
	uses := heldUses(t, e, e.root, "app", "sig")
	wantUses(t, uses, kms.KindNone, "", "")

	keys := e.as(t, kms.Flags{"keyring.app.read": true, "keyring.app.config": true, "keyring.app.rotate": true})
	_, err := e.svc.DisableHeldKey(keys, "app")
	wantKind(t, "DisableHeldKey without keyring.app.keys", err, kms.KindPermissionDenied)
	for _, name := range []string{"app", "SIG"} {
		k, err := e.svc.DisableHeldKey(e.as(t, kms.Flags{"keyring.*.keys": true}), name)
		if err != nil || k.State != kms.HeldKeyDisabled {
			t.Fatalf("DisableHeldKey(%s) = %+v, %v; want disabled", name, k, err)
		}
	}
	if k, err := e.svc.DisableHeldKey(e.root, "app"); err != nil || k.State != kms.HeldKeyDisabled {
		t.Fatalf("DisableHeldKey of a disabled key = %+v, %v; want it left disabled", k, err)
	}
	wantUses(t, uses, kms.KindDisabled, kms.HeldKeyDisabled, "is disabled")
	_, err = e.svc.RotateHeldKey(e.root, "app")
	wantState(t, "RotateHeldKey(disabled)", err, kms.KindDisabled, kms.HeldKeyDisabled)
	_, err = e.svc.RotateAsym(e.root, kms.RotateInput{RingName: "app"})
	wantState(t, "RotateAsym(disabled)", err, kms.KindDisabled, kms.HeldKeyDisabled)

	k, err := e.svc.GetHeldKey(keys, "app")
	if err != nil || k.State != kms.HeldKeyDisabled || k.LatestVersion != 1 || !k.DeletionDate.IsZero() {
		t.Fatalf("GetHeldKey(disabled) = %+v, %v; want it answered, disabled, not rotated", k, err)
	}
	if _, err := e.svc.ConfigureHeldKey(keys, "app", kms.HeldKeyConfig{RotationPeriod: ptr(2 * time.Hour)}); err != nil {
		t.Fatalf("ConfigureHeldKey(disabled) = %v; want a disabled key configured", err)
	}
	for _, a := range ringRecords(t, e, "app", "transit.encrypt") {
		if a.Props["result"] == "disabled" && a.Valid {
			t.Errorf("an encrypt refused for the key's state is recorded valid: %+v", a)
		}
	}
	if n := len(ringRecords(t, e, "app", "transit.key.disable")); n != 3 {
		t.Errorf("transit.key.disable records = %d, want 3 (one refused, two granted)", n)
	}

	_, err = e.svc.EnableHeldKey(keys, "app")
	wantKind(t, "EnableHeldKey without keyring.app.keys", err, kms.KindPermissionDenied)
	for _, name := range []string{"app", "sig"} {
		if k, err := e.svc.EnableHeldKey(e.root, name); err != nil || k.State != kms.HeldKeyEnabled {
			t.Fatalf("EnableHeldKey(%s) = %+v, %v; want enabled", name, k, err)
		}
	}
	wantUses(t, uses, kms.KindNone, "", "")
	if k, err := e.svc.RotateHeldKey(e.root, "app"); err != nil || k.LatestVersion != 2 {
		t.Fatalf("RotateHeldKey(enabled again) = %+v, %v", k, err)
	}
}

// TestHeldKeyStateAndVersionStates: the key's state and its versions'
// go together: a disabled version stays so whatever the key's state.
func TestHeldKeyStateAndVersionStates(t *testing.T) {
	e := newEnv(t)
	if _, err := e.svc.CreateHeldKey(e.root, kms.CreateHeldKeyInput{Name: "app"}); err != nil {
		t.Fatal(err)
	}
	old := transitEncrypt(t, e.svc, e.root, "app", "one")
	k, err := e.svc.RotateHeldKey(e.root, "app")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.SetAsymKeyState(e.root, kms.RingRef{Name: "app"}, k.KeyIDs[1], kms.KeyStateInput{State: kms.KeyDisabled}); err != nil {
		t.Fatal(err)
	}
	for _, change := range []func(context.Context, string) (*kms.HeldKey, error){e.svc.DisableHeldKey, e.svc.EnableHeldKey} {
		if _, err := change(e.root, "app"); err != nil {
			t.Fatal(err)
		}
	}
	out, err := e.svc.DecryptWithHeldKey(e.root, kms.HeldDecryptInput{Name: "app", Items: []kms.HeldSealed{old}})
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, "decrypt with a disabled version of an enabled key", out[0].Err, kms.KindDisabled, kms.KeyDisabled)
	transitEncrypt(t, e.svc, e.root, "app", "two")
}

// TestHeldKeyDeletion: a held key scheduled for deletion is unusable at
// once and rotated by nothing, its period included; cancelled, it is left
// disabled with its versions as they were, and enabled, it serves again;
// at the date, its versions are destroyed and the key is gone, aliases and
// all, whatever its deletion_allowed said.
func TestHeldKeyDeletion(t *testing.T) {
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clock, st := kmstest.ClockAt(start), kmstest.MemoryStore(t)
	e := newEnvOn(t, st, kms.Options{MasterKey: kms.GenerateMasterKey(), Now: clock.Now})
	makeUsedKeys(t, e)
	if _, err := e.svc.ConfigureHeldKey(e.root, "app", kms.HeldKeyConfig{RotationPeriod: ptr(2 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.CreateHeldKeyAlias(e.root, "alias/app", "app"); err != nil {
		t.Fatal(err)
	}
	uses := heldUses(t, e, e.root, "alias/app", "sig")
	k, err := e.svc.RotateHeldKey(e.root, "app")
	if err != nil {
		t.Fatal(err)
	}
	// Version 1 disabled: the deletion notes it, and cancelling it gives it back.
	if _, err := e.svc.SetAsymKeyState(e.root, kms.RingRef{Name: "app"}, k.KeyIDs[1], kms.KeyStateInput{State: kms.KeyDisabled}); err != nil {
		t.Fatal(err)
	}

	for _, window := range []time.Duration{time.Minute, kms.DefaultMinDestroyDelay - time.Millisecond, kms.MaxHeldDeletionWindow + time.Millisecond, -time.Hour} {
		_, err := e.svc.ScheduleHeldKeyDeletion(e.root, "app", window)
		wantKind(t, "ScheduleHeldKeyDeletion("+window.String()+")", err, kms.KindInvalid)
	}
	_, err = e.svc.ScheduleHeldKeyDeletion(e.as(t, kms.Flags{"keyring.app.keys": true, "keyring.app.config": true}), "app", 0)
	wantKind(t, "ScheduleHeldKeyDeletion without keyring.app.delete", err, kms.KindPermissionDenied)
	k, err = e.svc.ScheduleHeldKeyDeletion(e.as(t, kms.Flags{"keyring.app.delete": true}), "alias/app", 0)
	if want := start.Add(kms.DefaultHeldDeletionWindow); err != nil || k.State != kms.HeldKeyPendingDeletion || !k.DeletionDate.Equal(want) || k.DeletionAllowed {
		t.Fatalf("ScheduleHeldKeyDeletion(0) = %+v, %v; want pending deletion on %v, deletion_allowed unset", k, err, want)
	}
	_, err = e.svc.ScheduleHeldKeyDeletion(e.root, "app", time.Hour)
	wantKind(t, "ScheduleHeldKeyDeletion again", err, kms.KindConflict)
	delete(uses, "sign")
	delete(uses, "verify")
	delete(uses, "export public key")
	wantUses(t, uses, kms.KindDisabled, kms.HeldKeyPendingDeletion, "is pending deletion")
	_, err = e.svc.RotateHeldKey(e.root, "app")
	wantState(t, "RotateHeldKey(pending deletion)", err, kms.KindDisabled, kms.HeldKeyPendingDeletion)
	for name, call := range map[string]func() error{
		"enable":  func() error { _, err := e.svc.EnableHeldKey(e.root, "app"); return err },
		"disable": func() error { _, err := e.svc.DisableHeldKey(e.root, "app"); return err },
		"config": func() error {
			_, err := e.svc.ConfigureHeldKey(e.root, "app", kms.HeldKeyConfig{Description: ptr("x")})
			return err
		},
		"tag": func() error { return e.svc.TagHeldKey(e.root, "app", map[string]string{"a": "b"}) },
		"asym config": func() error {
			_, err := e.svc.SetAsymConfig(e.root, kms.RingRef{Name: "app"}, &kms.KeyRingConfig{})
			return err
		},
		"alias": func() error { _, err := e.svc.CreateHeldKeyAlias(e.root, "alias/other", "app"); return err },
		"version state": func() error {
			_, err := e.svc.SetAsymKeyState(e.root, kms.RingRef{Name: "app"}, k.KeyIDs[1], kms.KeyStateInput{State: kms.KeyEnabled})
			return err
		},
		"version destruction cancel": func() error {
			_, err := e.svc.CancelDestroyAsymKey(e.root, kms.RingRef{Name: "app"}, k.KeyIDs[2])
			return err
		},
	} {
		wantKind(t, name+" of a key pending deletion", call(), kms.KindConflict)
	}
	for v, id := range k.KeyIDs {
		if got := asymKeyState(t, e, st, "app", id); got.State != kms.KeyDestroyScheduled || !got.DestroyAt.Equal(k.DeletionDate) {
			t.Errorf("version %d pending its key's deletion = %+v, want destroy_scheduled at %v", v, got, k.DeletionDate)
		}
	}

	clock.Advance(3 * time.Hour) // past the rotation period: nothing rotates a key pending deletion
	if _, err := kms.RotateDue(e.svc); err != nil {
		t.Fatal(err)
	}
	if err := kms.DestroyDue(context.Background(), e.svc); err != nil {
		t.Fatal(err)
	}
	if k, err := e.svc.GetHeldKey(e.root, "app"); err != nil || k.LatestVersion != 2 || k.State != kms.HeldKeyPendingDeletion {
		t.Fatalf("GetHeldKey past the rotation period = %+v, %v; want version 2, pending deletion", k, err)
	}

	_, err = e.svc.CancelHeldKeyDeletion(e.as(t, kms.Flags{"keyring.app.keys": true}), "app")
	wantKind(t, "CancelHeldKeyDeletion without keyring.app.delete", err, kms.KindPermissionDenied)
	if k, err = e.svc.CancelHeldKeyDeletion(e.root, "app"); err != nil || k.State != kms.HeldKeyDisabled || !k.DeletionDate.IsZero() {
		t.Fatalf("CancelHeldKeyDeletion = %+v, %v; want disabled", k, err)
	}
	_, err = e.svc.CancelHeldKeyDeletion(e.root, "app")
	wantKind(t, "CancelHeldKeyDeletion again", err, kms.KindConflict)
	for v, want := range map[int]string{1: kms.KeyDisabled, 2: kms.KeyEnabled} {
		if got := asymKeyState(t, e, st, "app", k.KeyIDs[v]); got.State != want || got.DestroyAt != nil {
			t.Errorf("version %d after the cancel = %+v, want %s", v, got, want)
		}
	}
	wantUses(t, map[string]func() error{"encrypt": uses["encrypt"]}, kms.KindDisabled, kms.HeldKeyDisabled, "is disabled")
	clock.Advance(kms.DefaultHeldDeletionWindow)
	if err := kms.DestroyDue(context.Background(), e.svc); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.EnableHeldKey(e.root, "app"); err != nil {
		t.Fatalf("EnableHeldKey after the cancelled deletion's date = %v", err)
	}
	transitEncrypt(t, e.svc, e.root, "alias/app", "again")
	// Its period is scheduled again from its latest version, long past:
	// the sweep rotates it.
	if _, err := kms.RotateDue(e.svc); err != nil {
		t.Fatal(err)
	}
	if k, err := e.svc.GetHeldKey(e.root, "app"); err != nil || k.LatestVersion != 3 {
		t.Fatalf("GetHeldKey of an enabled key past its period = %+v, %v; want it rotated", k, err)
	}

	// At the date: gone, with its aliases.
	if _, err := e.svc.ScheduleHeldKeyDeletion(e.root, "app", 2*time.Hour); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour)
	if err := kms.DestroyDue(context.Background(), e.svc); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.GetHeldKey(e.root, "app"); err != nil {
		t.Fatalf("GetHeldKey an hour before its deletion = %v", err)
	}
	clock.Advance(time.Hour)
	_, err = e.svc.CancelHeldKeyDeletion(e.root, "app")
	wantKind(t, "CancelHeldKeyDeletion at the date", err, kms.KindConflict)
	for range 2 { // the second pass finds nothing to do
		if err := kms.DestroyDue(context.Background(), e.svc); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"app", "alias/app"} {
		_, err = e.svc.GetHeldKey(e.root, name)
		wantKind(t, "GetHeldKey("+name+") after its deletion", err, kms.KindNotFound)
	}
	if l, err := e.svc.ListHeldKeyAliases(e.root, "", kms.PageRequest{}); err != nil || len(l.Data) != 0 {
		t.Fatalf("ListHeldKeyAliases after the key's deletion = %+v, %v; want none", l, err)
	}
	err = st.View(context.Background(), func(tx kms.Txn) error {
		return tx.Scan(kms.ScanOptions{Prefix: []byte("key/" + k.ID + "\x00")}, func(key, _ []byte) (bool, error) {
			t.Errorf("the record %q of a deleted key's version is left", key)
			return true, nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	recs := ringRecords(t, e, "app", "transit.key.delete")
	if len(recs) != 1 || recs[0].KeyID != "system" || recs[0].Props["reason"] != "deletionDate" {
		t.Fatalf("transit.key.delete records = %+v, want one, by the service", recs)
	}
	if n := len(ringRecords(t, e, "app", "asym.key.destroy")); n != 3 {
		t.Errorf("asym.key.destroy records = %d, want one for each of the 3 versions", n)
	}
	if _, err := e.svc.CreateHeldKey(e.root, kms.CreateHeldKeyInput{Name: "app"}); err != nil {
		t.Fatalf("CreateHeldKey of a deleted key's name = %v", err)
	}
	wantUses(t, map[string]func() error{"sign": heldUses(t, e, e.root, "app", "sig")["sign"]}, kms.KindNone, "", "")
}

// asymKeyState returns the version keyID of the held key name, in st,
// as its record in the store has it (no call answers the state of a
// version that is not enabled).
func asymKeyState(t *testing.T, e *env, st kms.Store, name, keyID string) *kms.Key {
	t.Helper()
	k, err := e.svc.GetHeldKey(e.root, name)
	if err != nil {
		t.Fatal(err)
	}
	var got *kms.Key
	err = st.View(context.Background(), func(tx kms.Txn) error {
		v, err := tx.Get(kms.KeyRecordKey(k.ID, keyID))
		if err != nil {
			return err
		}
		got = &kms.Key{}
		return json.Unmarshal(v, got)
	})
	if err != nil {
		t.Fatal(err)
	}
	if got.State == "" {
		got.State = kms.KeyEnabled
	}
	return got
}
