package kms_test

import (
	"bytes"
	"context"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/store/badgerstore"
)

// TestBackupRestore: a backup taken while encrypt calls go on restores
// into a new store that verifies as a whole, serves under the same master
// key, and decrypts what was encrypted before the backup; it holds no
// secret in the clear.
func TestBackupRestore(t *testing.T) {
	ctx := context.Background()
	mk := kms.GenerateMasterKey()
	st, err := badgerstore.OpenInMemory()
	if err != nil {
		t.Fatal(err)
	}
	e := newEnvOn(t, st, kms.Options{MasterKey: mk})
	ring, err := e.svc.CreateKeyRing(e.root, kms.CreateKeyRingInput{Name: "docs", KEM: "x25519"})
	if err != nil {
		t.Fatal(err)
	}
	apiKey, err := e.svc.CreateAPIKey(e.root, kms.APIKeyInput{AccountID: e.acct, Flags: kms.Flags{"keyring.docs.encrypt": true}})
	if err != nil {
		t.Fatal(err)
	}
	before, err := e.svc.Encrypt(e.root, kms.EncryptInput{RingName: "docs", Asset: &kms.AssetInput{Data: map[string]any{"f": "a"}}})
	if err != nil {
		t.Fatal(err)
	}
	key, err := kms.UnwrapKey([]byte(ring.PrivateKey), before.RingID, before.Key)
	if err != nil {
		t.Fatal(err)
	}

	// Encrypt calls go on while the backup is taken.
	var stop atomic.Bool
	var wg sync.WaitGroup
	var during atomic.Int64
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if _, err := e.svc.Encrypt(e.root, kms.EncryptInput{RingName: "docs"}); err != nil {
					t.Error(err)
					return
				}
				during.Add(1)
			}
		}()
	}
	for during.Load() < 50 {
		runtime.Gosched()
	}
	var buf bytes.Buffer
	info, err := e.svc.Backup(ctx, &buf)
	stop.Store(true)
	wg.Wait()
	if err != nil {
		t.Fatalf("Backup = %v", err)
	}
	if info.Records == 0 || info.Entries == 0 {
		t.Fatalf("Backup = %+v", info)
	}
	backup := buf.Bytes()
	for name, secret := range map[string][]byte{"API key secret": []byte(apiKey.Key), "ring private key": []byte(ring.PrivateKey),
		"ring key": key, "master key": []byte(mk.Base64())} {
		if bytes.Contains(backup, secret) {
			t.Errorf("the backup holds the %s in the clear", name)
		}
	}

	st2, err := badgerstore.OpenInMemory()
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	got, err := kms.Restore(ctx, st2, bytes.NewReader(backup))
	if err != nil {
		t.Fatalf("Restore = %v", err)
	}
	if *got != *info {
		t.Fatalf("Restore = %+v, Backup said %+v", got, info)
	}
	v, err := kms.VerifyAudit(ctx, st2, mk)
	if err != nil || v.Records != info.Records {
		t.Fatalf("VerifyAudit(restored) = %+v, %v; want %d records", v, err, info.Records)
	}
	svc2, err := kms.New(st2, kms.Options{MasterKey: mk})
	if err != nil {
		t.Fatal(err)
	}
	defer svc2.Close()
	p, err := svc2.Authenticate(ctx, apiKey.Key)
	if err != nil {
		t.Fatalf("Authenticate on the restored store = %v", err)
	}
	if _, err := svc2.Encrypt(kms.WithPrincipal(ctx, p), kms.EncryptInput{RingName: "docs"}); err != nil {
		t.Fatalf("Encrypt on the restored store = %v", err)
	}
	app, err := svc2.Application(ctx, "restore-test")
	if err != nil {
		t.Fatal(err)
	}
	dec, err := svc2.Decrypt(kms.WithPrincipal(ctx, app), kms.DecryptInput{Hash: before.Hash, Header: before.Header})
	if err != nil || !dec.Asset.Valid {
		t.Fatalf("Decrypt on the restored store = %+v, %v", dec, err)
	}
	again, err := kms.UnwrapKey([]byte(ring.PrivateKey), dec.RingID, dec.Key)
	if err != nil || !bytes.Equal(again, key) {
		t.Fatalf("the restored key differs: %v", err)
	}
	l, err := svc2.SearchActivity(kms.WithPrincipal(ctx, app), kms.ActivityFilter{Action: "backup"}, kms.PageRequest{})
	if err != nil || len(l.Data) != 1 || l.Data[0].KeyID != "operator" {
		t.Fatalf("backup records in the restored trail = %+v, %v; want one by operator", l, err)
	}

	// Restore refuses a store that is not new.
	if _, err := kms.Restore(ctx, st2, bytes.NewReader(backup)); kms.ErrorKind(err) != kms.KindConflict {
		t.Errorf("Restore into a used store = %v, want conflict", err)
	}
}

// TestRestoreRefusesDamage: a backup cut off anywhere, with a byte
// changed anywhere, or with bytes after its end does not restore.
func TestRestoreRefusesDamage(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.ring(t, "r")
	if _, err := e.svc.Encrypt(e.root, kms.EncryptInput{RingName: "r"}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := e.svc.Backup(ctx, &buf); err != nil {
		t.Fatal(err)
	}
	backup := buf.Bytes()
	try := func(name string, b []byte) {
		t.Helper()
		st, err := badgerstore.OpenInMemory()
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		if _, err := kms.Restore(ctx, st, bytes.NewReader(b)); kms.ErrorKind(err) != kms.KindUnprocessable {
			t.Errorf("Restore(%s) = %v, want unprocessable", name, err)
		}
	}
	step := max(1, len(backup)/40)
	for i := 0; i < len(backup); i += step {
		try("cut at "+strconv.Itoa(i), backup[:i])
		b := bytes.Clone(backup)
		b[i] ^= 0x10
		try("byte "+strconv.Itoa(i)+" changed", b)
	}
	try("a byte appended", append(bytes.Clone(backup), 0))
}
