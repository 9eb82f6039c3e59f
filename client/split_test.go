package client_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/ringkms/kms"
)

// TestSplitKeyShares: on a ring with split data keys the client hands
// out each call's keyShare, from Encrypt, Decrypt and both batches, and
// the data key it makes with the ring's key is the same on both sides.
func TestSplitKeyShares(t *testing.T) {
	e := newEnv(t, "")
	ctx := context.Background()
	created := check(e.c.CreateKeyRing(ctx, kms.CreateKeyRingInput{Name: "docs", KEM: "x25519", DataKeys: kms.DataKeysSplit}))(t, "CreateKeyRing")
	if created.Ring.DataKeys != kms.DataKeysSplit {
		t.Fatalf("CreateKeyRing: dataKeys %q, want split", created.Ring.DataKeys)
	}
	if r := check(e.c.GetKeyRing(ctx, kms.RingRef{Name: "docs"}))(t, "GetKeyRing"); r.DataKeys != kms.DataKeysSplit {
		t.Fatalf("GetKeyRing: dataKeys %q, want split", r.DataKeys)
	}
	pk, err := kms.ParsePrivateKey([]byte(created.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	dataKey := func(ringID string, k *kms.Key, share string) []byte {
		t.Helper()
		rk, err := pk.Unwrap(ringID, k)
		if err != nil {
			t.Fatal(err)
		}
		dk, err := kms.DataKey(rk, share)
		if err != nil || bytes.Equal(dk, rk) {
			t.Fatalf("DataKey = %v, or the ring's key", err)
		}
		return dk
	}
	enc := check(e.c.Encrypt(ctx, kms.EncryptInput{RingName: "docs"}))(t, "Encrypt")
	dec := check(e.c.Decrypt(ctx, kms.DecryptInput{Hash: enc.Hash, Header: enc.Header}))(t, "Decrypt")
	if enc.KeyShare == "" || dec.KeyShare != enc.KeyShare {
		t.Fatalf("Encrypt and Decrypt answered the shares %q and %q, want one", enc.KeyShare, dec.KeyShare)
	}
	if !bytes.Equal(dataKey(enc.RingID, enc.Key, enc.KeyShare), dataKey(dec.RingID, dec.Key, dec.KeyShare)) {
		t.Fatal("Encrypt and Decrypt give two data keys")
	}
	batch := check(e.c.EncryptBatch(ctx, kms.EncryptBatchInput{RingName: "docs", Count: 2}))(t, "EncryptBatch")
	decs := check(e.c.DecryptBatch(ctx, kms.DecryptBatchInput{Items: []kms.DecryptInput{
		{Hash: batch.Items[0].Hash, Header: batch.Items[0].Header}, {Hash: batch.Items[1].Hash, Header: batch.Items[1].Header}}}))(t, "DecryptBatch")
	for i, it := range batch.Items {
		if it.KeyShare == "" || it.KeyShare == enc.KeyShare || decs.Items[i].KeyShare != it.KeyShare {
			t.Fatalf("batch item %d: shares %q and %q, want one of its own", i, it.KeyShare, decs.Items[i].KeyShare)
		}
	}
}
