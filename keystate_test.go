package kms_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/kmstest"
	"github.com/ringkms/kms/store/badgerstore"
)

// wantState fails unless err is a use of a key in state (Error.State).
func wantState(tb testing.TB, what string, err error, kind kms.Kind, state string) {
	tb.Helper()
	wantKind(tb, what, err, kind)
	if e := kms.AsError(err); e.State != state {
		tb.Fatalf("%s = %v with state %q, want %q", what, err, e.State, state)
	}
}

// keyState returns the state of key id of ring "r" as ListKeys shows it.
func keyState(tb testing.TB, e *env, id string) *kms.Key {
	tb.Helper()
	l, err := e.svc.ListKeys(e.root, kms.RingRef{Name: "r"}, kms.PageRequest{})
	if err != nil {
		tb.Fatal(err)
	}
	for _, k := range l.Data {
		if k.ID == id {
			return k
		}
	}
	tb.Fatalf("ListKeys has no key %s", id)
	return nil
}

func TestKeyDisable(t *testing.T) {
	e := newEnv(t)
	first := e.ring(t, "r").Key.ID
	old := e.encrypt(t, "r")
	ref := kms.RingRef{Name: "r"}

	_, err := e.svc.SetKeyState(e.root, ref, first, kms.KeyStateInput{State: "disabled"})
	wantKind(t, "SetKeyState(active key, disabled)", err, kms.KindInvalid)
	_, err = e.svc.DestroyKey(e.root, ref, first, kms.DestroyKeyInput{})
	wantKind(t, "DestroyKey(active key)", err, kms.KindInvalid)
	_, err = e.svc.SetKeyState(e.root, ref, first, kms.KeyStateInput{State: "gone"})
	wantKind(t, "SetKeyState(gone)", err, kms.KindInvalid)
	_, err = e.svc.SetKeyState(e.root, ref, "01a2000000000000000000000000beef", kms.KeyStateInput{State: "disabled"})
	wantKind(t, "SetKeyState(unknown key)", err, kms.KindNotFound)
	if _, err := e.svc.SetKeyState(e.as(t, kms.Flags{"keyring.r.read": true, "keyring.r.rotate": true}), ref, first, kms.KeyStateInput{State: "disabled", Rotate: true}); !errors.Is(err, kms.ErrPermissionDenied) {
		t.Fatalf("SetKeyState without keyring.r.keys = %v, want permission denied", err)
	}

	_, err = e.svc.SetKeyState(e.as(t, kms.Flags{"keyring.r.keys": true}), ref, first, kms.KeyStateInput{State: "disabled", Rotate: true})
	wantKind(t, "SetKeyState(rotate) without keyring.r.rotate", err, kms.KindPermissionDenied)
	k, err := e.svc.SetKeyState(e.as(t, kms.Flags{"keyring.r.keys": true, "keyring.r.rotate": true}), ref, first, kms.KeyStateInput{State: "disabled", Rotate: true})
	if err != nil {
		t.Fatalf("SetKeyState(disabled, rotate) = %v", err)
	}
	if k.State != kms.KeyDisabled || k.KeyData != nil {
		t.Fatalf("SetKeyState(disabled) = %+v, want state disabled and no key data", k)
	}
	ring, err := e.svc.GetKeyRing(e.root, ref)
	if err != nil {
		t.Fatal(err)
	}
	if ring.ActiveKey == first {
		t.Fatalf("the ring's active key is still %s after disabling it with rotate", first)
	}
	for range 5 {
		res := e.encrypt(t, "r")
		if res.Key.ID == first {
			t.Fatalf("Encrypt handed out the disabled key %s", first)
		}
	}
	_, err = e.svc.Decrypt(e.root, kms.DecryptInput{Hash: old.Hash, Header: old.Header})
	wantState(t, "Decrypt(disabled key)", err, kms.KindDisabled, kms.KeyDisabled)
	_, err = e.svc.GetKey(e.root, ref, first)
	wantState(t, "GetKey(disabled key)", err, kms.KindDisabled, kms.KeyDisabled)
	if got := keyState(t, e, first).State; got != kms.KeyDisabled {
		t.Fatalf("ListKeys: state %q, want disabled", got)
	}
	if got := keyState(t, e, ring.ActiveKey).State; got != kms.KeyEnabled {
		t.Fatalf("ListKeys: active key state %q, want enabled", got)
	}

	if _, err := e.svc.SetKeyState(e.root, ref, first, kms.KeyStateInput{State: "enabled"}); err != nil {
		t.Fatalf("SetKeyState(enabled) = %v", err)
	}
	res, err := e.svc.Decrypt(e.root, kms.DecryptInput{Hash: old.Hash, Header: old.Header})
	if err != nil || res.Key.ID != first || res.Key.State != kms.KeyEnabled {
		t.Fatalf("Decrypt(enabled again) = %+v, %v", res, err)
	}
	states := map[string]int{}
	l, err := e.svc.SearchActivity(e.root, kms.ActivityFilter{Action: "key.state"}, kms.PageRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range l.Data {
		if a.Props["result"] == "ok" {
			states[a.Props["state"].(string)]++
		}
	}
	if states[kms.KeyDisabled] != 1 || states[kms.KeyEnabled] != 1 {
		t.Fatalf("key.state records that succeeded, by state: %v; want one disabled, one enabled", states)
	}

	// The uses of the disabled key were refused: their records say valid
	// false, so that a search for refused operations finds them.
	l, err = e.svc.SearchActivity(e.root, kms.ActivityFilter{Valid: new(false)}, kms.PageRequest{})
	if err != nil {
		t.Fatal(err)
	}
	refused := map[string]int{}
	for _, a := range l.Data {
		if a.Props["result"] == "disabled" {
			refused[a.Action]++
		}
	}
	if refused["decrypt"] != 1 || refused["key.read"] != 1 {
		t.Fatalf("refused records of the disabled key, by action: %v; want a decrypt and a key.read", refused)
	}
}

// TestKeyDestroy schedules a destruction, cancels it, schedules it again
// and lets it fall due.
func TestKeyDestroy(t *testing.T) {
	clock := kmstest.ClockAt(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	st := kmstest.MemoryStore(t)
	e := newEnvOn(t, st, kms.Options{MasterKey: kms.GenerateMasterKey(), Now: clock.Now})
	first := e.ring(t, "r").Key.ID
	old := e.encrypt(t, "r")
	ref := kms.RingRef{Name: "r"}
	_, err := e.svc.DestroyKey(e.root, ref, first, kms.DestroyKeyInput{After: "59m", Rotate: true})
	wantKind(t, "DestroyKey(59m, default minimum 1h)", err, kms.KindInvalid)
	_, err = e.svc.DestroyKey(e.root, ref, first, kms.DestroyKeyInput{After: "soon", Rotate: true})
	wantKind(t, "DestroyKey(soon)", err, kms.KindInvalid)

	k, err := e.svc.DestroyKey(e.root, ref, first, kms.DestroyKeyInput{Rotate: true})
	if err != nil {
		t.Fatalf("DestroyKey(rotate) = %v", err)
	}
	if want := clock.Now().Add(kms.DefaultDestroyDelay); k.State != kms.KeyDestroyScheduled || k.DestroyAt == nil || !k.DestroyAt.Equal(want) {
		t.Fatalf("DestroyKey = %+v, want destroy_scheduled at %v", k, want)
	}
	_, err = e.svc.Decrypt(e.root, kms.DecryptInput{Hash: old.Hash, Header: old.Header})
	wantState(t, "Decrypt(scheduled key)", err, kms.KindDisabled, kms.KeyDestroyScheduled)
	_, err = e.svc.SetKeyState(e.root, ref, first, kms.KeyStateInput{State: "enabled"})
	wantKind(t, "SetKeyState(scheduled key, enabled)", err, kms.KindConflict)
	_, err = e.svc.DestroyKey(e.root, ref, first, kms.DestroyKeyInput{})
	wantKind(t, "DestroyKey(scheduled key)", err, kms.KindConflict)

	if k, err = e.svc.CancelDestroyKey(e.root, ref, first); err != nil || k.State != kms.KeyDisabled || k.DestroyAt != nil {
		t.Fatalf("CancelDestroyKey = %+v, %v; want disabled", k, err)
	}
	_, err = e.svc.CancelDestroyKey(e.root, ref, first)
	wantKind(t, "CancelDestroyKey(disabled key)", err, kms.KindConflict)
	clock.Advance(48 * time.Hour)
	if err := kms.DestroyDue(context.Background(), e.svc); err != nil {
		t.Fatal(err)
	}
	if got := keyState(t, e, first).State; got != kms.KeyDisabled {
		t.Fatalf("a cancelled destruction: state %q, want disabled", got)
	}

	if _, err := e.svc.DestroyKey(e.root, ref, first, kms.DestroyKeyInput{After: "2h"}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour)
	if err := kms.DestroyDue(context.Background(), e.svc); err != nil {
		t.Fatal(err)
	}
	if got := keyState(t, e, first).State; got != kms.KeyDestroyScheduled {
		t.Fatalf("an hour before its time: state %q, want destroy_scheduled", got)
	}
	clock.Advance(time.Hour)
	for range 2 { // the second pass finds nothing to do
		if err := kms.DestroyDue(context.Background(), e.svc); err != nil {
			t.Fatal(err)
		}
	}
	if got := keyState(t, e, first); got.State != kms.KeyDestroyed || got.DestroyAt != nil {
		t.Fatalf("at its time: %+v, want destroyed", got)
	}
	_, err = e.svc.Decrypt(e.root, kms.DecryptInput{Hash: old.Hash, Header: old.Header})
	wantState(t, "Decrypt(destroyed key)", err, kms.KindDestroyed, kms.KeyDestroyed)
	_, err = e.svc.GetKey(e.root, ref, first)
	wantKind(t, "GetKey(destroyed key)", err, kms.KindDestroyed)
	for name, call := range map[string]func() error{
		"enable": func() error {
			_, err := e.svc.SetKeyState(e.root, ref, first, kms.KeyStateInput{State: "enabled"})
			return err
		},
		"destroy": func() error { _, err := e.svc.DestroyKey(e.root, ref, first, kms.DestroyKeyInput{}); return err },
		"cancel":  func() error { _, err := e.svc.CancelDestroyKey(e.root, ref, first); return err },
	} {
		wantKind(t, name+" a destroyed key", call(), kms.KindDestroyed)
	}
	if _, err := e.svc.LookupHash(e.root, old.Hash); err != nil {
		t.Fatalf("LookupHash(hash of a destroyed key) = %v: its metadata stays", err)
	}
	l, err := e.svc.SearchActivity(e.root, kms.ActivityFilter{Action: "key.destroy"}, kms.PageRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Data) != 1 || l.Data[0].Props["keyId"] != first || l.Data[0].Ring != "r" {
		t.Fatalf("key.destroy records: %+v, want one for %s", l.Data, first)
	}
}

// TestAsymKeyStates: the states hold for /asym keys too.
func TestAsymKeyStates(t *testing.T) {
	e := newEnv(t)
	created, err := e.svc.CreateAsymKeyRing(e.root, kms.CreateAsymKeyRingInput{Name: "a"})
	if err != nil {
		t.Fatal(err)
	}
	ref := kms.RingRef{Name: "a"}
	first := created.Key.ID
	if created.Key.State != kms.KeyEnabled {
		t.Fatalf("new asym key state %q, want enabled", created.Key.State)
	}
	_, err = e.svc.SetAsymKeyState(e.root, ref, first, kms.KeyStateInput{State: "disabled"})
	wantKind(t, "SetAsymKeyState(active key)", err, kms.KindInvalid)
	if _, err := e.svc.SetAsymKeyState(e.root, ref, first, kms.KeyStateInput{State: "disabled", Rotate: true}); err != nil {
		t.Fatal(err)
	}
	_, err = e.svc.GetAsymKey(e.root, ref, first)
	wantState(t, "GetAsymKey(disabled)", err, kms.KindDisabled, kms.KeyDisabled)
	_, err = e.svc.SetKeyState(e.root, ref, first, kms.KeyStateInput{State: "enabled"})
	wantKind(t, "SetKeyState(an asym ring)", err, kms.KindNotFound)
	if _, err := e.svc.SetAsymKeyState(e.root, ref, first, kms.KeyStateInput{State: "enabled"}); err != nil {
		t.Fatal(err)
	}
	if k, err := e.svc.GetAsymKey(e.root, ref, first); err != nil || k.KeyData.Key != created.Key.KeyData.Key {
		t.Fatalf("GetAsymKey(enabled again) = %+v, %v", k, err)
	}
	if _, err := e.svc.DestroyAsymKey(e.root, ref, first, kms.DestroyKeyInput{After: "1h"}); err != nil {
		t.Fatal(err)
	}
	if k, err := e.svc.CancelDestroyAsymKey(e.root, ref, first); err != nil || k.State != kms.KeyDisabled {
		t.Fatalf("CancelDestroyAsymKey = %+v, %v", k, err)
	}
}

// TestDestroyAfterRestart schedules a destruction, closes the Service and
// its store, and opens them again when the destruction is due: the new
// Service's destroyer destroys the key, and Badger's files no longer hold
// its wrapped key material.
func TestDestroyAfterRestart(t *testing.T) {
	dir := t.TempDir()
	open := func() *badgerstore.Store { return openUncompressed(t, dir) }
	clock := kmstest.ClockAt(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	mk := kms.GenerateMasterKey()
	st := open()
	svc, err := kms.New(st, kms.Options{MasterKey: mk, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	b, err := svc.Bootstrap(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	root := func(svc *kms.Service) context.Context {
		p, err := svc.Authenticate(context.Background(), b.Secret)
		if err != nil {
			t.Fatal(err)
		}
		return kms.WithPrincipal(context.Background(), p)
	}
	created, err := svc.CreateKeyRing(root(svc), kms.CreateKeyRingInput{Name: "r", KEM: "x25519"})
	if err != nil {
		t.Fatal(err)
	}
	wrapped := []byte(created.Key.KeyData.Encrypted.Key.Value)
	if _, err := svc.DestroyKey(root(svc), kms.RingRef{Name: "r"}, created.Key.ID, kms.DestroyKeyInput{After: "1h", Rotate: true}); err != nil {
		t.Fatal(err)
	}
	svc.Close()
	st.Close()
	if files := filesHolding(t, dir, wrapped); len(files) == 0 {
		t.Fatal("the store's files do not hold the wrapped key before its destruction: the test cannot see it")
	}

	clock.Advance(time.Hour)
	st = open()
	svc, err = kms.New(st, kms.Options{MasterKey: mk, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	for { // the destroyer's first pass starts with the Service
		n, next := kms.DestroyPasses(svc)
		if n > 0 {
			break
		}
		<-next
	}
	_, err = svc.GetKey(root(svc), kms.RingRef{Name: "r"}, created.Key.ID)
	wantKind(t, "GetKey(after the restart, due)", err, kms.KindDestroyed)
	if err := svc.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if files := filesHolding(t, dir, wrapped); len(files) > 0 {
		t.Fatalf("after destruction, the wrapped key is still in %v", files)
	}
}

// filesHolding returns the files under dir that contain b.
func filesHolding(t *testing.T, dir string, b []byte) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.Contains(data, b) {
			out = append(out, filepath.Base(path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDestroyOnceAcrossNodes: two Services over one PostgreSQL store
// race to destroy a due key; it is destroyed once, with one record.
func TestDestroyOnceAcrossNodes(t *testing.T) {
	ctx := context.Background()
	clock := kmstest.ClockAt(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	nodes := pgNodes(t, 2, kms.Options{MasterKey: kms.GenerateMasterKey(), Now: clock.Now, MinDestroyDelay: -1}, nil)
	root := bootstrapRoot(t, nodes[0])
	created, err := nodes[0].CreateKeyRing(root, kms.CreateKeyRingInput{Name: "r", KEM: "x25519"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nodes[0].DestroyKey(root, kms.RingRef{Name: "r"}, created.Key.ID, kms.DestroyKeyInput{After: "1m", Rotate: true}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	var wg sync.WaitGroup
	errs := make([]error, len(nodes))
	for i, svc := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = kms.DestroyDue(ctx, svc)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("node %d: DestroyDue = %v", i, err)
		}
	}
	// The node that destroyed the key sees it at once, the other within
	// the coherence bound of a second (polled for longer: CI is shared).
	for i, svc := range nodes {
		var err error
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			_, err = svc.GetKey(root, kms.RingRef{Name: "r"}, created.Key.ID)
			if kms.ErrorKind(err) == kms.KindDestroyed || time.Now().After(deadline) {
				break
			}
		}
		wantKind(t, "GetKey on node "+string(rune('0'+i)), err, kms.KindDestroyed)
	}
	l, err := nodes[1].SearchActivity(root, kms.ActivityFilter{Action: "key.destroy"}, kms.PageRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Data) != 1 {
		t.Fatalf("key.destroy records: %d, want 1", len(l.Data))
	}
}

// staleNodes are two nodes on one PostgreSQL database, bootstrapped, and
// a context of the root key on each: the second never hears of the
// first's writes but when it empties its caches (unwatched).
func staleNodes(t *testing.T) ([]*kms.Service, [2]context.Context) {
	t.Helper()
	ctx := context.Background()
	nodes := pgNodes(t, 2, kms.Options{MasterKey: kms.GenerateMasterKey()}, func(i int, st kms.Store) kms.Store {
		if i == 1 {
			return unwatched{st}
		}
		return st
	})
	const secret = "stale-node-bootstrap-secret-0123456789"
	if _, err := nodes[0].Bootstrap(ctx, secret); err != nil {
		t.Fatal(err)
	}
	var roots [2]context.Context
	for i, svc := range nodes {
		p, err := svc.Authenticate(ctx, secret)
		if err != nil {
			t.Fatal(err)
		}
		roots[i] = kms.WithPrincipal(ctx, p)
	}
	return nodes, roots
}

// unwatched hides a store's Watch: a Service over it learns of other
// processes' writes only when it empties its caches (every 500 ms).
type unwatched struct{ kms.Store }

// TestStaleNodeNeverHandsOutDisabledKey: a node whose cache has not yet
// seen another node rotate a ring and disable its old key (one call,
// "rotate": true) refuses to hand the old key out: the encrypt's commit
// checks the key it hands out.
func TestStaleNodeNeverHandsOutDisabledKey(t *testing.T) {
	nodes, roots := staleNodes(t)
	if _, err := nodes[0].CreateKeyRing(roots[0], kms.CreateKeyRingInput{Name: "leaky"}); err != nil {
		t.Fatal(err)
	}
	old, err := nodes[1].Encrypt(roots[1], kms.EncryptInput{RingName: "leaky"}) // node 1 caches the ring and its key
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nodes[0].SetKeyState(roots[0], kms.RingRef{Name: "leaky"}, old.Key.ID, kms.KeyStateInput{State: kms.KeyDisabled, Rotate: true}); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		res, err := nodes[1].Encrypt(roots[1], kms.EncryptInput{RingName: "leaky"})
		switch {
		case err == nil && res.Key.ID == old.Key.ID:
			t.Fatalf("the other node handed out key %s after it was disabled", old.Key.ID)
		case err != nil && kms.ErrorKind(err) != kms.KindDisabled:
			t.Fatalf("Encrypt on the other node = %v, want the new key or a Disabled error", err)
		}
	}
}
