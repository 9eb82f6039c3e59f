package client_test

import (
	"context"
	"testing"

	"github.com/ringkms/kms"
)

// TestKeyStates drives a key's states through the client, by ring name
// and by ring ID, and checks the errors of a disabled key.
func TestKeyStates(t *testing.T) {
	e := newEnv(t, "")
	ctx := context.Background()
	created := check(e.c.CreateKeyRing(ctx, kms.CreateKeyRingInput{Name: "cs", KEM: "x25519"}))(t, "CreateKeyRing")
	first, ref := created.Key.ID, kms.RingRef{Name: "cs"}
	old := check(e.c.Encrypt(ctx, kms.EncryptInput{RingName: "cs"}))(t, "Encrypt")

	_, err := e.c.SetKeyState(ctx, ref, first, kms.KeyStateInput{State: kms.KeyDisabled})
	wantKind(t, "SetKeyState(active key)", err, kms.KindInvalid)
	k := check(e.c.SetKeyState(ctx, kms.RingRef{Name: created.Ring.ID, ByID: true}, first, kms.KeyStateInput{State: kms.KeyDisabled, Rotate: true}))(t, "SetKeyState(by ID)")
	if k.State != kms.KeyDisabled {
		t.Fatalf("SetKeyState = %+v, want disabled", k)
	}
	_, err = e.c.Decrypt(ctx, kms.DecryptInput{Hash: old.Hash, Header: old.Header})
	if e := wantKind(t, "Decrypt(disabled key)", err, kms.KindDisabled); e.State != kms.KeyDisabled {
		t.Errorf("Decrypt(disabled key): state %q, want disabled", e.State)
	}

	k = check(e.c.DestroyKey(ctx, ref, first, kms.DestroyKeyInput{After: "2h"}))(t, "DestroyKey")
	want := check(e.svc.ListKeys(e.rootCtx, ref, kms.PageRequest{}))(t, "ListKeys").Data[0]
	if want.EncryptCount == nil || *want.EncryptCount != 1 {
		t.Fatalf("ListKeys: encryptCount %v, want 1", want.EncryptCount)
	}
	want.EncryptCount = nil // a list's; a state change answers the key as it is now
	same(t, "DestroyKey", k, want)
	if k.State != kms.KeyDestroyScheduled {
		t.Fatalf("DestroyKey = %+v, want destroy_scheduled", k)
	}
	k = check(e.c.CancelDestroyKey(ctx, ref, first))(t, "CancelDestroyKey")
	if k.State != kms.KeyDisabled || k.DestroyAt != nil {
		t.Fatalf("CancelDestroyKey = %+v, want disabled", k)
	}
	check(e.c.SetKeyState(ctx, ref, first, kms.KeyStateInput{State: kms.KeyEnabled}))(t, "SetKeyState(enabled)")
	check(e.c.Decrypt(ctx, kms.DecryptInput{Hash: old.Hash, Header: old.Header}))(t, "Decrypt(enabled again)")

	u := check(e.c.KeyUsage(ctx, ref, first))(t, "KeyUsage")
	same(t, "KeyUsage", u, check(e.svc.KeyUsage(e.rootCtx, ref, first))(t, "Service.KeyUsage"))
	if u.EncryptCount != 1 || u.DecryptCount != 1 {
		t.Fatalf("KeyUsage = %+v, want one encrypt and one decrypt", u)
	}
	hashes := check(e.c.ListKeyHashes(ctx, kms.RingRef{Name: created.Ring.ID, ByID: true}, first, kms.PageRequest{Limit: 5}))(t, "ListKeyHashes")
	if len(hashes.Data) != 1 || hashes.Data[0].Hash != old.Hash {
		t.Fatalf("ListKeyHashes = %+v, want the hash %s", hashes.Data, old.Hash)
	}

	asym := check(e.c.CreateAsymKeyRing(ctx, kms.CreateAsymKeyRingInput{Name: "acs"}))(t, "CreateAsymKeyRing")
	aref := kms.RingRef{Name: "acs"}
	check(e.c.DestroyAsymKey(ctx, aref, asym.Key.ID, kms.DestroyKeyInput{Rotate: true}))(t, "DestroyAsymKey")
	_, err = e.c.GetAsymKey(ctx, aref, asym.Key.ID)
	wantKind(t, "GetAsymKey(scheduled)", err, kms.KindDisabled)
	check(e.c.CancelDestroyAsymKey(ctx, aref, asym.Key.ID))(t, "CancelDestroyAsymKey")
	check(e.c.SetAsymKeyState(ctx, aref, asym.Key.ID, kms.KeyStateInput{State: kms.KeyEnabled}))(t, "SetAsymKeyState")
	check(e.c.GetAsymKey(ctx, aref, asym.Key.ID))(t, "GetAsymKey(enabled again)")
}
