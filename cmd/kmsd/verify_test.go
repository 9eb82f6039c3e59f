package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/store/badgerstore"
	"github.com/ringkms/kms/store/filetrail"
)

func TestVerifyAuditErrors(t *testing.T) {
	dir := t.TempDir()
	if err, _ := runErr(t, []string{"verify-audit", "-data", filepath.Join(dir, "nope")}, env{"KMS_MASTER_KEY": newKey()}); err == nil {
		t.Errorf("verify-audit on a missing directory = nil, want an error")
	}
	if err, _ := runErr(t, []string{"verify-audit", "-data", dir}, env{"KMS_MASTER_KEY": newKey()}); err == nil || !strings.Contains(err.Error(), "no store") {
		t.Errorf("verify-audit on an empty directory = %v, want an error about no store", err)
	}
}

func TestVerifyAuditInProcess(t *testing.T) {
	data := t.TempDir()
	e := env{"KMS_MASTER_KEY": newKey(), "KMS_BOOTSTRAP_API_KEY": "in-process-bootstrap-secret-0123456789"}
	s := startRun(t, []string{"-data", data, "-addr", "127.0.0.1:0"}, e)
	for i := range 3 {
		if code, body := call(t, nil, "POST", s.url+"/ks/keyrings", e["KMS_BOOTSTRAP_API_KEY"], map[string]any{"name": "r" + string(rune('a'+i))}); code != 200 {
			t.Fatalf("create ring = %d %v", code, body)
		}
	}
	s.stop(t)

	var out bytes.Buffer
	if err := run(context.Background(), []string{"verify-audit", "-data", data}, e.get, &out, io.Discard); err != nil {
		t.Fatalf("verify-audit = %v; output:\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "intact") || !regexp.MustCompile(`records checked: [1-9]`).MatchString(out.String()) {
		t.Errorf("verify-audit printed:\n%s", out.String())
	}
	// With another master key, it cannot open the store.
	err := run(context.Background(), []string{"verify-audit", "-data", data}, env{"KMS_MASTER_KEY": newKey()}.get, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "master key") {
		t.Errorf("verify-audit with another master key = %v, want an error about the master key", err)
	}

	// A byte changed in the first record of the trail's files (past the
	// 16-byte frame header) is a broken chain: exit status 3.
	seg := filepath.Join(data, "trail", "00000000000000000001.trail")
	flipFirstRecordByte(t, seg)
	out.Reset()
	err = run(context.Background(), []string{"verify-audit", "-data", data}, e.get, &out, io.Discard)
	if exitCode(err) != 3 || !strings.Contains(out.String(), "BROKEN") {
		t.Errorf("verify-audit on a damaged trail = %v (exit %d), printed:\n%s; want exit 3 and BROKEN", err, exitCode(err), out.String())
	}
}

// flipFirstRecordByte changes a byte of the first record of the trail
// segment seg, past its 16-byte frame header: a broken chain.
func flipFirstRecordByte(t *testing.T, seg string) {
	t.Helper()
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	b[16+40] ^= 1
	if err := os.WriteFile(seg, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// trailDataDir makes a data directory for kmsd with the master key e holds
// and a trail of segments of segmentSize bytes (0: the default), with a
// ring "r" and the records of encrypts encrypt calls on it when encrypts
// is more than 0.
func trailDataDir(t *testing.T, e env, segmentSize int64, encrypts int) string {
	t.Helper()
	data := t.TempDir()
	mk, err := kms.ParseMasterKey(e["KMS_MASTER_KEY"])
	if err != nil {
		t.Fatal(err)
	}
	st, err := badgerstore.OpenWith(badgerstore.DefaultOptions(data), badgerstore.Options{Trail: filetrail.Options{SegmentSize: segmentSize}})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := kms.New(st, kms.Options{MasterKey: mk})
	if err != nil {
		t.Fatal(err)
	}
	boot, err := svc.Bootstrap(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	p, err := svc.Authenticate(context.Background(), boot.Secret)
	if err != nil {
		t.Fatal(err)
	}
	ctx := kms.WithPrincipal(context.Background(), p)
	if encrypts > 0 {
		if _, err := svc.CreateKeyRing(ctx, kms.CreateKeyRingInput{Name: "r"}); err != nil {
			t.Fatal(err)
		}
	}
	for range encrypts {
		if _, err := svc.Encrypt(ctx, kms.EncryptInput{RingName: "r"}); err != nil {
			t.Fatal(err)
		}
	}
	svc.Close()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return data
}

// frameOffset returns the offset of record seq's frame in a trail segment
// that starts at record first (the frame format of store/filetrail).
func frameOffset(t *testing.T, b []byte, first, seq uint64) int {
	t.Helper()
	off := 0
	for s := first; s < seq; s++ {
		if off+16 > len(b) {
			t.Fatalf("segment ends before record %d", seq)
		}
		off += 16 + int(binary.BigEndian.Uint32(b[off:]))
	}
	return off
}

// TestVerifyAuditNamesDamage: one byte changed in record 4 of a trail of
// many records: verify-audit exits 3 naming record 4, its segment file,
// and the 3 records verified before it; kmsd refuses to start with exit 3,
// saying that the trail is damaged (not that the master key is wrong).
func TestVerifyAuditNamesDamage(t *testing.T) {
	e := env{"KMS_MASTER_KEY": newKey()}
	data := trailDataDir(t, e, 0, 80)
	seg := filepath.Join(data, "trail", "00000000000000000001.trail")
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	b[frameOffset(t, b, 1, 4)+16+40] ^= 1
	if err := os.WriteFile(seg, b, 0o600); err != nil {
		t.Fatal(err)
	}

	var out bytes.Buffer
	err = run(context.Background(), []string{"verify-audit", "-data", data}, e.get, &out, io.Discard)
	t.Logf("verify-audit printed:\n%s", out.String())
	if exitCode(err) != 3 {
		t.Errorf("verify-audit on a damaged record = %v (exit %d), want exit 3", err, exitCode(err))
	}
	for _, want := range []string{"BROKEN", "record 4 ", "00000000000000000001.trail", "records verified before the damage: 3\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("verify-audit printed:\n%s\nwant it to say %q", out.String(), want)
		}
	}

	err, _ = runErr(t, []string{"-data", data, "-addr", "127.0.0.1:0"}, e)
	t.Logf("kmsd: %v", err)
	if exitCode(err) != 3 || err == nil || !strings.Contains(err.Error(), "activity trail is damaged") ||
		!strings.Contains(err.Error(), "verify-audit") || strings.Contains(err.Error(), "master key") {
		t.Errorf("kmsd on a damaged trail = %v (exit %d), want exit 3, the trail damaged and verify-audit named, no word of the master key", err, exitCode(err))
	}
	// The damaged file is left as it was found.
	if got, err := os.ReadFile(seg); err != nil || !bytes.Equal(got, b) {
		t.Errorf("the damaged segment changed after verify-audit and a refused start (err %v)", err)
	}
}

// TestVerifyAuditSealedSegment: a damaged record in a sealed segment
// whose index file is missing is damage too (exit 3, the segment named),
// not a failure to run.
func TestVerifyAuditSealedSegment(t *testing.T) {
	e := env{"KMS_MASTER_KEY": newKey()}
	data := trailDataDir(t, e, 4096, 60)
	segs, err := filepath.Glob(filepath.Join(data, "trail", "*.trail"))
	if err != nil || len(segs) < 3 {
		t.Fatalf("trail segments = %q, %v; want 3 or more", segs, err)
	}
	seg := segs[1]
	if err := os.Remove(strings.TrimSuffix(seg, ".trail") + ".index"); err != nil {
		t.Fatal(err)
	}
	flipFirstRecordByte(t, seg)
	var out bytes.Buffer
	err = run(context.Background(), []string{"verify-audit", "-data", data}, e.get, &out, io.Discard)
	if exitCode(err) != 3 || !strings.Contains(out.String(), filepath.Base(seg)) || strings.Contains(out.String()+fmt.Sprint(err), "another") {
		t.Errorf("verify-audit on a damaged sealed segment = %v (exit %d), printed:\n%s\nwant exit 3 naming %s", err, exitCode(err), out.String(), filepath.Base(seg))
	}
	err, _ = runErr(t, []string{"-data", data, "-addr", "127.0.0.1:0"}, e)
	if exitCode(err) != 3 || err == nil || !strings.Contains(err.Error(), filepath.Base(seg)) {
		t.Errorf("kmsd on a damaged sealed segment = %v (exit %d), want exit 3 naming the segment", err, exitCode(err))
	}
}
