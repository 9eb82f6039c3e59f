package kms_test

import (
	"bytes"
	"context"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/kmstest"
)

// TestBackupRestore: a backup taken while encrypt calls go on restores
// into a new store that verifies as a whole, serves under the same master
// key, and decrypts what was encrypted before the backup (on a split ring,
// answering the same share: the ring's share secret went with it); it
// holds no secret in the clear.
func TestBackupRestore(t *testing.T) {
	ctx := context.Background()
	mk := kms.GenerateMasterKey()
	st := kmstest.MemoryStore(t)
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
	split, _ := e.splitRing(t, "split")
	splitBefore := e.encrypt(t, "split")
	shareSecret, err := kms.ShareSecret(ctx, st, mk, split.Ring.ID)
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
		"ring key": key, "master key": []byte(mk.Base64()), "share secret": shareSecret,
		"key share": shareBytes(t, splitBefore.KeyShare), "key share in base64": []byte(splitBefore.KeyShare)} {
		if bytes.Contains(backup, secret) {
			t.Errorf("the backup holds the %s in the clear", name)
		}
	}

	st2 := kmstest.MemoryStore(t)
	got, err := kms.Restore(ctx, st2, bytes.NewReader(backup), mk)
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
	dec, err = svc2.Decrypt(kms.WithPrincipal(ctx, app), kms.DecryptInput{Hash: splitBefore.Hash, Header: splitBefore.Header})
	if err != nil || dec.KeyShare != splitBefore.KeyShare {
		t.Fatalf("Decrypt(split ring) on the restored store = %v; want the share its encrypt answered", err)
	}
	l, err := svc2.SearchActivity(kms.WithPrincipal(ctx, app), kms.ActivityFilter{Action: "backup"}, kms.PageRequest{})
	if err != nil || len(l.Data) != 1 || l.Data[0].KeyID != "operator" {
		t.Fatalf("backup records in the restored trail = %+v, %v; want one by operator", l, err)
	}

	// Restore refuses a store that is not new.
	if _, err := kms.Restore(ctx, st2, bytes.NewReader(backup), mk); kms.ErrorKind(err) != kms.KindConflict {
		t.Errorf("Restore into a used store = %v, want conflict", err)
	}
}

// TestRestoreRefusesDamage: a backup cut off anywhere, with a byte
// changed anywhere, or with bytes after its end does not restore, and
// what a refused restore leaves in the store is only ever what the intact
// backup holds: nothing altered is written.
func TestRestoreRefusesDamage(t *testing.T) {
	ctx := context.Background()
	mk := kms.GenerateMasterKey()
	e := newEnvOn(t, kmstest.MemoryStore(t), kms.Options{MasterKey: mk})
	e.ring(t, "r")
	if _, err := e.svc.Encrypt(e.root, kms.EncryptInput{RingName: "r"}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := e.svc.Backup(ctx, &buf); err != nil {
		t.Fatal(err)
	}
	backup := buf.Bytes()
	ref := kmstest.MemoryStore(t)
	if _, err := kms.Restore(ctx, ref, bytes.NewReader(backup), mk); err != nil {
		t.Fatalf("Restore(intact) = %v", err)
	}
	want, wantRecs := storeContents(t, ref)
	try := func(name string, b []byte) {
		t.Helper()
		st := kmstest.MemoryStore(t)
		if _, err := kms.Restore(ctx, st, bytes.NewReader(b), mk); kms.ErrorKind(err) != kms.KindUnprocessable {
			t.Errorf("Restore(%s) = %v, want unprocessable", name, err)
		}
		got, recs := storeContents(t, st)
		for k, v := range got {
			if w, ok := want[k]; !ok || w != v {
				t.Errorf("Restore(%s) wrote %q = %q, which the intact backup does not hold", name, k, v)
			}
		}
		for i, r := range recs {
			if r != wantRecs[i] {
				t.Errorf("Restore(%s) wrote trail record %d = %q, which the intact backup does not hold", name, i+1, r)
			}
		}
	}
	step := max(1, len(backup)/40)
	for i := 0; i < len(backup); i += step {
		try("cut at "+strconv.Itoa(i), backup[:i])
		b := bytes.Clone(backup)
		b[i] ^= 0x10
		try("byte "+strconv.Itoa(i)+" changed", b)
	}
	try("last byte changed", append(bytes.Clone(backup[:len(backup)-1]), backup[len(backup)-1]^1))
	try("a byte appended", append(bytes.Clone(backup), 0))
}

// TestRestoreNeedsTheMasterKey: Restore without a master key is invalid;
// under another master key, the backup is refused at its start and the
// store is left empty.
func TestRestoreNeedsTheMasterKey(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	var buf bytes.Buffer
	if _, err := e.svc.Backup(ctx, &buf); err != nil {
		t.Fatal(err)
	}
	st := kmstest.MemoryStore(t)
	if _, err := kms.Restore(ctx, st, bytes.NewReader(buf.Bytes()), kms.MasterKey{}); kms.ErrorKind(err) != kms.KindInvalid {
		t.Errorf("Restore(no master key) = %v, want invalid", err)
	}
	wantRestoreRefused(t, st, buf.Bytes(), kms.GenerateMasterKey(), "another master key")
}

// wantRestoreRefused checks that a Restore of backup into st, under mk, is
// refused as unprocessable with a message naming what it is refused for,
// and that st holds nothing after it.
func wantRestoreRefused(t *testing.T, st kms.Store, backup []byte, mk kms.MasterKey, naming string) {
	t.Helper()
	_, err := kms.Restore(context.Background(), st, bytes.NewReader(backup), mk)
	if kms.ErrorKind(err) != kms.KindUnprocessable || !strings.Contains(kms.ErrorMessage(err), naming) {
		t.Errorf("Restore(%s) = %v, want unprocessable, naming %s", naming, err, naming)
	}
	if got, recs := storeContents(t, st); len(got) != 0 || len(recs) != 0 {
		t.Errorf("Restore(%s) wrote %d entries and %d records, want none", naming, len(got), len(recs))
	}
}

// TestRestoreRefusesVersion1: a backup of version 1, whose plain SHA-256
// anyone can recompute, is refused, saying so, and nothing is written.
func TestRestoreRefusesVersion1(t *testing.T) {
	b := []byte("rkmsbak\x01")
	frame := func(kind byte, body []byte) {
		b = append(b, kind)
		b = binary.AppendUvarint(b, uint64(len(body)))
		b = append(b, body...)
	}
	frame('M', []byte(`{"version":1,"createdAt":"2026-01-02T03:04:05Z","records":0}`))
	frame('K', append([]byte{3}, "keyvalue"...))
	sum := sha256.Sum256(b) // version 1: of every byte before the end frame
	frame('E', append([]byte{1, 0}, sum[:]...))
	wantRestoreRefused(t, kmstest.MemoryStore(t), b, kms.GenerateMasterKey(), "version 1")
}

// TestBackupAcrossRekey: a backup restores with the master key its
// service ran under when it was taken, which the store it holds needs:
// one from before a rekey with the old key (not the new), one from after
// with the new key (not the old, which no longer authenticates anything).
func TestBackupAcrossRekey(t *testing.T) {
	ctx := context.Background()
	mk1, mk2 := kms.GenerateMasterKey(), kms.GenerateMasterKey()
	st := kmstest.MemoryStore(t)
	backupUnder := func(mk kms.MasterKey) []byte {
		t.Helper()
		svc, err := kms.New(st, kms.Options{MasterKey: mk})
		if err != nil {
			t.Fatal(err)
		}
		defer svc.Close()
		var buf bytes.Buffer
		if _, err := svc.Backup(ctx, &buf); err != nil {
			t.Fatal(err)
		}
		return buf.Bytes()
	}
	before := backupUnder(mk1)
	if _, err := kms.Rekey(ctx, st, mk1, mk2); err != nil {
		t.Fatal(err)
	}
	after := backupUnder(mk2)
	for _, c := range []struct {
		name   string
		backup []byte
		mk     kms.MasterKey
		ok     bool
	}{
		{"before the rekey, old key", before, mk1, true},
		{"before the rekey, new key", before, mk2, false},
		{"after the rekey, new key", after, mk2, true},
		{"after the rekey, old key", after, mk1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := kmstest.MemoryStore(t)
			_, err := kms.Restore(ctx, st, bytes.NewReader(c.backup), c.mk)
			if !c.ok {
				if kms.ErrorKind(err) != kms.KindUnprocessable {
					t.Fatalf("Restore = %v, want unprocessable", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Restore = %v", err)
			}
			if _, err := kms.VerifyAudit(ctx, st, c.mk); err != nil {
				t.Fatalf("VerifyAudit(restored) = %v", err)
			}
			svc, err := kms.New(st, kms.Options{MasterKey: c.mk})
			if err != nil {
				t.Fatalf("New(restored) = %v", err)
			}
			svc.Close()
		})
	}
}

// TestBackupFormat checks a backup's MACs as docs/FORMAT.md section 10
// describes them, with a key derived as section 8 says, using nothing of
// ours: the document and the code cannot drift apart.
func TestBackupFormat(t *testing.T) {
	mk := kms.GenerateMasterKey()
	e := newEnvOn(t, kmstest.MemoryStore(t), kms.Options{MasterKey: mk})
	var buf bytes.Buffer
	info, err := e.svc.Backup(context.Background(), &buf)
	if err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	raw, err := base64.StdEncoding.DecodeString(mk.Base64())
	if err != nil {
		t.Fatal(err)
	}
	key, err := hkdf.Key(sha256.New, raw, nil, "ringkms/v1/backup-mac", 32)
	if err != nil {
		t.Fatal(err)
	}
	if string(b[:8]) != "rkmsbak\x02" {
		t.Fatalf("backup starts with %q", b[:8])
	}
	var kinds []byte
	var entries, records uint64
	for off := 8; off < len(b); {
		kind := b[off]
		size, n := binary.Uvarint(b[off+1:])
		body := b[off+1+n : off+1+n+int(size)]
		kinds = append(kinds, kind)
		macAt := -1
		switch kind {
		case 'M':
			var m map[string]any
			if err := json.Unmarshal(body, &m); err != nil || m["version"] != 2.0 || m["records"] != float64(info.Records) {
				t.Errorf("header %s, %v", body, err)
			}
		case 'A':
			macAt = off + 1 + n
		case 'K':
			entries++
		case 'T':
			records++
		case 'E':
			macAt = off + 1 + n + int(size) - 32
			tail := binary.AppendUvarint(binary.AppendUvarint(nil, entries), records)
			if !bytes.Equal(b[off+1+n:macAt], tail) {
				t.Errorf("end counts %x, want %x", b[off+1+n:macAt], tail)
			}
		}
		if macAt >= 0 {
			h := hmac.New(sha256.New, key)
			h.Write(b[:macAt])
			if !hmac.Equal(h.Sum(nil), b[macAt:macAt+32]) {
				t.Errorf("the MAC of the %c frame at byte %d is not HMAC-SHA256 under Kbackup of the bytes before it", kind, off)
			}
		}
		off += 1 + n + int(size)
	}
	if len(kinds) < 4 || string(kinds[:2]) != "MA" || kinds[len(kinds)-1] != 'E' || entries != info.Entries || records != info.Records {
		t.Errorf("frames %q with %d entries and %d records; want M, A, ..., E with %d and %d", kinds, entries, records, info.Entries, info.Records)
	}
}

// storeContents returns the entries and trail records st holds.
func storeContents(t *testing.T, st kms.Store) (map[string]string, []string) {
	t.Helper()
	entries := map[string]string{}
	err := st.View(context.Background(), func(tx kms.Txn) error {
		return tx.Scan(kms.ScanOptions{}, func(k, v []byte) (bool, error) {
			entries[string(k)] = string(v)
			return true, nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	var recs []string
	if st.Trail().Len() > 0 {
		err = st.Trail().Scan(1, func(_ uint64, rec []byte) (bool, error) {
			recs = append(recs, string(rec))
			return true, nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return entries, recs
}
