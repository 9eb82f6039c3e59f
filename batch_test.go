package kms_test

import (
	"testing"

	"github.com/ringkms/kms"
)

// TestEncryptBatch: every item is an encrypt call of its own (its hash,
// header, counter step and record), in order; a maxEncryptCount crossed
// inside a batch rotates the ring there; a bad item fails alone.
func TestEncryptBatch(t *testing.T) {
	e := newEnv(t)
	e.ring(t, "bulk")
	if _, err := e.svc.SetConfig(e.root, kms.RingRef{Name: "bulk"}, &kms.KeyRingConfig{Algos: kms.ConfigAlgos{AES256: kms.AlgoConfig{MaxEncryptCount: 3}}}); err != nil {
		t.Fatal(err)
	}
	res := e.encryptBatch(t, "bulk", 10)
	if len(res.Items) != 10 {
		t.Fatalf("%d items, want 10", len(res.Items))
	}
	hashes, uses := map[string]bool{}, map[string]int{}
	for i, it := range res.Items {
		if it.Error != nil || it.EncryptResult == nil || it.Hash == "" || it.Header == "" {
			t.Fatalf("item %d = %+v, %+v", i, it.EncryptResult, it.Error)
		}
		if hashes[it.Hash] {
			t.Fatalf("item %d repeats a hash", i)
		}
		hashes[it.Hash] = true
		uses[it.Key.ID]++
	}
	if len(uses) < 4 {
		t.Fatalf("10 calls under maxEncryptCount 3 used %d keys, want 4 or more", len(uses))
	}
	for id, n := range uses {
		if n > 3 {
			t.Fatalf("key %s handed out %d times, over maxEncryptCount 3", id, n)
		}
		u, err := e.svc.KeyUsage(e.root, kms.RingRef{Name: "bulk"}, id)
		if err != nil || u.EncryptCount != uint64(n) {
			t.Fatalf("KeyUsage(%s) = %+v, %v; want %d encrypt calls", id, u, err, n)
		}
	}
	l, err := e.svc.SearchActivity(e.root, kms.ActivityFilter{Action: "encrypt"}, kms.PageRequest{Limit: 100})
	if err != nil || len(l.Data) != 10 {
		t.Fatalf("encrypt records = %d, %v; want 10", len(l.Data), err)
	}

	// Items, each with an Asset; a bad one fails alone.
	items, err := e.svc.EncryptBatch(e.root, kms.EncryptBatchInput{RingName: "bulk", Items: []kms.EncryptBatchItem{
		{Asset: &kms.AssetInput{Data: map[string]any{"n": 1}}},
		{Asset: &kms.AssetInput{AssetID: "not-an-id"}},
		{},
		{Asset: &kms.AssetInput{Data: map[string]any{"n": 4}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if it := items.Items[0]; it.Error != nil || it.Asset == nil || it.Asset.ID == "" {
		t.Fatalf("item 0 = %+v, %+v", it.EncryptResult, it.Error)
	}
	if it := items.Items[1]; it.EncryptResult != nil || it.Error == nil || it.Error.Code != "invalid" {
		t.Fatalf("item 1 (a bad Asset ID) = %+v, %+v; want an invalid error", it.EncryptResult, it.Error)
	}
	if it := items.Items[2]; it.Error != nil || it.Asset != nil {
		t.Fatalf("item 2 (no Asset) = %+v, %+v", it.EncryptResult, it.Error)
	}
	if it := items.Items[3]; it.Error != nil || it.Asset == nil {
		t.Fatalf("item 3 = %+v, %+v", it.EncryptResult, it.Error)
	}

	for name, in := range map[string]kms.EncryptBatchInput{
		"no ring":         {Count: 1},
		"no items":        {RingName: "bulk"},
		"too many":        {RingName: "bulk", Count: kms.MaxBatchItems + 1},
		"count and items": {RingName: "bulk", Count: 1, Items: []kms.EncryptBatchItem{{}}},
	} {
		if _, err := e.svc.EncryptBatch(e.root, in); kms.ErrorKind(err) != kms.KindInvalid {
			t.Errorf("EncryptBatch(%s) = %v, want invalid", name, err)
		}
	}
	other := e.as(t, kms.Flags{"keyring.other.encrypt": true})
	if _, err := e.svc.EncryptBatch(other, kms.EncryptBatchInput{RingName: "bulk", Count: 3}); kms.ErrorKind(err) != kms.KindPermissionDenied {
		t.Errorf("EncryptBatch without the flag = %v, want permission denied", err)
	}
}

// TestDecryptBatch: items answered in order, each as Decrypt would; a
// bad header fails its item; a ring the caller may not decrypt refuses
// the batch.
func TestDecryptBatch(t *testing.T) {
	e := newEnv(t)
	e.ring(t, "a")
	e.ring(t, "b")
	enc := e.encryptBatch(t, "a", 3)
	encB := e.encrypt(t, "b")
	in := kms.DecryptBatchInput{}
	for _, it := range enc.Items {
		in.Items = append(in.Items, kms.DecryptInput{Hash: it.Hash, Header: it.Header})
	}
	in.Items = append(in.Items, kms.DecryptInput{Hash: enc.Items[0].Hash, Header: enc.Items[1].Header}) // another call's header
	in.Items = append(in.Items, kms.DecryptInput{Hash: encB.Hash, Header: encB.Header})
	res, err := e.svc.DecryptBatch(e.root, in)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if it := res.Items[i]; it.Error != nil || it.Key.ID != enc.Items[i].Key.ID || it.RingName != "a" {
			t.Fatalf("item %d = %+v, %+v", i, it.DecryptResult, it.Error)
		}
	}
	if it := res.Items[3]; it.Error == nil || it.Error.Code != "unprocessable" || it.DecryptResult == nil || it.Asset.Valid {
		t.Fatalf("item 3 (another call's header) = %+v, %+v; want unprocessable with asset.valid false", it.DecryptResult, it.Error)
	}
	if it := res.Items[4]; it.Error != nil || it.RingName != "b" {
		t.Fatalf("item 4 (ring b) = %+v, %+v", it.DecryptResult, it.Error)
	}
	l, err := e.svc.SearchActivity(e.root, kms.ActivityFilter{Action: "decrypt"}, kms.PageRequest{Limit: 100})
	if err != nil || len(l.Data) != 5 {
		t.Fatalf("decrypt records = %d, %v; want 5", len(l.Data), err)
	}

	onlyA := e.as(t, kms.Flags{"keyring.a.decrypt": true})
	if _, err := e.svc.DecryptBatch(onlyA, in); kms.ErrorKind(err) != kms.KindPermissionDenied {
		t.Errorf("DecryptBatch with a hash of ring b, without its flag = %v, want permission denied", err)
	}
	if _, err := e.svc.DecryptBatch(onlyA, kms.DecryptBatchInput{Items: in.Items[:3]}); err != nil {
		t.Errorf("DecryptBatch of ring a with its flag = %v", err)
	}
	if _, err := e.svc.DecryptBatch(e.root, kms.DecryptBatchInput{}); kms.ErrorKind(err) != kms.KindInvalid {
		t.Errorf("DecryptBatch(no items) = %v, want invalid", err)
	}
}
