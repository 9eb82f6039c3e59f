package kms_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/kmstest"
)

// encryptAsset encrypts on ring with an Asset, as root, and returns the
// answer.
func (e *env) encryptAsset(tb testing.TB, ring string, in kms.AssetInput) *kms.EncryptResult {
	tb.Helper()
	res, err := e.svc.Encrypt(e.root, kms.EncryptInput{RingName: ring, Asset: &in})
	if err != nil {
		tb.Fatalf("Encrypt(%s, asset %+v) = %v", ring, in, err)
	}
	return res
}

func TestAssetCreateVerifyUpdate(t *testing.T) {
	e := newEnv(t)
	ring := e.ring(t, "docs")
	parent := e.encryptAsset(t, "docs", kms.AssetInput{Data: map[string]any{"name": "source.csv", "size": 12}})
	if parent.Asset == nil || parent.Asset.ID == "" || parent.Asset.KeyRingID != ring.Ring.ID || parent.Asset.AccountID != e.acct {
		t.Fatalf("Encrypt asset = %+v", parent.Asset)
	}
	child := e.encryptAsset(t, "docs", kms.AssetInput{Data: map[string]any{"name": "derived"}, Parents: []string{parent.Asset.ID}})
	if len(child.Asset.Parents) != 1 || child.Asset.Parents[0] != parent.Asset.ID {
		t.Fatalf("child parents = %v", child.Asset.Parents)
	}
	hi, err := e.svc.LookupHeader(e.root, child.Header)
	if err != nil || !hi.Valid || !hi.HasSignedAsset {
		t.Fatalf("LookupHeader = %+v, %v", hi, err)
	}
	dec, err := e.svc.Decrypt(e.root, kms.DecryptInput{Hash: child.Hash, Header: child.Header})
	if err != nil || !dec.Asset.Valid || dec.Asset.ID != child.Asset.ID || dec.Asset.Data["name"] != "derived" {
		t.Fatalf("Decrypt = %+v, %v", dec, err)
	}

	// Updating the Asset's data invalidates the old header, not the new.
	upd := e.encryptAsset(t, "docs", kms.AssetInput{AssetID: child.Asset.ID, Data: map[string]any{"name": "derived v2"}})
	if upd.Asset.ID != child.Asset.ID || upd.Asset.Data["name"] != "derived v2" || len(upd.Asset.Parents) != 1 {
		t.Fatalf("update = %+v (parents must be kept when not given)", upd.Asset)
	}
	dec, err = e.svc.Decrypt(e.root, kms.DecryptInput{Hash: child.Hash, Header: child.Header})
	wantKind(t, "Decrypt(old header after data change)", err, kms.KindUnprocessable)
	if dec.Asset.Valid || !strings.Contains(dec.Asset.Message, "changed") || dec.Asset.ID != child.Asset.ID || dec.Key != nil {
		t.Fatalf("Decrypt(old header) = %+v", dec)
	}
	if dec, err := e.svc.Decrypt(e.root, kms.DecryptInput{Hash: upd.Hash, Header: upd.Header}); err != nil || dec.Asset.Data["name"] != "derived v2" {
		t.Fatalf("Decrypt(new header) = %+v, %v", dec, err)
	}
	// Changing the parents alone invalidates it too.
	other := e.encryptAsset(t, "docs", kms.AssetInput{Data: map[string]any{}})
	e.encryptAsset(t, "docs", kms.AssetInput{AssetID: child.Asset.ID, Parents: []string{parent.Asset.ID, other.Asset.ID}})
	_, err = e.svc.Decrypt(e.root, kms.DecryptInput{Hash: upd.Hash, Header: upd.Header})
	wantKind(t, "Decrypt(after parents change)", err, kms.KindUnprocessable)

	// Deleting: a parent cannot go while it has children; a leaf can, and
	// its headers then fail.
	_, err = e.svc.DeleteAsset(e.root, parent.Asset.ID)
	wantKind(t, "DeleteAsset(parent)", err, kms.KindConflict)
	leaf := e.encryptAsset(t, "docs", kms.AssetInput{Data: map[string]any{"leaf": true}})
	if _, err := e.svc.DeleteAsset(e.root, leaf.Asset.ID); err != nil {
		t.Fatal(err)
	}
	dec, err = e.svc.Decrypt(e.root, kms.DecryptInput{Hash: leaf.Hash, Header: leaf.Header})
	wantKind(t, "Decrypt(deleted asset)", err, kms.KindUnprocessable)
	if !strings.Contains(dec.Asset.Message, "deleted") {
		t.Errorf("Decrypt(deleted asset) message = %q", dec.Asset.Message)
	}
	_, err = e.svc.GetAsset(e.root, leaf.Asset.ID)
	wantKind(t, "GetAsset(deleted)", err, kms.KindNotFound)
	_, err = e.svc.DeleteAsset(e.root, leaf.Asset.ID)
	wantKind(t, "DeleteAsset(again)", err, kms.KindNotFound)

	// Altered header and hash of an Asset call.
	_, err = e.svc.Decrypt(e.root, kms.DecryptInput{Hash: other.Hash, Header: flip(other.Header, 100, 0)})
	wantKind(t, "Decrypt(altered asset header)", err, kms.KindUnprocessable)
	_, err = e.svc.Decrypt(e.root, kms.DecryptInput{Hash: flip(other.Hash, 10, 0), Header: other.Header})
	wantKind(t, "Decrypt(altered hash)", err, kms.KindUnprocessable)
}

func TestAssetInputErrors(t *testing.T) {
	e := newEnv(t)
	e.ring(t, "docs")
	a := e.encryptAsset(t, "docs", kms.AssetInput{Data: map[string]any{"x": 1}})
	missing := "01a2000000000000000000000000beef"
	tests := []struct {
		name string
		in   kms.AssetInput
		kind kms.Kind
	}{
		{"unknown assetId", kms.AssetInput{AssetID: missing}, kms.KindNotFound},
		{"malformed assetId", kms.AssetInput{AssetID: "nope"}, kms.KindInvalid},
		{"unknown parent", kms.AssetInput{Parents: []string{missing}}, kms.KindNotFound},
		{"malformed parent", kms.AssetInput{Parents: []string{"x"}}, kms.KindInvalid},
		{"own parent", kms.AssetInput{AssetID: a.Asset.ID, Parents: []string{a.Asset.ID}}, kms.KindInvalid},
		{"too much data", kms.AssetInput{Data: map[string]any{"big": strings.Repeat("x", kms.MaxAssetDataBytes)}}, kms.KindInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.svc.Encrypt(e.root, kms.EncryptInput{RingName: "docs", Asset: &tt.in})
			wantKind(t, "Encrypt", err, tt.kind)
		})
	}
	// A cycle through a child is refused.
	child := e.encryptAsset(t, "docs", kms.AssetInput{Parents: []string{a.Asset.ID}})
	_, err := e.svc.Encrypt(e.root, kms.EncryptInput{RingName: "docs", Asset: &kms.AssetInput{AssetID: a.Asset.ID, Parents: []string{child.Asset.ID}}})
	wantKind(t, "Encrypt(cycle)", err, kms.KindInvalid)
}

func TestAssetTenancy(t *testing.T) {
	e := newEnv(t)
	e.ring(t, "shared")
	mine := e.encryptAsset(t, "shared", kms.AssetInput{Data: map[string]any{"owner": "root"}})
	acct := e.account(t, "tenant-b")
	b := e.asIn(t, acct.ID, kms.Flags{"keyring.shared.encrypt": true, "assets.read": true, "assets.delete": true})
	_, err := e.svc.GetAsset(b, mine.Asset.ID)
	wantKind(t, "GetAsset(other account)", err, kms.KindNotFound)
	_, err = e.svc.DeleteAsset(b, mine.Asset.ID)
	wantKind(t, "DeleteAsset(other account)", err, kms.KindNotFound)
	_, err = e.svc.Encrypt(b, kms.EncryptInput{RingName: "shared", Asset: &kms.AssetInput{Parents: []string{mine.Asset.ID}}})
	wantKind(t, "Encrypt(parent of other account)", err, kms.KindNotFound)
	_, err = e.svc.Encrypt(b, kms.EncryptInput{RingName: "shared", Asset: &kms.AssetInput{AssetID: mine.Asset.ID}})
	wantKind(t, "Encrypt(update other account's asset)", err, kms.KindNotFound)
	own, err := e.svc.Encrypt(b, kms.EncryptInput{RingName: "shared", Asset: &kms.AssetInput{Data: map[string]any{"owner": "b"}}})
	if err != nil {
		t.Fatal(err)
	}
	list, err := e.svc.SearchAssets(b, kms.AssetFilter{}, kms.PageRequest{})
	if err != nil || len(list.Data) != 1 || list.Data[0].ID != own.Asset.ID {
		t.Fatalf("SearchAssets(tenant b) = %+v, %v; want only its own asset", list, err)
	}
	_, err = e.svc.SearchAssets(b, kms.AssetFilter{AccountID: e.acct}, kms.PageRequest{})
	wantKind(t, "SearchAssets(other account)", err, kms.KindPermissionDenied)
	all, err := e.svc.SearchAssets(e.root, kms.AssetFilter{}, kms.PageRequest{})
	if err != nil || len(all.Data) != 2 {
		t.Fatalf("SearchAssets(root) = %d assets, %v; want 2", len(all.Data), err)
	}
}

func TestSearchAssets(t *testing.T) {
	clock := kmstest.ClockAt(time.UnixMilli(1_800_000_000_000).UTC())
	st := kmstest.MemoryStore(t)
	e := newEnvOn(t, st, kms.Options{MasterKey: kms.GenerateMasterKey(), Now: clock.Now})
	r1 := e.ring(t, "r1")
	r2 := e.ring(t, "r2")
	second := e.as(t, kms.Flags{"*": true})
	secondID := kms.PrincipalFrom(second).ID
	rootID := kms.PrincipalFrom(e.root).ID

	p1 := e.encryptAsset(t, "r1", kms.AssetInput{Data: map[string]any{"kind": "parent"}}).Asset
	p2 := e.encryptAsset(t, "r1", kms.AssetInput{Data: map[string]any{"kind": "parent"}}).Asset
	type made struct {
		a    *kms.Asset
		ring string
		key  string
		ms   int64
	}
	var all []made
	for i := 0; i < 30; i++ {
		clock.Advance(time.Second)
		ring, ctx, key := "r1", e.root, rootID
		if i%3 == 0 {
			ring = "r2"
		}
		if i%2 == 0 {
			ctx, key = second, secondID
		}
		parents := []string{p1.ID}
		if i%5 == 0 {
			parents = append(parents, p2.ID)
		}
		res, err := e.svc.Encrypt(ctx, kms.EncryptInput{RingName: ring, Asset: &kms.AssetInput{
			Data: map[string]any{"i": i, "even": i%2 == 0, "tag": map[string]any{"b": 1, "a": "x"}}, Parents: parents}})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, made{res.Asset, ring, key, clock.Now().UnixMilli()})
	}
	start, end := all[10].ms, all[19].ms

	tests := []struct {
		name string
		f    kms.AssetFilter
		want func(m made) bool
	}{
		{"all children of p1", kms.AssetFilter{Parents: []string{p1.ID}}, func(m made) bool { return true }},
		{"parents p1 and p2", kms.AssetFilter{Parents: []string{p2.ID, p1.ID}}, func(m made) bool { return len(m.a.Parents) == 2 }},
		{"keyring r2", kms.AssetFilter{KeyRingID: r2.Ring.ID}, func(m made) bool { return m.ring == "r2" }},
		{"apikey", kms.AssetFilter{APIKeyID: secondID}, func(m made) bool { return m.key == secondID }},
		{"account", kms.AssetFilter{AccountID: e.acct, Parents: []string{p1.ID}}, func(m made) bool { return true }},
		{"time range", kms.AssetFilter{Start: &start, End: &end}, func(m made) bool { return m.ms >= start && m.ms <= end }},
		{"data", kms.AssetFilter{Data: map[string]any{"even": true}}, func(m made) bool { return m.a.Data["even"] == true }},
		{"data nested object in other order", kms.AssetFilter{Data: map[string]any{"tag": map[string]any{"a": "x", "b": 1}, "i": 4}},
			func(m made) bool { return fmt.Sprint(m.a.Data["i"]) == "4" }},
		{"combined", kms.AssetFilter{KeyRingID: r1.Ring.ID, APIKeyID: rootID, Start: &start, End: &end, Parents: []string{p1.ID}},
			func(m made) bool { return m.ring == "r1" && m.key == rootID && m.ms >= start && m.ms <= end }},
		{"nothing", kms.AssetFilter{Data: map[string]any{"i": 999}}, func(m made) bool { return false }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var want []string
			for _, m := range all {
				if tt.want(m) {
					want = append(want, m.a.ID)
				}
			}
			var got []string
			req := kms.PageRequest{Limit: 4}
			for pages := 0; ; pages++ {
				if pages > 20 {
					t.Fatal("too many pages")
				}
				page, err := e.svc.SearchAssets(e.root, tt.f, req)
				if err != nil {
					t.Fatal(err)
				}
				if page.Pagination.HasMore != (page.Pagination.NextCursor != "") || page.Pagination.Count != len(page.Data) {
					t.Fatalf("pagination = %+v with %d items", page.Pagination, len(page.Data))
				}
				if page.Pagination.HasMore && len(page.Data) != 4 {
					t.Fatalf("a page with hasMore has %d items, want 4", len(page.Data))
				}
				for _, a := range page.Data {
					if a.ID != p1.ID && a.ID != p2.ID {
						got = append(got, a.ID)
					}
				}
				if !page.Pagination.HasMore {
					break
				}
				req.Cursor = page.Pagination.NextCursor
			}
			sort.Strings(want)
			sort.Strings(got)
			if strings.Join(got, ",") != strings.Join(want, ",") {
				t.Fatalf("SearchAssets(%s) = %d assets, want %d:\n got %v\nwant %v", tt.name, len(got), len(want), got, want)
			}
		})
	}
	// A cursor is bound to its filter.
	page, err := e.svc.SearchAssets(e.root, kms.AssetFilter{Parents: []string{p1.ID}}, kms.PageRequest{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.svc.SearchAssets(e.root, kms.AssetFilter{KeyRingID: r1.Ring.ID}, kms.PageRequest{Limit: 2, Cursor: page.Pagination.NextCursor})
	wantKind(t, "SearchAssets(cursor of another filter)", err, kms.KindInvalid)
}

func TestLineage(t *testing.T) {
	e := newEnv(t)
	e.ring(t, "lin")
	mk := func(parents ...string) string {
		return e.encryptAsset(t, "lin", kms.AssetInput{Parents: parents}).Asset.ID
	}
	// a -> b -> c -> d, and a -> e; x -> c
	a := mk()
	b := mk(a)
	x := mk()
	c := mk(b, x)
	d := mk(c)
	eID := mk(a)
	l, err := e.svc.GetLineage(e.root, c, 0)
	if err != nil {
		t.Fatal(err)
	}
	depthOf := func(nodes []*kms.LineageNode) map[string]int {
		m := map[string]int{}
		for _, n := range nodes {
			m[n.ID] = n.Depth
		}
		return m
	}
	anc, desc := depthOf(l.Ancestors), depthOf(l.Descendants)
	if len(anc) != 3 || anc[b] != 1 || anc[x] != 1 || anc[a] != 2 {
		t.Errorf("ancestors of c = %v, want b:1 x:1 a:2", anc)
	}
	if len(desc) != 1 || desc[d] != 1 {
		t.Errorf("descendants of c = %v, want d:1", desc)
	}
	l, err = e.svc.GetLineage(e.root, a, 1)
	if err != nil {
		t.Fatal(err)
	}
	desc = depthOf(l.Descendants)
	if len(desc) != 2 || desc[b] != 1 || desc[eID] != 1 || len(l.Ancestors) != 0 {
		t.Errorf("lineage of a at depth 1 = %+v", l)
	}
	_, err = e.svc.GetLineage(e.root, a, kms.MaxLineageDepth+1)
	wantKind(t, "GetLineage(depth too large)", err, kms.KindInvalid)
	_, err = e.svc.GetLineage(e.root, "01a2000000000000000000000000beef", 1)
	wantKind(t, "GetLineage(unknown)", err, kms.KindNotFound)
}
