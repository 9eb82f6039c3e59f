package badgerstore

import (
	"context"
	"testing"
	"time"

	"github.com/ringkms/kms"
)

// TestEraseAfterAReaderLetGo: a read transaction older than a key's new
// value holds its earlier version through Erase's first compaction, which
// must keep it; once the reader is gone, a later attempt of the same
// Erase erases it. (The first compaction merges both versions into one
// table of the bottom level; an attempt that only flushes the memtables
// and flattens the tree again leaves that table as it is.) The same holds
// for a deleted key.
func TestEraseAfterAReaderLetGo(t *testing.T) {
	ctx := context.Background()
	s := openDir(t)
	kept, gone := []byte("sys/sign/a"), []byte("user/id/b")
	write := func(fn func(kms.Txn) error) {
		t.Helper()
		if err := s.Update(ctx, fn); err != nil {
			t.Fatalf("Update = %v", err)
		}
	}
	write(func(tx kms.Txn) error {
		if err := tx.Set(kept, []byte("sealed under the old key")); err != nil {
			return err
		}
		return tx.Set(gone, []byte("a password hash"))
	})
	// The earlier versions in the bottom level, as in a store that has run
	// for a while.
	if err := s.Erase(ctx, [][]byte{kept, gone}); err != nil {
		t.Fatalf("Erase of keys with one version = %v", err)
	}
	reader := s.db.NewTransaction(false)
	write(func(tx kms.Txn) error {
		if err := tx.Set(kept, []byte("sealed under the new key")); err != nil {
			return err
		}
		return tx.Delete(gone)
	})
	let := time.AfterFunc(3*eraseBackoff, reader.Discard)
	defer let.Stop()
	start := time.Now()
	if err := s.Erase(ctx, [][]byte{kept, gone}); err != nil {
		t.Fatalf("Erase, with a reader that ends %v in = %v", 3*eraseBackoff, err)
	}
	t.Logf("Erase returned after %v", time.Since(start))
	if left, err := s.versionsLeft([][]byte{kept, gone}); err != nil || left != nil {
		t.Fatalf("after Erase, versionsLeft = %q, %v; want none", left, err)
	}
	err := s.View(ctx, func(tx kms.Txn) error {
		if v, err := tx.Get(kept); err != nil || string(v) != "sealed under the new key" {
			t.Errorf("Get(%s) after Erase = %q, %v; want the new value", kept, v, err)
		}
		if _, err := tx.Get(gone); kms.ErrorKind(err) != kms.KindNotFound {
			t.Errorf("Get(%s) after Erase = %v, want not found", gone, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
