package kms_test

import (
	"context"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/kmstest"
)

// A local caller uses its one key (made by the service when missing, on
// a store without even a root Account) and nothing else.
func TestLocalCaller(t *testing.T) {
	ctx := context.Background()
	svc := serviceOn(t, kmstest.MemoryStore(t), kms.Options{MasterKey: kms.GenerateMasterKey()})
	for _, bad := range [][2]string{{"", "k"}, {"K8s", "k"}, {"k8s", ""}, {"k8s", "a/b"}} {
		if _, err := svc.LocalCaller(ctx, bad[0], bad[1]); kms.ErrorKind(err) != kms.KindInvalid {
			t.Errorf("LocalCaller(%q, %q) = %v, want Invalid", bad[0], bad[1], err)
		}
	}
	p, err := svc.LocalCaller(ctx, "k8s-kms", "cluster")
	if err != nil {
		t.Fatal(err)
	}
	if p.Kind != kms.PrincipalLocal || p.ID != "k8s-kms" || p.AccountID == "" {
		t.Fatalf("LocalCaller() = %+v", p)
	}
	as := kms.WithPrincipal(ctx, p)
	sealed, err := svc.EncryptWithHeldKey(as, kms.HeldEncryptInput{Name: "cluster", Items: []kms.HeldPlaintext{{Plaintext: []byte("dek")}}})
	if err != nil || sealed[0].Err != nil || sealed[0].KeyVersion != 1 || sealed[0].KeyID == "" {
		t.Fatalf("EncryptWithHeldKey(its key) = %+v, %v", sealed, err)
	}
	if v, err := svc.HeldKeyReady(as, "cluster"); err != nil || v.Version != 1 || v.KeyID != sealed[0].KeyID {
		t.Fatalf("HeldKeyReady(its key) = %+v, %v; want version 1 of key %s", v, err, sealed[0].KeyID)
	}
	key, err := svc.GetHeldKey(as, "cluster")
	if err != nil || key.Type != "aes256-gcm96" || key.Exportable {
		t.Fatalf("its key = %+v, %v; want aes256-gcm96, not exportable", key, err)
	}

	// Nothing else: no other key, no rotation, no new key, no export.
	if _, err := svc.CreateHeldKey(kms.WithPrincipal(ctx, mustApp(t, svc)), kms.CreateHeldKeyInput{Name: "other"}); err != nil {
		t.Fatal(err)
	}
	for what, call := range map[string]func() error{
		"encrypt with another key": func() error {
			_, err := svc.EncryptWithHeldKey(as, kms.HeldEncryptInput{Name: "other", Items: []kms.HeldPlaintext{{Plaintext: []byte("x")}}})
			return err
		},
		"rotate its key":    func() error { _, err := svc.RotateHeldKey(as, "cluster"); return err },
		"make a key":        func() error { _, err := svc.CreateHeldKey(as, kms.CreateHeldKeyInput{Name: "mine"}); return err },
		"configure its key": func() error { _, err := svc.ConfigureHeldKey(as, "cluster", kms.HeldKeyConfig{}); return err },
		"export its key": func() error {
			_, err := svc.ExportHeldKey(as, kms.ExportHeldKeyInput{Name: "cluster", Kind: kms.ExportEncryptionKey})
			return err
		},
		"list keys": func() error { _, err := svc.ListHeldKeys(as); return err },
	} {
		if err := call(); kms.ErrorKind(err) != kms.KindPermissionDenied {
			t.Errorf("%s = %v, want PermissionDenied", what, err)
		}
	}

	// Made once: a second start finds it.
	again, err := svc.LocalCaller(ctx, "k8s-kms", "cluster")
	if err != nil || again.AccountID != p.AccountID {
		t.Fatalf("LocalCaller() again = %+v, %v", again, err)
	}
	if key, _ := svc.GetHeldKey(as, "cluster"); key.LatestVersion != 1 {
		t.Fatalf("its key after a second LocalCaller has %d versions", key.LatestVersion)
	}
}

func mustApp(t *testing.T, svc *kms.Service) *kms.Principal {
	t.Helper()
	p, err := svc.Application(context.Background(), "admin")
	if err != nil {
		t.Fatal(err)
	}
	return p
}
