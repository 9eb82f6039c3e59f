package kms_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/kmstest"
)

// TestRekey: after Rekey, the old master key opens nothing (no Service
// starts, verify-audit refuses it), and under the new one every hash,
// header and cursor issued before stays valid, the /asym keys, signing
// keys, split rings' share secrets (a decrypt answers the share it
// answered before) and passwords open, and the chain verifies as a whole:
// from one master key to another and a third, and from a master key to a
// root key of another kind (as a PKCS#11 token's) and back.
func TestRekey(t *testing.T) {
	t.Run("master keys", func(t *testing.T) {
		testRekey(t, kms.GenerateMasterKey(), kms.GenerateMasterKey(), kms.GenerateMasterKey())
	})
	t.Run("to another kind of root key and back", func(t *testing.T) {
		testRekey(t, kms.GenerateMasterKey(), newTestRootKey(t), kms.GenerateMasterKey())
	})
}

func testRekey(t *testing.T, mk1, mk2, mk3 kms.RootKey) {
	ctx := context.Background()
	st := kmstest.MemoryStore(t)
	svc, app := startApplication(t, st, mk1, "rekey-test")
	ring, err := svc.CreateKeyRing(app, kms.CreateKeyRingInput{Name: "docs", KEM: "x25519", DataKeys: kms.DataKeysRing})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CreateKeyRing(app, kms.CreateKeyRingInput{Name: "more", KEM: "x25519", DataKeys: kms.DataKeysRing}); err != nil {
		t.Fatal(err)
	}
	asym, err := svc.CreateAsymKeyRing(app, kms.CreateAsymKeyRingInput{Name: "tokens"})
	if err != nil {
		t.Fatal(err)
	}
	before, err := svc.Encrypt(app, kms.EncryptInput{RingName: "docs"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.CreateKeyRing(app, kms.CreateKeyRingInput{Name: "split", KEM: "x25519", DataKeys: kms.DataKeysSplit}); err != nil {
		t.Fatal(err)
	}
	splitBefore, err := svc.Encrypt(app, kms.EncryptInput{RingName: "split"})
	if err != nil || splitBefore.KeyShare == "" {
		t.Fatalf("Encrypt(split ring) = %v, want a share", err)
	}
	page, err := svc.ListKeyRings(app, kms.PageRequest{Limit: 1})
	if err != nil || page.Pagination.NextCursor == "" {
		t.Fatalf("ListKeyRings(limit 1) = %+v, %v; want a cursor", page, err)
	}
	user, err := svc.CreateUser(app, userInput("alice", kms.Flags{"keyring.*.read": true}))
	if err != nil {
		t.Fatal(err)
	}
	signer, err := svc.CreateAPIKey(app, kms.APIKeyInput{AccountID: kms.BootstrapAccountUID, AccountByUID: true, Flags: kms.Flags{"keyring.*.read": true}})
	if err != nil {
		t.Fatal(err)
	}
	asymBefore, err := svc.GetAsymKey(app, kms.RingRef{Name: "tokens"}, asym.Key.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Close(); err != nil {
		t.Fatal(err)
	}

	res, err := kms.Rekey(ctx, st, mk1, mk2)
	if err != nil {
		t.Fatalf("Rekey = %v", err)
	}
	if res.SigningKeys < 1 || res.AsymRings != 1 || res.SplitRings != 1 || res.Users != 1 || res.APIKeys != 1 {
		t.Fatalf("Rekey = %+v, want the signing key, 1 /asym ring, 1 split ring, 1 User and 1 API key", res)
	}

	// The old key opens nothing.
	if _, err := kms.New(st, kms.Options{MasterKey: mk1}); kms.ErrorKind(err) != kms.KindUnauthenticated {
		t.Fatalf("New(the old master key) = %v, want unauthenticated", err)
	}
	if _, err := kms.VerifyAudit(ctx, st, mk1); kms.ErrorKind(err) != kms.KindUnauthenticated {
		t.Fatalf("VerifyAudit(the old master key) = %v, want unauthenticated", err)
	}
	if _, err := kms.Rekey(ctx, st, mk1, mk3); kms.ErrorKind(err) != kms.KindUnauthenticated {
		t.Fatalf("Rekey(from the old master key) = %v, want unauthenticated", err)
	}
	if v, err := kms.VerifyAudit(ctx, st, mk2); err != nil || v.Records == 0 {
		t.Fatalf("VerifyAudit(the new master key) = %+v, %v", v, err)
	}

	svc, err = kms.New(st, kms.Options{MasterKey: mk2})
	if err != nil {
		t.Fatalf("New(the new master key) = %v", err)
	}
	defer svc.Close()
	if p, err := svc.AuthenticateSigned(ctx, signer.KeyID, func(secret []byte) error {
		if string(secret) != signer.Key {
			return errors.New("another secret")
		}
		return nil
	}); err != nil || p.ID != signer.KeyID {
		t.Fatalf("AuthenticateSigned after a rekey = %+v, %v; want the API key's secret, resealed", p, err)
	}
	dec, err := svc.Decrypt(app, kms.DecryptInput{Hash: before.Hash, Header: before.Header})
	if err != nil {
		t.Fatalf("Decrypt(a hash from before) = %v", err)
	}
	k1, _ := kms.UnwrapKey([]byte(ring.PrivateKey), before.RingID, before.Key)
	k2, _ := kms.UnwrapKey([]byte(ring.PrivateKey), dec.RingID, dec.Key)
	if !bytes.Equal(k1, k2) || len(k1) != 32 {
		t.Fatal("Decrypt after the rekey gave another key")
	}
	// The split ring's share secret opens under the new key, unchanged.
	splitDec, err := svc.Decrypt(app, kms.DecryptInput{Hash: splitBefore.Hash, Header: splitBefore.Header})
	if err != nil || splitDec.KeyShare != splitBefore.KeyShare {
		t.Fatalf("Decrypt(a split ring's hash from before) = %v; want the share its encrypt answered", err)
	}
	if h, err := svc.LookupHeader(app, before.Header); err != nil || !h.Valid {
		t.Fatalf("LookupHeader(a header from before) = %+v, %v", h, err)
	}
	next, err := svc.ListKeyRings(app, kms.PageRequest{Limit: 1, Cursor: page.Pagination.NextCursor})
	if err != nil || len(next.Data) != 1 {
		t.Fatalf("ListKeyRings(a cursor from before) = %+v, %v", next, err)
	}
	asymAfter, err := svc.GetAsymKey(app, kms.RingRef{Name: "tokens"}, asym.Key.ID)
	if err != nil || asymAfter.KeyData.Key != asymBefore.KeyData.Key {
		t.Fatalf("GetAsymKey after the rekey = %v, want the same key", err)
	}
	if _, err := svc.Login(ctx, kms.LoginInput{Username: "alice", Password: user.Password}); err != nil {
		t.Fatalf("Login after the rekey = %v", err)
	}
	enc, err := svc.Encrypt(app, kms.EncryptInput{RingName: "docs"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Decrypt(app, kms.DecryptInput{Hash: enc.Hash, Header: enc.Header}); err != nil {
		t.Fatalf("Decrypt(a hash from after) = %v", err)
	}
	l, err := svc.SearchActivity(app, kms.ActivityFilter{Action: "masterkey.rotate"}, kms.PageRequest{})
	if err != nil || len(l.Data) != 1 {
		t.Fatalf("masterkey.rotate records = %+v, %v; want one", l, err)
	}
	if err := svc.Close(); err != nil {
		t.Fatal(err)
	}

	// Again, to a third key: the MAC keys of the first travel along.
	if _, err := kms.Rekey(ctx, st, mk2, mk3); err != nil {
		t.Fatalf("Rekey again = %v", err)
	}
	svc3, err := kms.New(st, kms.Options{MasterKey: mk3})
	if err != nil {
		t.Fatal(err)
	}
	defer svc3.Close()
	if _, err := svc3.Decrypt(app, kms.DecryptInput{Hash: before.Hash, Header: before.Header}); err != nil {
		t.Fatalf("Decrypt(a hash from before both rekeys) = %v", err)
	}
	if dec, err := svc3.Decrypt(app, kms.DecryptInput{Hash: splitBefore.Hash, Header: splitBefore.Header}); err != nil || dec.KeyShare != splitBefore.KeyShare {
		t.Fatalf("Decrypt(a split ring's hash from before both rekeys) = %v; want the same share", err)
	}
	if _, err := kms.Rekey(ctx, st, mk3, mk3); kms.ErrorKind(err) != kms.KindInvalid {
		t.Errorf("Rekey(to the same key) = %v, want invalid", err)
	}
}
