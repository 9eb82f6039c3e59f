package kms_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/kmstest"
)

func TestValidateRingName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"a", true},
		{"Payments-EU_2", true},
		{strings.Repeat("x", 64), true},
		{"", false},
		{strings.Repeat("x", 65), false},
		{"-lead", false},
		{"_lead", false},
		{"has space", false},
		{"dot.ted", false},
		{"star*", false},
		{"ünï", false},
		{"slash/x", false},
	}
	for _, tt := range tests {
		err := kms.ValidateRingName(tt.name)
		if (err == nil) != tt.ok {
			t.Errorf("ValidateRingName(%q) = %v, want ok=%v", tt.name, err, tt.ok)
		}
		if err != nil && !errors.Is(err, kms.ErrInvalid) {
			t.Errorf("ValidateRingName(%q) = %v, want kind invalid", tt.name, err)
		}
	}
}

func TestKeyRingLifecycle(t *testing.T) {
	e := newEnv(t)
	created := e.ring(t, "Payments")
	if created.Ring.Name != "Payments" || created.Ring.ActiveKey != created.Key.ID || created.Ring.ActiveAlgorithm != "aes256" {
		t.Fatalf("CreateKeyRing = %+v", created.Ring)
	}
	if created.PrivateKey == "" {
		t.Fatal("CreateKeyRing without publicKey returned no privateKey")
	}
	_, err := e.svc.CreateKeyRing(e.root, kms.CreateKeyRingInput{Name: "payments"})
	wantKind(t, "CreateKeyRing(duplicate, other case)", err, kms.KindConflict)

	for _, ref := range []kms.RingRef{{Name: "PAYMENTS"}, {Name: created.Ring.ID, ByID: true}} {
		got, err := e.svc.GetKeyRing(e.root, ref)
		if err != nil || got.ID != created.Ring.ID {
			t.Fatalf("GetKeyRing(%+v) = %v, %v", ref, got, err)
		}
	}
	_, err = e.svc.GetKeyRing(e.root, kms.RingRef{Name: "nope"})
	wantKind(t, "GetKeyRing(nope)", err, kms.KindNotFound)
	_, err = e.svc.GetKeyRing(e.root, kms.RingRef{Name: "00000000000000000000000000000000", ByID: true})
	wantKind(t, "GetKeyRing(unknown id)", err, kms.KindNotFound)
	_, err = e.svc.GetKeyRing(e.root, kms.RingRef{Name: "xyz", ByID: true})
	wantKind(t, "GetKeyRing(malformed id)", err, kms.KindNotFound)

	k2, err := e.svc.Rotate(e.root, kms.RotateInput{RingName: "payments", Algo: "aes256"})
	if err != nil {
		t.Fatal(err)
	}
	ring, _ := e.svc.GetKeyRing(e.root, kms.RingRef{Name: "payments"})
	if ring.ActiveKey != k2.ID || k2.ID == created.Key.ID {
		t.Fatalf("after Rotate activeKey = %s, want %s", ring.ActiveKey, k2.ID)
	}
	_, err = e.svc.Rotate(e.root, kms.RotateInput{RingName: "payments", Algo: "des"})
	wantKind(t, "Rotate(algo des)", err, kms.KindInvalid)

	keys, err := e.svc.ListKeys(e.root, kms.RingRef{Name: "payments"}, kms.PageRequest{})
	if err != nil || len(keys.Data) != 2 || keys.Data[0].KeyData != nil {
		t.Fatalf("ListKeys = %+v, %v", keys, err)
	}
	k, err := e.svc.GetKey(e.root, kms.RingRef{Name: "payments"}, created.Key.ID)
	if err != nil || k.KeyData == nil || k.KeyData.Encrypted.Key.Value != created.Key.KeyData.Encrypted.Key.Value {
		t.Fatalf("GetKey = %+v, %v", k, err)
	}
	_, err = e.svc.GetKey(e.root, kms.RingRef{Name: "payments"}, "00000000000000000000000000000000")
	wantKind(t, "GetKey(unknown)", err, kms.KindNotFound)

	del, err := e.svc.DeleteKeyRing(e.root, kms.RingRef{Name: "PAYMENTS"})
	if err != nil || del.ID != created.Ring.ID || del.Name != "Payments" {
		t.Fatalf("DeleteKeyRing = %+v, %v", del, err)
	}
	_, err = e.svc.GetKeyRing(e.root, kms.RingRef{Name: "payments"})
	wantKind(t, "GetKeyRing(after delete)", err, kms.KindNotFound)
	_, err = e.svc.GetKey(e.root, kms.RingRef{Name: created.Ring.ID, ByID: true}, created.Key.ID)
	wantKind(t, "GetKey(after delete)", err, kms.KindNotFound)
	// The name is free again.
	e.ring(t, "payments")
}

func TestDeleteKeyRingInUse(t *testing.T) {
	e := newEnv(t)
	e.ring(t, "busy")
	k, err := e.svc.CreateAPIKey(e.root, kms.APIKeyInput{AccountID: e.acct, Flags: kms.Flags{"keyring.BUSY.encrypt": true}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.svc.DeleteKeyRing(e.root, kms.RingRef{Name: "busy"})
	wantKind(t, "DeleteKeyRing(named by an active key)", err, kms.KindConflict)
	if !strings.Contains(err.Error(), k.KeyID) {
		t.Errorf("DeleteKeyRing error %q does not name the API key %s", err, k.KeyID)
	}

	// Only flags that grant hold a ring.
	e.ring(t, "victim")
	if _, err := e.svc.CreateAPIKey(e.root, kms.APIKeyInput{AccountID: e.acct, Flags: kms.Flags{"keyring.victim.delete": false}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.DeleteKeyRing(e.root, kms.RingRef{Name: "victim"}); err != nil {
		t.Errorf("DeleteKeyRing(named by a flag set to false) = %v", err)
	}
}

func TestGroupsAreSeparate(t *testing.T) {
	e := newEnv(t)
	a, err := e.svc.CreateAsymKeyRing(e.root, kms.CreateAsymKeyRingInput{Name: "asy"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.svc.GetKeyRing(e.root, kms.RingRef{Name: "asy"})
	wantKind(t, "GetKeyRing(asym ring)", err, kms.KindNotFound)
	_, err = e.svc.Encrypt(e.root, kms.EncryptInput{RingName: "asy"})
	wantKind(t, "Encrypt(asym ring)", err, kms.KindNotFound)
	_, err = e.svc.CreateKeyRing(e.root, kms.CreateKeyRingInput{Name: "ASY"})
	wantKind(t, "CreateKeyRing(name of an asym ring)", err, kms.KindConflict)
	e.ring(t, "ks1")
	_, err = e.svc.GetAsymKey(e.root, kms.RingRef{Name: "ks1"}, a.Key.ID)
	wantKind(t, "GetAsymKey(ks ring)", err, kms.KindNotFound)
	list, err := e.svc.ListKeyRings(e.root, kms.PageRequest{})
	if err != nil || len(list.Data) != 1 || list.Data[0].Name != "ks1" {
		t.Fatalf("ListKeyRings = %+v, %v; want only ks1", list, err)
	}
}

func TestAsymKeys(t *testing.T) {
	e := newEnv(t)
	a, err := e.svc.CreateAsymKeyRing(e.root, kms.CreateAsymKeyRingInput{Name: "plain", KeyProps: map[string]any{"use": "files"}})
	if err != nil {
		t.Fatal(err)
	}
	if a.PrivateKey == "" || a.Key.Type != "AES256" || a.Key.Props["use"] != "files" {
		t.Fatalf("CreateAsymKeyRing = %+v", a)
	}
	got, err := e.svc.GetAsymKey(e.root, kms.RingRef{Name: "plain"}, a.Key.ID)
	if err != nil || got.KeyData.Key != a.Key.KeyData.Key {
		t.Fatalf("GetAsymKey = %+v, %v; want key %q", got, err, a.Key.KeyData.Key)
	}
	r, err := e.svc.RotateAsym(e.root, kms.RotateInput{RingName: "plain"})
	if err != nil || r.ID == a.Key.ID || r.KeyData.Key == a.Key.KeyData.Key {
		t.Fatalf("RotateAsym = %+v, %v", r, err)
	}
}

func TestConfigAndMaxEncryptCount(t *testing.T) {
	e := newEnv(t)
	created := e.ring(t, "counted")
	cfg, err := e.svc.GetConfig(e.root, kms.RingRef{Name: "counted"})
	if err != nil || cfg.Algos.AES256.MaxEncryptCount != 0 {
		t.Fatalf("GetConfig = %+v, %v", cfg, err)
	}
	cfg.Algos.AES256.MaxEncryptCount = 3
	cfg.Key.Props = map[string]any{"team": "blue"}
	cfg.Props = map[string]any{"env": "test"}
	if _, err := e.svc.SetConfig(e.root, kms.RingRef{Name: "counted"}, cfg); err != nil {
		t.Fatal(err)
	}
	ring, _ := e.svc.GetKeyRing(e.root, kms.RingRef{Name: "counted"})
	if ring.Props["env"] != "test" {
		t.Errorf("ring props = %v, want env=test", ring.Props)
	}
	var keys []string
	for i := 0; i < 7; i++ {
		res := e.encrypt(t, "counted")
		keys = append(keys, res.Key.ID)
		if i >= 3 && res.Key.Props["team"] != "blue" {
			t.Errorf("encrypt %d: key props = %v, want the configured key props", i, res.Key.Props)
		}
	}
	if keys[0] != created.Key.ID || keys[0] != keys[2] || keys[3] == keys[2] || keys[3] != keys[5] || keys[6] == keys[5] {
		t.Fatalf("keys used = %v, want a new key after every 3 calls", keys)
	}
	_, err = e.svc.SetConfig(e.root, kms.RingRef{Name: "counted"}, &kms.KeyRingConfig{Algos: kms.ConfigAlgos{AES256: kms.AlgoConfig{MaxEncryptCount: -1}}})
	wantKind(t, "SetConfig(negative)", err, kms.KindInvalid)
	_, err = e.svc.GetConfig(e.root, kms.RingRef{Name: ""})
	wantKind(t, "GetConfig(\"\")", err, kms.KindInvalid)
	_, err = e.svc.GetConfig(e.root, kms.RingRef{Name: "missing"})
	wantKind(t, "GetConfig(missing)", err, kms.KindNotFound)
}

// TestMaxEncryptCountConcurrent checks that concurrent encrypts never use a
// key more than maxEncryptCount times.
func TestMaxEncryptCountConcurrent(t *testing.T) {
	e := newEnv(t)
	e.ring(t, "busy")
	if _, err := e.svc.SetConfig(e.root, kms.RingRef{Name: "busy"}, &kms.KeyRingConfig{Algos: kms.ConfigAlgos{AES256: kms.AlgoConfig{MaxEncryptCount: 5}}}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	uses := map[string]int{}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				res, err := e.svc.Encrypt(e.root, kms.EncryptInput{RingName: "busy"})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				uses[res.Key.ID]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	total := 0
	for id, n := range uses {
		total += n
		if n > 5 {
			t.Errorf("key %s served %d encrypts, want at most 5", id, n)
		}
	}
	if total != 80 || len(uses) < 16 {
		t.Errorf("%d encrypts over %d keys, want 80 over at least 16", total, len(uses))
	}
}

func TestPermissions(t *testing.T) {
	e := newEnv(t)
	e.ring(t, "pay")
	e.ring(t, "other")
	enc := e.as(t, kms.Flags{"keyring.pay.encrypt": true})
	wild := e.as(t, kms.Flags{"keyring.*.rotate": true})
	none := e.as(t, kms.Flags{})

	if _, err := e.svc.Encrypt(enc, kms.EncryptInput{RingName: "PAY"}); err != nil {
		t.Errorf("Encrypt with keyring.pay.encrypt = %v", err)
	}
	_, err := e.svc.Encrypt(enc, kms.EncryptInput{RingName: "other"})
	wantKind(t, "Encrypt(other) with keyring.pay.encrypt", err, kms.KindPermissionDenied)
	_, err = e.svc.Rotate(enc, kms.RotateInput{RingName: "pay"})
	wantKind(t, "Rotate without flag", err, kms.KindPermissionDenied)
	if !strings.Contains(err.Error(), "keyring.pay.rotate") {
		t.Errorf("Rotate error %q does not name the flag", err)
	}
	if _, err := e.svc.Rotate(wild, kms.RotateInput{RingName: "other"}); err != nil {
		t.Errorf("Rotate with keyring.*.rotate = %v", err)
	}
	_, err = e.svc.ListKeyRings(none, kms.PageRequest{})
	wantKind(t, "ListKeyRings without flag", err, kms.KindPermissionDenied)
	_, err = e.svc.CreateKeyRing(none, kms.CreateKeyRingInput{Name: "x"})
	wantKind(t, "CreateKeyRing without flag", err, kms.KindPermissionDenied)
	// A key without a flag cannot mint a key that has it.
	admin := e.as(t, kms.Flags{"apikeys.write": true, "keyring.pay.encrypt": true})
	_, err = e.svc.CreateAPIKey(admin, kms.APIKeyInput{AccountID: e.acct, Flags: kms.Flags{"*": true}})
	wantKind(t, "CreateAPIKey(escalate to *)", err, kms.KindPermissionDenied)
	if _, err := e.svc.CreateAPIKey(admin, kms.APIKeyInput{AccountID: e.acct, Flags: kms.Flags{"keyring.pay.encrypt": true}}); err != nil {
		t.Errorf("CreateAPIKey(subset) = %v", err)
	}
	// No principal at all fails closed.
	_, err = e.svc.Encrypt(context.Background(), kms.EncryptInput{RingName: "pay"})
	wantKind(t, "Encrypt without principal", err, kms.KindUnauthenticated)
}

func TestFlagsAllows(t *testing.T) {
	tests := []struct {
		flags kms.Flags
		flag  string
		want  bool
	}{
		{kms.Flags{"*": true}, "keyring.a.rotate", true},
		{kms.Flags{"keyring.a.rotate": true}, "keyring.a.rotate", true},
		{kms.Flags{"keyring.a.rotate": false}, "keyring.a.rotate", false},
		{kms.Flags{"keyring.*.rotate": true}, "keyring.a.rotate", true},
		{kms.Flags{"keyring.a.*": true}, "keyring.a.encrypt", true},
		{kms.Flags{"keyring.b.rotate": true}, "keyring.a.rotate", false},
		{kms.Flags{"keyring.*.encrypt": true}, "keyring.a.rotate", false},
		{kms.Flags{}, "keyring.a.rotate", false},
		// export is granted only by a flag naming it, or by "*".
		{kms.Flags{"*": true}, "keyring.a.export", true},
		{kms.Flags{"keyring.a.export": true}, "keyring.a.export", true},
		{kms.Flags{"keyring.*.export": true}, "keyring.a.export", true},
		{kms.Flags{"keyring.a.*": true}, "keyring.a.export", false},
		{kms.Flags{"keyring.*.*": true}, "keyring.a.export", false},
		{kms.Flags{"keyring.a.read": true, "keyring.a.rotate": true, "keyring.a.create": true, "keyring.a.config": true}, "keyring.a.export", false},
		{kms.Flags{"keyring.a.export": true}, "keyring.a.read", false},
		{nil, "keyring.a.rotate", false},
	}
	for _, tt := range tests {
		if got := tt.flags.Allows(tt.flag); got != tt.want {
			t.Errorf("%v.Allows(%q) = %v, want %v", tt.flags, tt.flag, got, tt.want)
		}
	}
}

func TestAuthenticate(t *testing.T) {
	e := newEnv(t)
	for _, secret := range []string{"", "rk_nope", strings.Repeat("x", 600)} {
		_, err := e.svc.Authenticate(context.Background(), secret)
		wantKind(t, fmt.Sprintf("Authenticate(%.10q)", secret), err, kms.KindUnauthenticated)
	}
}

func TestBootstrapOnce(t *testing.T) {
	e := newEnv(t)
	b, err := e.svc.Bootstrap(context.Background(), strings.Repeat("s", 40))
	if err != nil || b.Created {
		t.Fatalf("second Bootstrap = %+v, %v; want nothing created", b, err)
	}
	_, err = e.svc.Bootstrap(context.Background(), "short")
	wantKind(t, "Bootstrap(short secret)", err, kms.KindInvalid)
}

func TestKeyRingPlanLimit(t *testing.T) {
	e := newEnvOn(t, kmstest.MemoryStore(t), kms.Options{MasterKey: kms.GenerateMasterKey(), Limits: kms.Limits{MaxKeyRings: 2}})
	e.ring(t, "one")
	if _, err := e.svc.CreateAsymKeyRing(e.root, kms.CreateAsymKeyRingInput{Name: "two"}); err != nil {
		t.Fatal(err)
	}
	_, err := e.svc.CreateKeyRing(e.root, kms.CreateKeyRingInput{Name: "three"})
	wantKind(t, "CreateKeyRing(past the limit)", err, kms.KindLimit)
	if !strings.Contains(err.Error(), "at most 2 key rings") {
		t.Errorf("limit error %q does not name the maximum", err)
	}
	if _, err := e.svc.DeleteKeyRing(e.root, kms.RingRef{Name: "one"}); err != nil {
		t.Fatal(err)
	}
	e.ring(t, "three")
}

// TestEncryptCountSurvivesRestart counts encrypt calls on a ring without a
// limit, starts a new Service on the same store, and sets a limit there:
// after Close the count resumes where it was; after a crash (no Close) it
// resumes at its reservation, never below the calls made.
func TestEncryptCountSurvivesRestart(t *testing.T) {
	for _, tc := range []struct {
		name  string
		close bool
		max   int64
		want  string // keys of the encrypts after the restart, A the key used before
	}{
		{"close", true, 5, "AABBBBBC"},
		{"crash", false, 5, "BBBBBC"},
		{"close, limit reached", true, 3, "BBBC"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := kmstest.MemoryStore(t)
			key, secret := kms.GenerateMasterKey(), ""
			first, root := startWithRing(t, st, key, &secret)
			var ids []string
			encrypt := func(svc *kms.Service, root context.Context) {
				t.Helper()
				res, err := svc.Encrypt(root, kms.EncryptInput{RingName: "r"})
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, res.Key.ID)
			}
			for range 3 {
				encrypt(first, root)
			}
			if tc.close {
				if err := first.Close(); err != nil {
					t.Fatalf("Close() = %v", err)
				}
			} else {
				t.Cleanup(func() { first.Close() })
			}
			second, root := startOn(t, st, key, &secret)
			t.Cleanup(func() { second.Close() })
			if _, err := second.SetConfig(root, kms.RingRef{Name: "r"}, &kms.KeyRingConfig{Algos: kms.ConfigAlgos{AES256: kms.AlgoConfig{MaxEncryptCount: tc.max}}}); err != nil {
				t.Fatal(err)
			}
			for range len(tc.want) {
				encrypt(second, root)
			}
			if got, want := kmstest.UseOrder(ids), "AAA"+tc.want; got != want {
				t.Fatalf("3 encrypts, restart, maxEncryptCount %d, %d encrypts used keys %s, want %s", tc.max, len(tc.want), got, want)
			}
		})
	}
}

// TestEncryptCountConcurrent makes concurrent encrypt calls on a ring
// without a limit, across many reserved blocks, then sets the limit two
// above their number: the key serves exactly two more calls.
func TestEncryptCountConcurrent(t *testing.T) {
	e := newEnv(t)
	kms.SetUnlimitedBlock(e.svc, 64)
	created := e.ring(t, "busy")
	const callers, calls = 8, 300 // 2400 calls: 37 blocks
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for range calls {
				res, err := e.svc.Encrypt(e.root, kms.EncryptInput{RingName: "busy"})
				if err != nil {
					t.Error(err)
					return
				}
				if res.Key.ID != created.Key.ID {
					t.Errorf("encrypt used key %s, want %s: the ring has no limit", res.Key.ID, created.Key.ID)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if _, err := e.svc.SetConfig(e.root, kms.RingRef{Name: "busy"}, &kms.KeyRingConfig{Algos: kms.ConfigAlgos{AES256: kms.AlgoConfig{MaxEncryptCount: callers*calls + 2}}}); err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, true, false} {
		res := e.encrypt(t, "busy")
		if same := res.Key.ID == created.Key.ID; same != want {
			t.Fatalf("encrypt %d after %d calls with maxEncryptCount %d: same key %v, want %v", i+1, callers*calls, callers*calls+2, same, want)
		}
	}
}
