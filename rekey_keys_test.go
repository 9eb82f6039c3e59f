package kms_test

import (
	"context"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/kmstest"
	"github.com/ringkms/kms/store/badgerstore"
)

// TestRekeyCarriesTheFirstKeysPurposeKeys pins what docs/OPERATIONS.md
// ("What an old master key still allows") says of a rekey: the seal and
// backup keys follow the new master key, while the hash, header, cursor,
// audit-chain and throttle keys stay those the store's first master key
// derives, across every rekey; and an old key opens nothing sealed in the
// store any more.
func TestRekeyCarriesTheFirstKeysPurposeKeys(t *testing.T) {
	ctx := context.Background()
	st := kmstest.MemoryStore(t)
	first, second, third := kms.GenerateMasterKey(), kms.GenerateMasterKey(), kms.GenerateMasterKey()
	svc, err := kms.New(st, kms.Options{MasterKey: first})
	if err != nil {
		t.Fatal(err)
	}
	svc.Close()
	if _, err := kms.Rekey(ctx, st, first, second); err != nil {
		t.Fatal(err)
	}
	if _, err := kms.Rekey(ctx, st, second, third); err != nil {
		t.Fatal(err)
	}
	stored, byThird, err := kms.PurposeKeys(ctx, st, third)
	if err != nil {
		t.Fatal(err)
	}
	firstStore, err := badgerstore.OpenInMemory() // a store of the first key's own, for what it derives
	if err != nil {
		t.Fatal(err)
	}
	defer firstStore.Close()
	_, byFirst, err := kms.PurposeKeys(ctx, firstStore, first)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"hash-mac", "header-mac", "cursor", "audit-chain", "throttle"} {
		if stored[p] != byFirst[p] {
			t.Errorf("after two rekeys, the %s key is not the one the first master key derives", p)
		}
	}
	for _, p := range []string{"seal", "backup-mac"} {
		if stored[p] != byThird[p] || stored[p] == byFirst[p] {
			t.Errorf("the %s key does not follow the current master key", p)
		}
	}
	for _, old := range []kms.MasterKey{first, second} {
		if _, _, err := kms.PurposeKeys(ctx, st, old); err == nil {
			t.Error("an old master key still opens the store's keys record")
		}
		if s, err := kms.New(st, kms.Options{MasterKey: old}); err == nil {
			s.Close()
			t.Error("a Service starts on the store with an old master key")
		}
	}
}
