package client_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/client"
	"github.com/ringkms/kms/envelope"
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

// encryptOnly is the keys of a ring as a credential that may only encrypt
// on it sees them: for an envelope's decrypt, it makes an encrypt call of
// its own and hands out the key that call answered.
type encryptOnly struct {
	c    *client.Client
	ring string
}

func (k encryptOnly) Encrypt(ctx context.Context, in kms.EncryptInput) (*kms.EncryptResult, error) {
	return k.c.Encrypt(ctx, in)
}

func (k encryptOnly) Decrypt(ctx context.Context, _ kms.DecryptInput) (*kms.DecryptResult, error) {
	enc, err := k.c.Encrypt(ctx, kms.EncryptInput{RingName: k.ring})
	if err != nil {
		return nil, err
	}
	return &kms.DecryptResult{RingID: enc.RingID, RingName: k.ring, Key: enc.Key, KeyShare: enc.KeyShare}, nil
}

// TestEncryptOnlyOpensNothing: over HTTP, a credential that may only
// encrypt on a ring, with the ring's private key, opens the envelopes
// that another caller sealed on a ring of ring keys (made by naming
// "ring") with no decrypt call and so no decrypt record: its own encrypt
// hands out the key that sealed them. On a ring made with no dataKeys
// (split, the default) it opens none, and its decrypt is refused and
// recorded.
func TestEncryptOnlyOpensNothing(t *testing.T) {
	for _, c := range []struct {
		name     string
		dataKeys string
		opens    bool
	}{
		{"ring by name", kms.DataKeysRing, true},
		{"default", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, "")
			ctx := context.Background()
			created := check(e.c.CreateKeyRing(ctx, kms.CreateKeyRingInput{Name: "payments", DataKeys: c.dataKeys}))(t, "CreateKeyRing")
			pk, err := kms.ParsePrivateKey([]byte(created.PrivateKey))
			if err != nil {
				t.Fatal(err)
			}
			plaintext := []byte("salaries, March")
			sealed := check(envelope.New(e.c, pk).Seal(ctx, envelope.SealInput{RingName: "payments"}, plaintext))(t, "Seal")

			writer := e.keyClient(t, "keyring.payments.encrypt")
			got, err := envelope.New(encryptOnly{writer, "payments"}, pk).Open(ctx, sealed, nil)
			decrypts := func() []*kms.Activity {
				t.Helper()
				page := check(e.svc.SearchActivity(e.rootCtx, kms.ActivityFilter{Action: "decrypt"}, kms.PageRequest{}))(t, "SearchActivity")
				return page.Data
			}
			if c.opens {
				if err != nil || !bytes.Equal(got, plaintext) {
					t.Fatalf("Open with an encrypt call's key on a ring of ring keys = %q, %v; want the plaintext", got, err)
				}
				if recs := decrypts(); len(recs) != 0 {
					t.Fatalf("decrypt records = %+v, want none: the read went through encrypt", recs)
				}
				return
			}
			if !errors.Is(err, envelope.ErrFormat) {
				t.Fatalf("Open with an encrypt call's key on a default ring = %q, %v; want ErrFormat", got, err)
			}
			_, err = envelope.New(writer, pk).Open(ctx, sealed, nil)
			if kms.ErrorKind(err) != kms.KindPermissionDenied {
				t.Fatalf("Open with a decrypt call of the encrypt-only credential = %v, want permission denied", err)
			}
			if recs := decrypts(); len(recs) != 1 || recs[0].Valid {
				t.Fatalf("decrypt records = %+v, want the refusal", recs)
			}
		})
	}
}
