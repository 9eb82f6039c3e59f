package kms_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/kmstest"
)

func wantUsage(tb testing.TB, svc *kms.Service, ctx context.Context, ring, keyID string, enc, dec uint64) *kms.KeyUsage {
	tb.Helper()
	u, err := svc.KeyUsage(ctx, kms.RingRef{Name: ring}, keyID)
	if err != nil {
		tb.Fatalf("KeyUsage = %v", err)
	}
	if u.KeyID != keyID || u.EncryptCount != enc || u.DecryptCount != dec {
		tb.Fatalf("KeyUsage = %+v, want key %s with %d encrypts and %d decrypts", u, keyID, enc, dec)
	}
	return u
}

// TestKeyUsageCountsCalls: the usage of a key counts the encrypt calls
// that handed it out and the decrypt calls that returned it, and nothing
// refused or failed; its times are those of the first and last; key reads
// and lists carry the encrypt count.
func TestKeyUsageCountsCalls(t *testing.T) {
	e, clock := newEnvAt(t, time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	created := e.ring(t, "r")
	first := created.Key.ID
	wantUsage(t, e.svc, e.root, "r", first, 0, 0)
	if u, _ := e.svc.KeyUsage(e.root, kms.RingRef{Name: "r"}, first); u.FirstUsedAt != nil || u.LastUsedAt != nil {
		t.Fatalf("unused key: times %v, %v; want none", u.FirstUsedAt, u.LastUsedAt)
	}

	clock.Advance(time.Second)
	start := clock.Now()
	var enc []*kms.EncryptResult
	for i := range 7 {
		in := kms.EncryptInput{RingName: "r"}
		if i%3 == 0 {
			in.Asset = &kms.AssetInput{Data: map[string]any{"i": i}}
		}
		res, err := e.svc.Encrypt(e.root, in)
		if err != nil {
			t.Fatal(err)
		}
		enc = append(enc, res)
		clock.Advance(time.Millisecond)
	}
	for _, res := range enc[:4] {
		if _, err := e.svc.Decrypt(e.root, kms.DecryptInput{Hash: res.Hash, Header: res.Header}); err != nil {
			t.Fatal(err)
		}
	}
	end := clock.Now()
	clock.Advance(time.Millisecond) // the refused calls below come later, and are not counted
	if _, err := e.svc.Decrypt(e.root, kms.DecryptInput{Hash: enc[0].Hash, Header: enc[1].Header}); kms.ErrorKind(err) != kms.KindUnprocessable {
		t.Fatalf("mismatched decrypt = %v, want unprocessable", err)
	}
	noDecrypt := e.as(t, kms.Flags{"keyring.r.encrypt": true})
	if _, err := e.svc.Decrypt(noDecrypt, kms.DecryptInput{Hash: enc[0].Hash, Header: enc[0].Header}); kms.ErrorKind(err) != kms.KindPermissionDenied {
		t.Fatalf("decrypt without the flag = %v, want permission denied", err)
	}
	u := wantUsage(t, e.svc, e.root, "r", first, 7, 4)
	if !u.FirstUsedAt.Equal(start) || !u.LastUsedAt.Equal(end) {
		t.Fatalf("times %v..%v, want %v..%v", u.FirstUsedAt, u.LastUsedAt, start, end)
	}

	// A second key has counts of its own.
	rot, err := e.svc.Rotate(e.root, kms.RotateInput{RingName: "r"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Encrypt(e.root, kms.EncryptInput{RingName: "r"}); err != nil {
		t.Fatal(err)
	}
	wantUsage(t, e.svc, e.root, "r", first, 7, 4)
	wantUsage(t, e.svc, e.root, "r", rot.ID, 1, 0)

	k, err := e.svc.GetKey(e.root, kms.RingRef{Name: "r"}, first)
	if err != nil {
		t.Fatal(err)
	}
	if k.EncryptCount == nil || *k.EncryptCount != 7 {
		t.Fatalf("GetKey encryptCount = %v, want 7", k.EncryptCount)
	}
	l, err := e.svc.ListKeys(e.root, kms.RingRef{Name: "r"}, kms.PageRequest{})
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]uint64{}
	for _, k := range l.Data {
		if k.EncryptCount == nil {
			t.Fatalf("ListKeys: key %s has no encryptCount", k.ID)
		}
		counts[k.ID] = *k.EncryptCount
	}
	if counts[first] != 7 || counts[rot.ID] != 1 {
		t.Fatalf("ListKeys encryptCount = %v, want %s:7 %s:1", counts, first, rot.ID)
	}
	// The answer of an encrypt call carries no count.
	res := e.encrypt(t, "r")
	if res.Key.EncryptCount != nil {
		t.Fatalf("Encrypt answer has encryptCount %d", *res.Key.EncryptCount)
	}

	// Reading usage needs keyring.r.read; an unknown key is NotFound.
	_, err = e.svc.KeyUsage(noDecrypt, kms.RingRef{Name: "r"}, first)
	wantKind(t, "KeyUsage without keyring.r.read", err, kms.KindPermissionDenied)
	_, err = e.svc.KeyUsage(e.root, kms.RingRef{Name: "r"}, "00000000000000000000000000000000")
	wantKind(t, "KeyUsage of an unknown key", err, kms.KindNotFound)
}

// TestKeyUsageSurvivesRestartAndRecovery: the counts are kept across a
// restart, and records indexed again at start-up (after an index write
// that did not happen) are counted once.
func TestKeyUsageSurvivesRestartAndRecovery(t *testing.T) {
	st := newFaultStore(t)
	key := kms.GenerateMasterKey()
	var secret string
	svc, root := startWithRing(t, st, key, &secret)
	r, err := svc.GetKeyRing(root, kms.RingRef{Name: "r"})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := svc.Encrypt(root, kms.EncryptInput{RingName: "r"}); err != nil {
			t.Fatal(err)
		}
	}
	wantUsage(t, svc, root, "r", r.ActiveKey, 3, 0)
	st.failIndex.Store(true)
	for range 4 {
		if _, err := svc.Encrypt(root, kms.EncryptInput{RingName: "r"}); err != nil {
			t.Fatal(err)
		}
	}
	svc.Close()
	st.failIndex.Store(false)

	svc, root = startOn(t, st, key, &secret)
	wantUsage(t, svc, root, "r", r.ActiveKey, 7, 0)
	hashes, err := svc.ListKeyHashes(root, kms.RingRef{Name: "r"}, r.ActiveKey, kms.PageRequest{})
	if err != nil || len(hashes.Data) != 7 {
		t.Fatalf("ListKeyHashes after recovery = %d, %v; want 7", len(hashes.Data), err)
	}
	svc.Close()
	svc, root = startOn(t, st, key, &secret)
	defer svc.Close()
	wantUsage(t, svc, root, "r", r.ActiveKey, 7, 0)
}

// TestListKeyHashes: the hashes of a key are exactly those issued under
// it, with their callers and Assets, paged; another Account's are hidden
// without accounts.all; activity.read is needed.
func TestListKeyHashes(t *testing.T) {
	e := newEnv(t)
	created := e.ring(t, "r")
	e.ring(t, "other")
	first := created.Key.ID
	caller := e.as(t, kms.Flags{"keyring.*.encrypt": true, "keyring.r.read": true, "activity.read": true})
	acct := e.account(t, "tenant")
	tenant := e.asIn(t, acct.ID, kms.Flags{"keyring.r.encrypt": true, "keyring.r.read": true, "activity.read": true})

	type issued struct{ hash, asset string }
	var mine, theirs []issued
	encrypt := func(ctx context.Context, ring string, asset bool) issued {
		in := kms.EncryptInput{RingName: ring}
		if asset {
			in.Asset = &kms.AssetInput{Data: map[string]any{"n": 1}}
		}
		res, err := e.svc.Encrypt(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		out := issued{hash: res.Hash}
		if res.Asset != nil {
			out.asset = res.Asset.ID
		}
		return out
	}
	for i := range 9 {
		mine = append(mine, encrypt(caller, "r", i%2 == 0))
		encrypt(caller, "other", false) // another ring's key
		if i%3 == 0 {
			theirs = append(theirs, encrypt(tenant, "r", false))
		}
	}
	rot, err := e.svc.Rotate(e.root, kms.RotateInput{RingName: "r"})
	if err != nil {
		t.Fatal(err)
	}
	afterRotation := encrypt(caller, "r", false)

	list := func(ctx context.Context, keyID string, limit int) []*kms.KeyHash {
		t.Helper()
		var out []*kms.KeyHash
		eachPage(t, limit, func(req kms.PageRequest) (*kms.List[*kms.KeyHash], error) {
			return e.svc.ListKeyHashes(ctx, kms.RingRef{Name: "r"}, keyID, req)
		}, func(l *kms.List[*kms.KeyHash]) {
			if len(l.Data) > limit {
				t.Fatalf("page of %d, limit %d", len(l.Data), limit)
			}
			out = append(out, l.Data...)
		})
		return out
	}
	got := list(caller, first, 4)
	if len(got) != len(mine) {
		t.Fatalf("caller sees %d hashes of the first key, want %d", len(got), len(mine))
	}
	for i, h := range got {
		if h.Hash != mine[i].hash || h.AssetID != mine[i].asset || h.AccountID != e.acct || h.APIKeyID == "" || h.CreatedAt.IsZero() || h.Seq == 0 {
			t.Fatalf("hash %d = %+v, want %+v in account %s", i, h, mine[i], e.acct)
		}
		if i > 0 && h.Seq <= got[i-1].Seq {
			t.Fatalf("hashes out of order: seq %d after %d", h.Seq, got[i-1].Seq)
		}
	}
	all := list(e.root, first, 5) // accounts.all: every Account's
	if len(all) != len(mine)+len(theirs) {
		t.Fatalf("root sees %d hashes, want %d", len(all), len(mine)+len(theirs))
	}
	var hashes []string
	for _, h := range all {
		hashes = append(hashes, h.Hash)
	}
	for _, want := range append(slices.Clone(mine), theirs...) {
		if !slices.Contains(hashes, want.hash) {
			t.Fatalf("root's list lacks hash %s", want.hash)
		}
	}
	if got := list(tenant, first, 100); len(got) != len(theirs) {
		t.Fatalf("tenant sees %d hashes, want its own %d", len(got), len(theirs))
	}
	if got := list(caller, rot.ID, 10); len(got) != 1 || got[0].Hash != afterRotation.hash {
		t.Fatalf("hashes of the new key = %+v, want only %s", got, afterRotation.hash)
	}

	noActivity := e.as(t, kms.Flags{"keyring.r.read": true})
	_, err = e.svc.ListKeyHashes(noActivity, kms.RingRef{Name: "r"}, first, kms.PageRequest{})
	wantKind(t, "ListKeyHashes without activity.read", err, kms.KindPermissionDenied)
	noRead := e.as(t, kms.Flags{"activity.read": true})
	_, err = e.svc.ListKeyHashes(noRead, kms.RingRef{Name: "r"}, first, kms.PageRequest{})
	wantKind(t, "ListKeyHashes without keyring.r.read", err, kms.KindPermissionDenied)

	// A sequence of pages sees the hashes issued up to its first page.
	l, err := e.svc.ListKeyHashes(caller, kms.RingRef{Name: "r"}, rot.ID, kms.PageRequest{Limit: 1})
	if err != nil || len(l.Data) != 1 || l.Pagination.HasMore {
		t.Fatalf("first page = %+v, %v", l, err)
	}
	encrypt(caller, "r", false)
	l, err = e.svc.ListKeyHashes(caller, kms.RingRef{Name: "r"}, rot.ID, kms.PageRequest{Limit: 1})
	if err != nil || len(l.Data) != 1 || !l.Pagination.HasMore {
		t.Fatalf("first page after one more = %+v, %v", l, err)
	}
	cursor := l.Pagination.NextCursor
	encrypt(caller, "r", false)
	l, err = e.svc.ListKeyHashes(caller, kms.RingRef{Name: "r"}, rot.ID, kms.PageRequest{Limit: 5, Cursor: cursor})
	if err != nil || len(l.Data) != 1 || l.Pagination.HasMore {
		t.Fatalf("second page = %d hashes (hasMore %v), %v; want the one issued before the first page", len(l.Data), l.Pagination.HasMore, err)
	}
	// A cursor of one key's list is refused by another's.
	_, err = e.svc.ListKeyHashes(caller, kms.RingRef{Name: "r"}, first, kms.PageRequest{Cursor: cursor})
	wantKind(t, "a cursor of another key's hashes", err, kms.KindInvalid)
}

// TestSearchAssetsByKey: the keyId filter finds the Assets that encrypt
// calls handing out that key created or updated, and no other.
func TestSearchAssetsByKey(t *testing.T) {
	e := newEnv(t)
	created := e.ring(t, "r")
	first := created.Key.ID
	make := func(data map[string]any, id string) string {
		res, err := e.svc.Encrypt(e.root, kms.EncryptInput{RingName: "r", Asset: &kms.AssetInput{AssetID: id, Data: data}})
		if err != nil {
			t.Fatal(err)
		}
		return res.Asset.ID
	}
	a := make(map[string]any{"n": "a"}, "")
	b := make(map[string]any{"n": "b"}, "")
	rot, err := e.svc.Rotate(e.root, kms.RotateInput{RingName: "r"})
	if err != nil {
		t.Fatal(err)
	}
	c := make(map[string]any{"n": "c"}, "")
	make(nil, b) // b updated under the new key: both keys touched it
	search := func(keyID string) []string {
		t.Helper()
		l, err := e.svc.SearchAssets(e.root, kms.AssetFilter{KeyID: keyID}, kms.PageRequest{})
		if err != nil {
			t.Fatalf("SearchAssets(keyId %s) = %v", keyID, err)
		}
		var ids []string
		for _, x := range l.Data {
			ids = append(ids, x.ID)
		}
		return ids
	}
	if got := search(first); !slices.Equal(got, []string{a, b}) {
		t.Fatalf("assets of the first key = %v, want %v", got, []string{a, b})
	}
	if got := search(rot.ID); !slices.Equal(got, []string{b, c}) {
		t.Fatalf("assets of the second key = %v, want %v", got, []string{b, c})
	}
	if got := search("00000000000000000000000000000000"); len(got) != 0 {
		t.Fatalf("assets of an unknown key = %v", got)
	}
	// Combined with another filter, both hold.
	l, err := e.svc.SearchAssets(e.root, kms.AssetFilter{KeyID: rot.ID, Data: map[string]any{"n": "c"}}, kms.PageRequest{})
	if err != nil || len(l.Data) != 1 || l.Data[0].ID != c {
		t.Fatalf("keyId and data = %+v, %v", l, err)
	}
	// A deleted Asset leaves the index.
	if _, err := e.svc.DeleteAsset(e.root, a); err != nil {
		t.Fatal(err)
	}
	if got := search(first); !slices.Equal(got, []string{b}) {
		t.Fatalf("after deleting %s: %v, want [%s]", a, got, b)
	}
}

// TestKeyUsageAcrossNodes: two Services on one PostgreSQL database count
// every call of either, once.
func TestKeyUsageAcrossNodes(t *testing.T) {
	nodes := pgNodes(t, 2, kms.Options{MasterKey: kms.GenerateMasterKey()}, nil)
	root := bootstrapRoot(t, nodes[0])
	created, err := nodes[0].CreateKeyRing(root, kms.CreateKeyRingInput{Name: "r", KEM: "x25519"})
	if err != nil {
		t.Fatal(err)
	}
	const perNode, workers = 20, 4
	var wg sync.WaitGroup
	errs := make(chan error, len(nodes)*workers)
	for _, svc := range nodes {
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range perNode / workers {
					res, err := svc.Encrypt(root, kms.EncryptInput{RingName: "r"})
					if err == nil {
						_, err = svc.Decrypt(root, kms.DecryptInput{Hash: res.Hash, Header: res.Header})
					}
					if err != nil {
						errs <- fmt.Errorf("encrypt and decrypt: %w", err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	n := uint64(len(nodes) * perNode)
	for _, svc := range nodes {
		wantUsage(t, svc, root, "r", created.Key.ID, n, n)
		l, err := svc.ListKeyHashes(root, kms.RingRef{Name: "r"}, created.Key.ID, kms.PageRequest{Limit: 1000})
		if err != nil || uint64(len(l.Data)) != n {
			t.Fatalf("ListKeyHashes = %d, %v; want %d", len(l.Data), err, n)
		}
	}
}

// TestValidationDoesNotCountAsUse: a validation that reports an encrypt
// (or a decrypt) of another key, with that key's keyId and a hash and an
// Asset of the caller's choosing, is recorded as a validation with the
// claim in it, and is not a use of the key: its usage counts, its hashes,
// the Assets found by key and a search by action all stay as the real
// calls made them. An API key holding apikeys.validate alone made it,
// about a key whose flags allow the action reported, so that the record
// is granted with result ok.
func TestValidationDoesNotCountAsUse(t *testing.T) {
	st := kmstest.MemoryStore(t)
	e := newEnvOn(t, st, kms.Options{MasterKey: kms.GenerateMasterKey()})
	created := e.ring(t, "r")
	keyID := created.Key.ID
	real, err := e.svc.Encrypt(e.root, kms.EncryptInput{RingName: "r", Asset: &kms.AssetInput{Data: map[string]any{"n": 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Decrypt(e.root, kms.DecryptInput{Hash: real.Hash, Header: real.Header}); err != nil {
		t.Fatal(err)
	}
	before := wantUsage(t, e.svc, e.root, "r", keyID, 1, 1)

	subject, err := e.svc.CreateAPIKey(e.root, kms.APIKeyInput{AccountID: e.acct,
		Flags: kms.Flags{"keyring.r.encrypt": true, "keyring.r.decrypt": true, "encrypt": true}})
	if err != nil {
		t.Fatal(err)
	}
	validator := e.as(t, kms.Flags{kms.FlagAPIKeysValidate: true})
	const forgedHash, forgedAsset = "AQHforged-hash-never-issued", "019d0000000000000000000000000001"
	claim := func(action string) map[string]any {
		return map[string]any{"keyId": keyID, "hash": forgedHash, "assetId": forgedAsset, "assetOp": "create",
			"ringId": created.Ring.ID, "result": "ok", "via": action, "action": action, "reportedAction": "x", "case": "forged " + action}
	}
	for _, c := range []struct{ action, ring string }{
		{"encrypt", "r"},
		{"decrypt", "r"},
		{"encrypt", ""}, // the action as a flag name
	} {
		res, err := e.svc.ValidateAPIKey(validator, kms.ValidateInput{Key: subject.Key,
			Activity: &kms.ValidateActivity{Action: c.action, RingName: c.ring, Props: claim(c.action)}})
		if err != nil || !res.Valid || res.ValidAction == nil || !*res.ValidAction {
			t.Fatalf("ValidateAPIKey(%s on %q) = %+v, %v; want valid, action allowed", c.action, c.ring, res, err)
		}
	}

	after := wantUsage(t, e.svc, e.root, "r", keyID, 1, 1)
	if !after.FirstUsedAt.Equal(*before.FirstUsedAt) || !after.LastUsedAt.Equal(*before.LastUsedAt) {
		t.Errorf("KeyUsage times %v..%v after the validations, want %v..%v", after.FirstUsedAt, after.LastUsedAt, before.FirstUsedAt, before.LastUsedAt)
	}
	hashes, err := e.svc.ListKeyHashes(e.root, kms.RingRef{Name: "r"}, keyID, kms.PageRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(hashes.Data) != 1 || hashes.Data[0].Hash != real.Hash || hashes.Data[0].AssetID != real.Asset.ID {
		t.Errorf("ListKeyHashes = %+v, want only the hash issued, %s", hashes.Data, real.Hash)
	}
	assets, err := e.svc.SearchAssets(e.root, kms.AssetFilter{KeyID: keyID}, kms.PageRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(assets.Data) != 1 || assets.Data[0].ID != real.Asset.ID {
		t.Errorf("SearchAssets(keyId) = %d Assets, want only %s", len(assets.Data), real.Asset.ID)
	}
	// A search by action finds the calls themselves, not what a
	// validation reported: "who opened the data" stays the real decrypts.
	for _, action := range []string{"encrypt", "decrypt"} {
		got := searchAll(t, e.svc, e.root, kms.ActivityFilter{Action: action, Props: map[string]any{"keyId": keyID}}, 100)
		if len(got) != 1 || got[0].KeyID == subject.KeyID || got[0].Props["via"] != nil {
			t.Errorf("SearchActivity(action %s, keyId) = %+v, want the one real call", action, got)
		}
	}
	if got := searchAll(t, e.svc, e.root, kms.ActivityFilter{KeyID: subject.KeyID, Action: "encrypt"}, 100); len(got) != 0 {
		t.Errorf("SearchActivity(keyid of the validated key, action encrypt) = %+v, want none", got)
	}

	// The records are there, as validations, with the claim in them.
	recs := searchAll(t, e.svc, e.root, kms.ActivityFilter{KeyID: subject.KeyID, Action: "validate"}, 100)
	if len(recs) != 3 {
		t.Fatalf("%d validation records of the validated key, want 3", len(recs))
	}
	for i, want := range []string{"encrypt", "decrypt", "encrypt"} {
		a := recs[i]
		claimed := map[string]any{"keyId": keyID, "hash": forgedHash, "assetId": forgedAsset, "ringId": created.Ring.ID,
			"reportedAction": want, "via": "validate", "validatedBy": kms.PrincipalFrom(validator).ID, "action": "validate", "result": "ok"}
		for name, v := range claimed {
			if a.Props[name] != v {
				t.Errorf("record %d: props[%q] = %v, want %v (props %v)", i, name, a.Props[name], v, a.Props)
			}
		}
		if a.Action != "validate" || !a.Valid {
			t.Errorf("record %d = action %s, valid %v; want a granted validate", i, a.Action, a.Valid)
		}
	}
	// No record of the trail other than the real calls names the forged
	// hash as an encrypt's.
	for _, a := range records(t, st) {
		if a.Props["hash"] == forgedHash && a.Action != "validate" {
			t.Errorf("record %+v carries the forged hash", a)
		}
	}
}

// TestUsedKeyIgnoresValidations: which records count a use of a key, by
// their action and props alone; those of validations never do, those
// recorded before validations had an action of their own (the action
// reported, via "validate") included, so that a trail indexed again does
// not count them either.
func TestUsedKeyIgnoresValidations(t *testing.T) {
	const k = "01a2018dcef3573045f5ec5359355cc4"
	for _, c := range []struct {
		name   string
		a      kms.Activity
		counts bool
	}{
		{"encrypt", kms.Activity{Action: "encrypt", Props: map[string]any{"keyId": k, "result": "ok"}}, true},
		{"decrypt", kms.Activity{Action: "decrypt", Props: map[string]any{"keyId": k, "result": "ok"}}, true},
		{"refused encrypt", kms.Activity{Action: "encrypt", Props: map[string]any{"keyId": k, "result": "permission_denied"}}, false},
		{"validation", kms.Activity{Action: "validate", Props: map[string]any{"keyId": k, "result": "ok", "via": "validate", "reportedAction": "encrypt"}}, false},
		{"older validation reporting an encrypt", kms.Activity{Action: "encrypt", Props: map[string]any{"keyId": k, "result": "ok", "via": "validate"}}, false},
		{"older validation reporting a decrypt", kms.Activity{Action: "decrypt", Props: map[string]any{"keyId": k, "result": "ok", "via": "validate"}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := kms.UsedKey(&c.a); got != c.counts {
				t.Errorf("UsedKey(%+v) = %v, want %v", c.a, got, c.counts)
			}
		})
	}
}
