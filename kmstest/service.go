package kmstest

import (
	"context"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/store/badgerstore"
)

// Env is a bootstrapped Service and what a test needs to call it as root.
type Env struct {
	Store   kms.Store // what the Service runs on
	Service *kms.Service
	RootKey string          // secret of the root API key (flag "*")
	RootCtx context.Context // carries the root principal, for direct Service calls
}

// New starts a Service on st with opts, bootstraps it and authenticates
// its root API key; the Service is closed at the end of the test. A zero
// or nil opts.MasterKey is a fresh one.
func New(t testing.TB, st kms.Store, opts kms.Options) *Env {
	t.Helper()
	if mk, ok := opts.MasterKey.(kms.MasterKey); opts.MasterKey == nil || ok && mk.IsZero() {
		opts.MasterKey = kms.GenerateMasterKey()
	}
	svc, err := kms.New(st, opts)
	if err != nil {
		t.Fatalf("kms.New() = %v", err)
	}
	t.Cleanup(func() { svc.Close() })
	ctx := context.Background()
	boot, err := svc.Bootstrap(ctx, "")
	if err != nil {
		t.Fatalf("Bootstrap() = %v", err)
	}
	root, err := svc.Authenticate(ctx, boot.Secret)
	if err != nil {
		t.Fatalf("Authenticate(root) = %v", err)
	}
	return &Env{Store: st, Service: svc, RootKey: boot.Secret, RootCtx: kms.WithPrincipal(ctx, root)}
}

// MemoryStore opens a Badger store that keeps everything in memory; it is
// closed at the end of the test, after a Service that New started on it.
func MemoryStore(t testing.TB) *badgerstore.Store {
	t.Helper()
	st, err := badgerstore.OpenInMemory()
	if err != nil {
		t.Fatalf("badgerstore.OpenInMemory() = %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// DiskStore opens a Badger store in a temporary directory
// (badgerstore.OpenDir), whose writes reach the disk, for benchmarks that
// count what that costs; it is closed at the end of the test, after a
// Service that New started on it.
func DiskStore(t testing.TB) *badgerstore.Store {
	t.Helper()
	st, err := badgerstore.OpenDir(t.TempDir())
	if err != nil {
		t.Fatalf("badgerstore.OpenDir() = %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
