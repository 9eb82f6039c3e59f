package kms_test

import (
	"context"
	"sort"
	"strings"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/kmstest"
)

func TestAccounts(t *testing.T) {
	e := newEnvOn(t, kmstest.MemoryStore(t), kms.Options{MasterKey: kms.GenerateMasterKey(), Limits: kms.Limits{MaxAccounts: 3}})
	a, err := e.svc.CreateAccount(e.root, kms.AccountInput{UID: "acme", Notes: "n", Props: map[string]any{"tier": "gold"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.svc.CreateAccount(e.root, kms.AccountInput{UID: "acme"})
	wantKind(t, "CreateAccount(duplicate uid)", err, kms.KindConflict)
	_, err = e.svc.CreateAccount(e.root, kms.AccountInput{UID: " "})
	wantKind(t, "CreateAccount(blank uid)", err, kms.KindInvalid)
	for _, ref := range []kms.AccountRef{{Value: a.ID}, {Value: "acme", ByUID: true}} {
		got, err := e.svc.GetAccount(e.root, ref)
		if err != nil || got.ID != a.ID || got.Props["tier"] != "gold" {
			t.Fatalf("GetAccount(%+v) = %+v, %v", ref, got, err)
		}
	}
	_, err = e.svc.GetAccount(e.root, kms.AccountRef{Value: "nope", ByUID: true})
	wantKind(t, "GetAccount(unknown uid)", err, kms.KindNotFound)

	uid, notes := "acme-2", "renamed"
	up, err := e.svc.UpdateAccount(e.root, kms.AccountRef{Value: "acme", ByUID: true}, kms.AccountUpdate{UID: &uid, Notes: &notes})
	if err != nil || up.UID != "acme-2" || up.Notes != "renamed" || up.Props["tier"] != "gold" {
		t.Fatalf("UpdateAccount = %+v, %v", up, err)
	}
	_, err = e.svc.GetAccount(e.root, kms.AccountRef{Value: "acme", ByUID: true})
	wantKind(t, "GetAccount(old uid)", err, kms.KindNotFound)
	rootUID := kms.BootstrapAccountUID
	_, err = e.svc.UpdateAccount(e.root, kms.AccountRef{Value: a.ID}, kms.AccountUpdate{UID: &rootUID})
	wantKind(t, "UpdateAccount(uid taken)", err, kms.KindConflict)

	// Plan limit: root + acme-2 + one more.
	if _, err := e.svc.CreateAccount(e.root, kms.AccountInput{UID: "third"}); err != nil {
		t.Fatal(err)
	}
	_, err = e.svc.CreateAccount(e.root, kms.AccountInput{UID: "fourth"})
	wantKind(t, "CreateAccount(past the limit)", err, kms.KindLimit)
	if !strings.Contains(err.Error(), "at most 3 accounts") {
		t.Errorf("limit error %q does not name the maximum", err)
	}

	list, err := e.svc.ListAccounts(e.root, kms.PageRequest{Limit: 2})
	if err != nil || len(list.Data) != 2 || !list.Pagination.HasMore {
		t.Fatalf("ListAccounts = %+v, %v", list, err)
	}
	next, err := e.svc.ListAccounts(e.root, kms.PageRequest{Limit: 2, Cursor: list.Pagination.NextCursor})
	if err != nil || len(next.Data) != 1 || next.Pagination.HasMore {
		t.Fatalf("ListAccounts page 2 = %+v, %v", next, err)
	}

	// An API key of acme-2 sees its own Account only.
	tenant := e.asIn(t, a.ID, kms.Flags{"accounts.read": true, "accounts.write": true})
	own, err := e.svc.ListAccounts(tenant, kms.PageRequest{})
	if err != nil || len(own.Data) != 1 || own.Data[0].ID != a.ID {
		t.Fatalf("ListAccounts(tenant) = %+v, %v; want its own account only", own, err)
	}
	_, err = e.svc.GetAccount(tenant, kms.AccountRef{Value: e.acct})
	wantKind(t, "GetAccount(other account)", err, kms.KindNotFound)
	_, err = e.svc.CreateAccount(tenant, kms.AccountInput{UID: "x"})
	wantKind(t, "CreateAccount without accounts.all", err, kms.KindPermissionDenied)
	if _, err := e.svc.UpdateAccount(tenant, kms.AccountRef{Value: a.ID}, kms.AccountUpdate{Notes: &notes}); err != nil {
		t.Errorf("UpdateAccount(own) = %v", err)
	}

	// Deleting an Account stops its keys at once; the caller's own cannot go.
	_, err = e.svc.DeleteAccount(e.root, kms.AccountRef{Value: e.acct})
	wantKind(t, "DeleteAccount(own)", err, kms.KindConflict)
	_, err = e.svc.DeleteAccount(e.root, kms.AccountRef{Value: "acme-2", ByUID: true})
	wantKind(t, "DeleteAccount(with an API key)", err, kms.KindConflict)
	if _, err := e.svc.DeleteAPIKey(e.root, kms.APIKeyRef{Value: kms.PrincipalFrom(tenant).ID}); err != nil {
		t.Fatal(err)
	}
	del, err := e.svc.DeleteAccount(e.root, kms.AccountRef{Value: "acme-2", ByUID: true})
	if err != nil || del.ID != a.ID {
		t.Fatalf("DeleteAccount = %+v, %v", del, err)
	}
	_, err = e.svc.DeleteAccount(e.root, kms.AccountRef{Value: a.ID})
	wantKind(t, "DeleteAccount(again)", err, kms.KindNotFound)
}

func TestAPIKeyLifecycle(t *testing.T) {
	e := newEnvOn(t, kmstest.MemoryStore(t), kms.Options{MasterKey: kms.GenerateMasterKey(), Limits: kms.Limits{MaxAPIKeysPerAccount: 4}})
	e.ring(t, "pay")
	acct, _ := e.svc.CreateAccount(e.root, kms.AccountInput{UID: "tenant"})
	k, err := e.svc.CreateAPIKey(e.root, kms.APIKeyInput{AccountID: "tenant", AccountByUID: true,
		Flags: kms.Flags{"keyring.pay.encrypt": true}, Props: map[string]any{"team": "a"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(k.Key, "rk_") || k.AccountID != acct.ID || k.References.AccountID != acct.ID || !k.Active {
		t.Fatalf("CreateAPIKey = %+v", k)
	}
	_, err = e.svc.CreateAPIKey(e.root, kms.APIKeyInput{AccountID: "missing", AccountByUID: true, Flags: kms.Flags{}})
	wantKind(t, "CreateAPIKey(unknown account)", err, kms.KindNotFound)
	_, err = e.svc.CreateAPIKey(e.root, kms.APIKeyInput{Flags: kms.Flags{}})
	wantKind(t, "CreateAPIKey(no account)", err, kms.KindInvalid)
	_, err = e.svc.CreateAPIKey(e.root, kms.APIKeyInput{AccountID: acct.ID})
	wantKind(t, "CreateAPIKey(no flags)", err, kms.KindInvalid)
	_, err = e.svc.CreateAPIKey(e.root, kms.APIKeyInput{AccountID: acct.ID, Flags: kms.Flags{"bad flag!": true}})
	wantKind(t, "CreateAPIKey(bad flag)", err, kms.KindInvalid)

	got, err := e.svc.GetAPIKey(e.root, k.KeyID)
	if err != nil || got.Key != "" || got.Props["team"] != "a" {
		t.Fatalf("GetAPIKey = %+v, %v; want the safe form", got, err)
	}

	// merge, replace, delete on flags and props; by secret and by ID.
	res, err := e.svc.UpdateAPIKey(e.root, kms.APIKeyUpdate{Op: kms.UpdateMerge, Ref: kms.APIKeyRef{Value: k.Key, BySecret: true},
		Flags: kms.Flags{"keyring.pay.decrypt": true}, Props: map[string]any{"env": "prod"}})
	if err != nil || res.Key != k.Key || !res.Flags["keyring.pay.encrypt"] || !res.Flags["keyring.pay.decrypt"] || res.Props["team"] != "a" || res.Props["env"] != "prod" {
		t.Fatalf("UpdateAPIKey(merge) = %+v, %v", res, err)
	}
	p, _ := e.svc.Authenticate(t.Context(), k.Key)
	if !p.Can("keyring.pay.decrypt") {
		t.Fatal("a merged flag does not take effect")
	}
	res, err = e.svc.UpdateAPIKey(e.root, kms.APIKeyUpdate{Op: kms.UpdateDelete, Ref: kms.APIKeyRef{Value: k.KeyID},
		Flags: kms.Flags{"keyring.pay.encrypt": true}, Props: map[string]any{"team": nil}})
	if err != nil || res.Key != "" || res.Flags["keyring.pay.encrypt"] || !res.Flags["keyring.pay.decrypt"] || res.Props["team"] != nil || res.Props["env"] != "prod" {
		t.Fatalf("UpdateAPIKey(delete) = %+v, %v", res, err)
	}
	res, err = e.svc.UpdateAPIKey(e.root, kms.APIKeyUpdate{Op: kms.UpdateReplace, Ref: kms.APIKeyRef{Value: k.KeyID},
		Flags: kms.Flags{"keyring.*.read": true}})
	if err != nil || len(res.Flags) != 1 || !res.Flags["keyring.*.read"] || res.Props["env"] != "prod" {
		t.Fatalf("UpdateAPIKey(replace flags) = %+v, %v", res, err)
	}
	// Replacing the props alone keeps the flags, and the other way round.
	res, err = e.svc.UpdateAPIKey(e.root, kms.APIKeyUpdate{Op: kms.UpdateReplace, Ref: kms.APIKeyRef{Value: k.KeyID},
		Props: map[string]any{"only": "this"}})
	if err != nil || len(res.Flags) != 1 || !res.Flags["keyring.*.read"] || len(res.Props) != 1 || res.Props["only"] != "this" {
		t.Fatalf("UpdateAPIKey(replace props) = %+v, %v", res, err)
	}
	_, err = e.svc.UpdateAPIKey(e.root, kms.APIKeyUpdate{Op: "upsert", Ref: kms.APIKeyRef{Value: k.KeyID}})
	wantKind(t, "UpdateAPIKey(bad op)", err, kms.KindInvalid)
	_, err = e.svc.UpdateAPIKey(e.root, kms.APIKeyUpdate{Op: kms.UpdateMerge, Ref: kms.APIKeyRef{Value: "rk_nope", BySecret: true}})
	wantKind(t, "UpdateAPIKey(unknown key)", err, kms.KindNotFound)

	// Deactivation stops the key at once.
	off := false
	if _, err := e.svc.UpdateAPIKey(e.root, kms.APIKeyUpdate{Op: kms.UpdateMerge, Ref: kms.APIKeyRef{Value: k.KeyID}, Active: &off}); err != nil {
		t.Fatal(err)
	}
	_, err = e.svc.Authenticate(t.Context(), k.Key)
	wantKind(t, "Authenticate(inactive key)", err, kms.KindUnauthenticated)

	// Plan limit per Account: 1 made, 3 more allowed.
	for i := 0; i < 3; i++ {
		if _, err := e.svc.CreateAPIKey(e.root, kms.APIKeyInput{AccountID: acct.ID, Flags: kms.Flags{}}); err != nil {
			t.Fatal(err)
		}
	}
	_, err = e.svc.CreateAPIKey(e.root, kms.APIKeyInput{AccountID: acct.ID, Flags: kms.Flags{}})
	wantKind(t, "CreateAPIKey(past the limit)", err, kms.KindLimit)
	list, err := e.svc.ListAccountAPIKeys(e.root, kms.AccountRef{Value: "tenant", ByUID: true}, kms.PageRequest{Limit: 3})
	if err != nil || len(list.Data) != 3 || !list.Pagination.HasMore {
		t.Fatalf("ListAccountAPIKeys = %+v, %v", list.Pagination, err)
	}
	all, err := e.svc.ListAPIKeys(e.root, kms.PageRequest{})
	if err != nil || len(all.Data) != 5 { // the bootstrap key and four
		t.Fatalf("ListAPIKeys = %d keys, %v; want 5", len(all.Data), err)
	}

	// Delete by secret and by ID.
	d, err := e.svc.DeleteAPIKey(e.root, kms.APIKeyRef{Value: k.Key, BySecret: true})
	if err != nil || d.APIKey != k.Key || d.ID {
		t.Fatalf("DeleteAPIKey(by secret) = %+v, %v", d, err)
	}
	_, err = e.svc.GetAPIKey(e.root, k.KeyID)
	wantKind(t, "GetAPIKey(deleted)", err, kms.KindNotFound)
	_, err = e.svc.DeleteAPIKey(e.root, kms.APIKeyRef{Value: k.KeyID})
	wantKind(t, "DeleteAPIKey(again)", err, kms.KindNotFound)
	if _, err := e.svc.CreateAPIKey(e.root, kms.APIKeyInput{AccountID: acct.ID, Flags: kms.Flags{}}); err != nil {
		t.Errorf("CreateAPIKey after a delete freed a place = %v", err)
	}
}

func TestAPIKeyTenancyAndEscalation(t *testing.T) {
	e := newEnv(t)
	acct, _ := e.svc.CreateAccount(e.root, kms.AccountInput{UID: "b"})
	admin, err := e.svc.CreateAPIKey(e.root, kms.APIKeyInput{AccountID: acct.ID,
		Flags: kms.Flags{"apikeys.read": true, "apikeys.write": true, "keyring.x.encrypt": true}})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := e.svc.Authenticate(t.Context(), admin.Key)
	b := kms.WithPrincipal(t.Context(), p)
	_, err = e.svc.CreateAPIKey(b, kms.APIKeyInput{AccountID: e.acct, Flags: kms.Flags{}})
	wantKind(t, "CreateAPIKey(other account)", err, kms.KindNotFound)
	rootKeyID := kms.PrincipalFrom(e.root).ID
	_, err = e.svc.GetAPIKey(b, rootKeyID)
	wantKind(t, "GetAPIKey(other account)", err, kms.KindNotFound)
	_, err = e.svc.DeleteAPIKey(b, kms.APIKeyRef{Value: rootKeyID})
	wantKind(t, "DeleteAPIKey(other account)", err, kms.KindNotFound)
	mine, err := e.svc.CreateAPIKey(b, kms.APIKeyInput{AccountID: acct.ID, Flags: kms.Flags{"keyring.x.encrypt": true}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.svc.UpdateAPIKey(b, kms.APIKeyUpdate{Op: kms.UpdateMerge, Ref: kms.APIKeyRef{Value: mine.KeyID}, Flags: kms.Flags{"*": true}})
	wantKind(t, "UpdateAPIKey(escalate)", err, kms.KindPermissionDenied)
	_, err = e.svc.UpdateAPIKey(b, kms.APIKeyUpdate{Op: kms.UpdateMerge, Ref: kms.APIKeyRef{Value: mine.KeyID}, References: &kms.APIKeyRefs{AccountID: e.acct}})
	wantKind(t, "UpdateAPIKey(move account without accounts.all)", err, kms.KindPermissionDenied)
	if _, err := e.svc.UpdateAPIKey(b, kms.APIKeyUpdate{Op: kms.UpdateMerge, Ref: kms.APIKeyRef{Value: mine.KeyID}, References: &kms.APIKeyRefs{AccountID: acct.ID}}); err != nil {
		t.Errorf("UpdateAPIKey(references naming its own account) = %v", err)
	}
	list, err := e.svc.ListAPIKeys(b, kms.PageRequest{})
	if err != nil || len(list.Data) != 2 {
		t.Fatalf("ListAPIKeys(tenant) = %d keys, %v; want its 2", len(list.Data), err)
	}
	// Root moves a key between Accounts.
	moved, err := e.svc.UpdateAPIKey(e.root, kms.APIKeyUpdate{Op: kms.UpdateMerge, Ref: kms.APIKeyRef{Value: mine.KeyID}, References: &kms.APIKeyRefs{AccountID: e.acct}})
	if err != nil || moved.References.AccountID != e.acct {
		t.Fatalf("UpdateAPIKey(move) = %+v, %v", moved, err)
	}
	if q, err := e.svc.Authenticate(t.Context(), mine.Key); err != nil || q.AccountID != e.acct {
		t.Fatalf("moved key authenticates as %+v, %v", q, err)
	}
}

func TestSearchAPIKeysByRing(t *testing.T) {
	e := newEnv(t)
	e.ring(t, "pay")
	e.ring(t, "other")
	mk := func(flags kms.Flags) string {
		k, err := e.svc.CreateAPIKey(e.root, kms.APIKeyInput{AccountID: e.acct, Flags: flags})
		if err != nil {
			t.Fatal(err)
		}
		return k.KeyID
	}
	want := []string{
		mk(kms.Flags{"keyring.pay.encrypt": true}),
		mk(kms.Flags{"keyring.PAY.rotate": true, "keyring.*.read": true}), // both: listed once
		mk(kms.Flags{"keyring.*.decrypt": true}),
		kms.PrincipalFrom(e.root).ID, // "*"
	}
	mk(kms.Flags{"keyring.other.encrypt": true})
	mk(kms.Flags{"apikeys.read": true})
	mk(kms.Flags{"keyring.pay.encrypt": false, "keyring.*.read": false, "*": false}) // grants nothing
	for _, ref := range []kms.RingRef{{Name: "pay"}, {Name: "PAY"}} {
		var got []string
		eachPage(t, 1, func(req kms.PageRequest) (*kms.List[*kms.APIKey], error) {
			return e.svc.SearchAPIKeysByRing(e.root, ref, req)
		}, func(page *kms.List[*kms.APIKey]) {
			for _, k := range page.Data {
				got = append(got, k.KeyID)
			}
		})
		sort.Strings(got)
		w := append([]string{}, want...)
		sort.Strings(w)
		if strings.Join(got, ",") != strings.Join(w, ",") {
			t.Fatalf("SearchAPIKeysByRing(%+v) = %v, want %v", ref, got, w)
		}
	}
	_, err := e.svc.SearchAPIKeysByRing(e.root, kms.RingRef{Name: "missing"}, kms.PageRequest{})
	wantKind(t, "SearchAPIKeysByRing(missing ring)", err, kms.KindNotFound)
}

func TestValidateAPIKey(t *testing.T) {
	st := kmstest.MemoryStore(t)
	e := newEnvOn(t, st, kms.Options{MasterKey: kms.GenerateMasterKey()})
	e.ring(t, "pay")
	target, _ := e.svc.CreateAPIKey(e.root, kms.APIKeyInput{AccountID: e.acct, Flags: kms.Flags{"keyring.pay.encrypt": true}})
	gw := e.as(t, kms.Flags{"apikeys.validate": true})
	res, err := e.svc.ValidateAPIKey(gw, kms.ValidateInput{Key: target.Key, Activity: &kms.ValidateActivity{Action: "encrypt", RingName: "pay",
		Props: map[string]any{"file": "a.txt", "validatedBy": "someone else", "via": "encrypt", "flag": "*"}}})
	if err != nil || !res.Valid || res.ValidAction == nil || !*res.ValidAction || res.KeyID != target.KeyID {
		t.Fatalf("ValidateAPIKey(allowed) = %+v, %v", res, err)
	}
	// The record is the target's validation, with the action reported and
	// the caller's props under the service's own: it says who validated
	// it, and that it was a validation, not the encrypt itself.
	recs := records(t, st)
	last := recs[len(recs)-1]
	if last.KeyID != target.KeyID || last.Action != "validate" || last.Ring != "pay" || last.Props["reportedAction"] != "encrypt" || last.Props["file"] != "a.txt" ||
		last.Props["validatedBy"] != kms.PrincipalFrom(gw).ID || last.Props["via"] != "validate" || last.Props["flag"] != "keyring.pay.encrypt" {
		t.Errorf("record of the validation = %+v", last)
	}
	res, err = e.svc.ValidateAPIKey(gw, kms.ValidateInput{Key: target.Key, Activity: &kms.ValidateActivity{Action: "rotate", RingName: "pay"}})
	if err != nil || !res.Valid || *res.ValidAction {
		t.Fatalf("ValidateAPIKey(not allowed) = %+v, %v", res, err)
	}
	res, err = e.svc.ValidateAPIKey(gw, kms.ValidateInput{Key: "rk_wrong"})
	if err != nil || res.Valid || res.KeyID != "" {
		t.Fatalf("ValidateAPIKey(wrong) = %+v, %v", res, err)
	}
	_, err = e.svc.ValidateAPIKey(gw, kms.ValidateInput{})
	wantKind(t, "ValidateAPIKey(no key)", err, kms.KindInvalid)
	_, err = e.svc.ValidateAPIKey(e.as(t, kms.Flags{}), kms.ValidateInput{Key: target.Key})
	wantKind(t, "ValidateAPIKey without the flag", err, kms.KindPermissionDenied)
	_ = context.Background
}

// TestAPIKeyReach checks the reach rule on API keys: apikeys.write acts
// only on keys whose every granted flag the caller holds.
func TestAPIKeyReach(t *testing.T) {
	e := newEnv(t)
	off, on := false, true
	strong, err := e.svc.CreateAPIKey(e.root, kms.APIKeyInput{AccountID: e.acct, Flags: kms.Flags{"*": true}, Props: map[string]any{"p": 1}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.UpdateAPIKey(e.root, kms.APIKeyUpdate{Op: kms.UpdateMerge, Ref: kms.APIKeyRef{Value: strong.KeyID}, Active: &off}); err != nil {
		t.Fatal(err)
	}
	weak := e.as(t, kms.Flags{kms.FlagAPIKeysWrite: true, "keyring.ra.encrypt": true})
	ref := kms.APIKeyRef{Value: strong.KeyID}
	for _, c := range []struct {
		name string
		in   kms.APIKeyUpdate
	}{
		{"activate", kms.APIKeyUpdate{Op: kms.UpdateMerge, Ref: ref, Active: &on}},
		{"strip its flags", kms.APIKeyUpdate{Op: kms.UpdateReplace, Ref: ref, Flags: kms.Flags{}}},
		{"delete its flags", kms.APIKeyUpdate{Op: kms.UpdateDelete, Ref: ref, Flags: kms.Flags{"*": true}}},
		{"change its props", kms.APIKeyUpdate{Op: kms.UpdateMerge, Ref: ref, Props: map[string]any{"p": 2}}},
		{"by its secret", kms.APIKeyUpdate{Op: kms.UpdateMerge, Ref: kms.APIKeyRef{Value: strong.Key, BySecret: true}, Active: &on}},
	} {
		_, err := e.svc.UpdateAPIKey(weak, c.in)
		wantKind(t, "UpdateAPIKey("+c.name+" of a stronger key)", err, kms.KindPermissionDenied)
	}
	_, err = e.svc.DeleteAPIKey(weak, ref)
	wantKind(t, "DeleteAPIKey(a stronger key)", err, kms.KindPermissionDenied)
	got, err := e.svc.GetAPIKey(e.root, strong.KeyID)
	if err != nil || got.Active || len(got.Flags) != 1 || !got.Flags["*"] || got.Props["p"] != 1.0 {
		t.Fatalf("the stronger key after the refusals = %+v, %v; want it as it was", got, err)
	}
	_, err = e.svc.Authenticate(t.Context(), strong.Key)
	wantKind(t, "Authenticate(the stronger key)", err, kms.KindUnauthenticated)

	// A key whose granted flags the caller holds is within reach; flags
	// set to false grant nothing and need no cover. Without apikeys.read
	// the answer shows neither flags nor props.
	covered, err := e.svc.CreateAPIKey(e.root, kms.APIKeyInput{AccountID: e.acct, Flags: kms.Flags{"keyring.ra.encrypt": true, "keyring.rb.encrypt": false}})
	if err != nil {
		t.Fatal(err)
	}
	cref := kms.APIKeyRef{Value: covered.KeyID}
	if _, err := e.svc.UpdateAPIKey(e.root, kms.APIKeyUpdate{Op: kms.UpdateMerge, Ref: cref, Active: &off}); err != nil {
		t.Fatal(err)
	}
	res, err := e.svc.UpdateAPIKey(weak, kms.APIKeyUpdate{Op: kms.UpdateMerge, Ref: cref, Active: &on})
	if err != nil || !res.Active || res.Flags != nil || res.Props != nil {
		t.Fatalf("UpdateAPIKey(activate a covered key, without apikeys.read) = %+v, %v; want active, no flags nor props", res, err)
	}
	reader := e.as(t, kms.Flags{kms.FlagAPIKeysWrite: true, kms.FlagAPIKeysRead: true, "keyring.ra.encrypt": true})
	res, err = e.svc.UpdateAPIKey(reader, kms.APIKeyUpdate{Op: kms.UpdateMerge, Ref: cref, Props: map[string]any{"q": "r"}})
	if err != nil || !res.Flags["keyring.ra.encrypt"] || res.Props["q"] != "r" {
		t.Fatalf("UpdateAPIKey(with apikeys.read) = %+v, %v; want its flags and props", res, err)
	}
	if _, err := e.svc.DeleteAPIKey(weak, cref); err != nil {
		t.Errorf("DeleteAPIKey(a covered key) = %v", err)
	}

	// Moving a key needs accounts.all and the key within reach.
	acct, _ := e.svc.CreateAccount(e.root, kms.AccountInput{UID: "elsewhere"})
	mover := e.as(t, kms.Flags{kms.FlagAPIKeysWrite: true, kms.FlagAllAccounts: true})
	_, err = e.svc.UpdateAPIKey(mover, kms.APIKeyUpdate{Op: kms.UpdateMerge, Ref: ref, References: &kms.APIKeyRefs{AccountID: acct.ID}})
	wantKind(t, "UpdateAPIKey(move a stronger key)", err, kms.KindPermissionDenied)
}

// TestAccountReach checks the reach rule on Accounts: a change needs every
// flag that the Account's API keys and Users grant.
func TestAccountReach(t *testing.T) {
	e := newEnv(t)
	acct := e.account(t, "acme")
	in := func(flags kms.Flags) context.Context { return e.asIn(t, acct.ID, flags) }
	if _, err := e.svc.CreateUser(e.root, kms.UserInput{Username: "ann", Email: "ann@example.com", FirstName: "A", LastName: "N",
		AccountID: acct.ID, Flags: kms.Flags{"keyring.y.read": true}}); err != nil {
		t.Fatal(err)
	}
	notes := "changed"
	update := kms.AccountUpdate{Notes: &notes}
	ref := kms.AccountRef{Value: acct.ID}

	writer := in(kms.Flags{kms.FlagAccountsWrite: true, "keyring.x.read": true, "keyring.z.read": false})
	_, err := e.svc.UpdateAccount(writer, ref, update)
	wantKind(t, "UpdateAccount(a user holds keyring.y.read)", err, kms.KindPermissionDenied)
	if err != nil && !strings.Contains(err.Error(), "user ann") {
		t.Errorf("UpdateAccount error %q does not name the user out of reach", err)
	}
	full := in(kms.Flags{kms.FlagAccountsWrite: true, "keyring.x.read": true, "keyring.y.read": true})
	if _, err := e.svc.UpdateAccount(full, ref, update); err != nil {
		t.Errorf("UpdateAccount(every flag of the account held) = %v", err)
	}
	_ = in(kms.Flags{"keyring.w.read": true})
	_, err = e.svc.UpdateAccount(full, ref, update)
	wantKind(t, "UpdateAccount(a key holds keyring.w.read)", err, kms.KindPermissionDenied)

	// The root Account holds "*": only "*" reaches it, accounts.all or not.
	all := e.as(t, kms.Flags{kms.FlagAccountsWrite: true, kms.FlagAllAccounts: true})
	uid := "hijacked"
	_, err = e.svc.UpdateAccount(all, kms.AccountRef{Value: e.acct}, kms.AccountUpdate{UID: &uid})
	wantKind(t, "UpdateAccount(the root account)", err, kms.KindPermissionDenied)
	if got, err := e.svc.GetAccount(e.root, kms.AccountRef{Value: e.acct}); err != nil || got.UID != kms.BootstrapAccountUID {
		t.Errorf("root account after the refusal = %+v, %v", got, err)
	}
}
