package client_test

import (
	"context"
	"reflect"
	"slices"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/client"
)

// wrap turns a typed result into (any, error) for the table of reads.
func wrap[T any](v T, err error) (any, error) { return v, err }

// TestEveryMethod walks through every method of the Client against the
// real handler, and checks that what the client reads equals what the
// Service returns for the same request.
func TestEveryMethod(t *testing.T) {
	e := newEnv(t, "")
	c, ctx, sctx := e.c, context.Background(), e.rootCtx

	check(struct{}{}, c.Healthz(ctx))(t, "Healthz")

	// Key rings and keys.
	created := check(c.CreateKeyRing(ctx, kms.CreateKeyRingInput{Name: "Orders", KEM: "x25519", Props: map[string]any{"team": "a"}}))(t, "CreateKeyRing")
	if created.PrivateKey == "" || created.Ring.Name != "Orders" || created.Key.KeyData == nil {
		t.Fatalf("CreateKeyRing = %+v, want the ring, its first key with keyData and the private key", created)
	}
	ringRef := kms.RingRef{Name: "orders"}
	enc := check(c.Encrypt(ctx, kms.EncryptInput{RingName: "orders", Asset: &kms.AssetInput{Data: map[string]any{"invoice": "A-1"}}}))(t, "Encrypt")
	if enc.Asset == nil || enc.Hash == "" || enc.Header == "" || enc.Key.ID != created.Key.ID {
		t.Fatalf("Encrypt = %+v, want the active key, a hash, a header and the new Asset", enc)
	}
	dec := check(c.Decrypt(ctx, kms.DecryptInput{Hash: enc.Hash, Header: enc.Header}))(t, "Decrypt")
	if !dec.Asset.Valid || dec.Key == nil || dec.Key.ID != enc.Key.ID || dec.Asset.ID != enc.Asset.ID {
		t.Fatalf("Decrypt = %+v, want the key of Encrypt and a valid Asset", dec)
	}
	rotated := check(c.Rotate(ctx, kms.RotateInput{RingName: "orders"}))(t, "Rotate")
	if rotated.ID == created.Key.ID || rotated.KeyData == nil {
		t.Fatalf("Rotate = %+v, want a new key with keyData", rotated)
	}
	cfg := &kms.KeyRingConfig{Props: map[string]any{"team": "b"}, Key: kms.ConfigKey{Props: map[string]any{"tier": "gold"}},
		Algos: kms.ConfigAlgos{AES256: kms.AlgoConfig{MaxEncryptCount: 1000}}}
	gotCfg := check(c.SetConfig(ctx, kms.RingRef{Name: "orders"}, cfg))(t, "SetConfig")
	same(t, "SetConfig", gotCfg, cfg)
	// Every method that names a ring takes it by ID as well.
	byID := kms.RingRef{Name: created.Ring.ID, ByID: true}
	cfg.Props["team"] = "c"
	same(t, "SetConfig by ID", check(c.SetConfig(ctx, byID, cfg))(t, "SetConfig by ID"), cfg)
	same(t, "GetConfig by ID", check(c.GetConfig(ctx, byID))(t, "GetConfig by ID"), cfg)
	spareRing := check(c.CreateKeyRing(ctx, kms.CreateKeyRingInput{Name: "spare", KEM: "x25519"}))(t, "CreateKeyRing spare")
	if del := check(c.DeleteKeyRing(ctx, kms.RingRef{Name: spareRing.Ring.ID, ByID: true}))(t, "DeleteKeyRing by ID"); del.Name != "spare" {
		t.Fatalf("DeleteKeyRing by ID = %+v, want ring spare", del)
	}

	// Assets: a child of the first, its lineage, deletion.
	child := check(c.Encrypt(ctx, kms.EncryptInput{RingName: "orders", Asset: &kms.AssetInput{Parents: []string{enc.Asset.ID}, Data: map[string]any{"n": 2}}}))(t, "Encrypt child")
	// The decrypt answer carries the verified Asset's data and parents
	// ([] when it has none), so the header verifies from that answer
	// alone, as a third party would check it.
	if dec.Asset.Parents == nil || len(dec.Asset.Parents) != 0 {
		t.Errorf("Decrypt(no parents) = parents %#v, want []", dec.Asset.Parents)
	}
	decChild := check(c.Decrypt(ctx, kms.DecryptInput{Hash: child.Hash, Header: child.Header}))(t, "Decrypt child")
	if !slices.Equal(decChild.Asset.Parents, []string{enc.Asset.ID}) {
		t.Errorf("Decrypt(child) = parents %v, want [%s]", decChild.Asset.Parents, enc.Asset.ID)
	}
	keys := check(c.SigningKeys(ctx))(t, "SigningKeys")
	signed := &kms.Asset{ID: decChild.Asset.ID, Data: decChild.Asset.Data, Parents: decChild.Asset.Parents}
	if v, err := keys.VerifyHeader(child.Header, signed); err != nil || !v.Valid || !v.AssetChecked {
		t.Errorf("VerifyHeader(child, the Asset of the decrypt answer) = %+v, %v; want valid", v, err)
	}

	// Asym rings.
	asym := check(c.CreateAsymKeyRing(ctx, kms.CreateAsymKeyRingInput{Name: "tokens"}))(t, "CreateAsymKeyRing")
	asymRotated := check(c.RotateAsym(ctx, kms.RotateInput{RingName: "tokens"}))(t, "RotateAsym")
	if asymRotated.ID == asym.Key.ID || asymRotated.KeyData.Key == "" {
		t.Fatalf("RotateAsym = %+v, want a new key with its key", asymRotated)
	}
	// A transit key made exportable: held, and exported.
	held := check(e.svc.CreateHeldKey(sctx, kms.CreateHeldKeyInput{Name: "held", Exportable: true}))(t, "CreateTransitKey")

	// Accounts and API keys.
	acct := check(c.CreateAccount(ctx, kms.AccountInput{UID: "acme", Notes: "a customer"}))(t, "CreateAccount")
	notes := "a good customer"
	updated := check(c.UpdateAccount(ctx, kms.AccountRef{Value: "acme", ByUID: true}, kms.AccountUpdate{Notes: &notes}))(t, "UpdateAccount")
	if updated.ID != acct.ID || updated.Notes != notes {
		t.Fatalf("UpdateAccount = %+v, want notes %q", updated, notes)
	}
	key := check(c.CreateAPIKey(ctx, kms.APIKeyInput{AccountID: "acme", AccountByUID: true, Flags: kms.Flags{"keyring.orders.encrypt": true}}))(t, "CreateAPIKey")
	if key.Key == "" || key.AccountID != acct.ID || !key.Active {
		t.Fatalf("CreateAPIKey = %+v, want an active key of %s with its secret", key, acct.ID)
	}
	valid := check(c.ValidateAPIKey(ctx, kms.ValidateInput{Key: key.Key, Activity: &kms.ValidateActivity{Action: "encrypt", RingName: "orders"}}))(t, "ValidateAPIKey")
	if !valid.Valid || valid.ValidAction == nil || !*valid.ValidAction || valid.KeyID != key.KeyID {
		t.Fatalf("ValidateAPIKey = %+v, want valid, action allowed", valid)
	}
	merged := check(c.UpdateAPIKey(ctx, kms.APIKeyUpdate{Op: kms.UpdateMerge, Ref: kms.APIKeyRef{Value: key.KeyID}, Flags: kms.Flags{"keyring.orders.decrypt": true}}))(t, "UpdateAPIKey by ID")
	if !merged.Flags["keyring.orders.decrypt"] || !merged.Flags["keyring.orders.encrypt"] || merged.Key != "" {
		t.Fatalf("UpdateAPIKey by ID = %+v, want both flags and no secret", merged)
	}
	off := false
	paused := check(c.UpdateAPIKey(ctx, kms.APIKeyUpdate{Op: kms.UpdateMerge, Ref: kms.APIKeyRef{Value: key.Key, BySecret: true}, Active: &off}))(t, "UpdateAPIKey by secret")
	if paused.Active || paused.Key != key.Key || paused.KeyID != key.KeyID {
		t.Fatalf("UpdateAPIKey by secret = %+v, want inactive, the secret echoed", paused)
	}
	spare := check(c.CreateAPIKey(ctx, kms.APIKeyInput{AccountID: acct.ID, Flags: kms.Flags{"keyring.orders.read": true}}))(t, "CreateAPIKey by ID")

	// Users.
	made := check(c.CreateUser(ctx, kms.UserInput{Username: "ada", Email: "ada@example.com", FirstName: "Ada", LastName: "Lovelace",
		Flags: kms.Flags{"keyring.orders.read": true}}))(t, "CreateUser")
	if made.Password == "" || made.User.Username != "ada" {
		t.Fatalf("CreateUser = %+v, want the User and its password", made)
	}
	first := "Augusta"
	if u := check(c.UpdateUser(ctx, kms.UserRef{Value: "ada"}, kms.UserUpdate{FirstName: &first}))(t, "UpdateUser"); u.FirstName != first {
		t.Fatalf("UpdateUser = %+v, want firstName %q", u, first)
	}

	// The reads, each through the client and through the Service.
	activityID := e.lastActivityID(t)
	reads := []struct {
		name            string
		client, service func() (any, error)
	}{
		{"GetKeyRing",
			func() (any, error) { return wrap(c.GetKeyRing(ctx, ringRef)) },
			func() (any, error) { return wrap(e.svc.GetKeyRing(sctx, ringRef)) }},
		{"GetKeyRing by ID",
			func() (any, error) { return wrap(c.GetKeyRing(ctx, kms.RingRef{Name: created.Ring.ID, ByID: true})) },
			func() (any, error) { return wrap(e.svc.GetKeyRing(sctx, ringRef)) }},
		{"ListKeyRings",
			func() (any, error) { return wrap(c.ListKeyRings(ctx, kms.PageRequest{})) },
			func() (any, error) { return wrap(e.svc.ListKeyRings(sctx, kms.PageRequest{})) }},
		{"ListKeys",
			func() (any, error) { return wrap(c.ListKeys(ctx, ringRef, kms.PageRequest{})) },
			func() (any, error) { return wrap(e.svc.ListKeys(sctx, ringRef, kms.PageRequest{})) }},
		{"GetKey",
			func() (any, error) {
				return wrap(c.GetKey(ctx, kms.RingRef{Name: created.Ring.ID, ByID: true}, rotated.ID))
			},
			func() (any, error) { return wrap(e.svc.GetKey(sctx, ringRef, rotated.ID)) }},
		{"GetConfig",
			func() (any, error) { return wrap(c.GetConfig(ctx, kms.RingRef{Name: "orders"})) },
			func() (any, error) { return wrap(e.svc.GetConfig(sctx, kms.RingRef{Name: "orders"})) }},
		{"Decrypt",
			func() (any, error) {
				return wrap(c.Decrypt(ctx, kms.DecryptInput{Hash: child.Hash, Header: child.Header}))
			},
			func() (any, error) {
				return wrap(e.svc.Decrypt(sctx, kms.DecryptInput{Hash: child.Hash, Header: child.Header}))
			}},
		{"LookupHash",
			func() (any, error) { return wrap(c.LookupHash(ctx, enc.Hash)) },
			func() (any, error) { return wrap(e.svc.LookupHash(sctx, enc.Hash)) }},
		{"LookupHeader",
			func() (any, error) { return wrap(c.LookupHeader(ctx, enc.Header)) },
			func() (any, error) { return wrap(e.svc.LookupHeader(sctx, enc.Header)) }},
		{"GetAsymKey",
			func() (any, error) { return wrap(c.GetAsymKey(ctx, kms.RingRef{Name: "tokens"}, asym.Key.ID)) },
			func() (any, error) { return wrap(e.svc.GetAsymKey(sctx, kms.RingRef{Name: "tokens"}, asym.Key.ID)) }},
		{"GetAsymKey of a held key",
			func() (any, error) { return wrap(c.GetAsymKey(ctx, kms.RingRef{Name: "held"}, held.KeyIDs[1])) },
			func() (any, error) { return wrap(e.svc.GetAsymKey(sctx, kms.RingRef{Name: "held"}, held.KeyIDs[1])) }},
		{"ExportAsymKey",
			func() (any, error) { return wrap(c.ExportAsymKey(ctx, kms.RingRef{Name: "held"}, held.KeyIDs[1])) },
			func() (any, error) { return wrap(e.svc.ExportAsymKey(sctx, kms.RingRef{Name: "held"}, held.KeyIDs[1])) }},
		{"GetAsset",
			func() (any, error) { return wrap(c.GetAsset(ctx, child.Asset.ID)) },
			func() (any, error) { return wrap(e.svc.GetAsset(sctx, child.Asset.ID)) }},
		{"SearchAssets",
			func() (any, error) {
				return wrap(c.SearchAssets(ctx, kms.AssetFilter{KeyRingID: created.Ring.ID}, kms.PageRequest{}))
			},
			func() (any, error) {
				return wrap(e.svc.SearchAssets(sctx, kms.AssetFilter{KeyRingID: created.Ring.ID}, kms.PageRequest{}))
			}},
		{"GetLineage",
			func() (any, error) { return wrap(c.GetLineage(ctx, child.Asset.ID, 2)) },
			func() (any, error) { return wrap(e.svc.GetLineage(sctx, child.Asset.ID, 2)) }},
		{"GetAccount",
			func() (any, error) { return wrap(c.GetAccount(ctx, kms.AccountRef{Value: acct.ID})) },
			func() (any, error) { return wrap(e.svc.GetAccount(sctx, kms.AccountRef{Value: "acme", ByUID: true})) }},
		{"ListAccounts",
			func() (any, error) { return wrap(c.ListAccounts(ctx, kms.PageRequest{})) },
			func() (any, error) { return wrap(e.svc.ListAccounts(sctx, kms.PageRequest{})) }},
		{"GetAPIKey",
			func() (any, error) { return wrap(c.GetAPIKey(ctx, key.KeyID)) },
			func() (any, error) { return wrap(e.svc.GetAPIKey(sctx, key.KeyID)) }},
		{"ListAPIKeys",
			func() (any, error) { return wrap(c.ListAPIKeys(ctx, kms.PageRequest{})) },
			func() (any, error) { return wrap(e.svc.ListAPIKeys(sctx, kms.PageRequest{})) }},
		{"ListAccountAPIKeys",
			func() (any, error) {
				return wrap(c.ListAccountAPIKeys(ctx, kms.AccountRef{Value: "acme", ByUID: true}, kms.PageRequest{}))
			},
			func() (any, error) {
				return wrap(e.svc.ListAccountAPIKeys(sctx, kms.AccountRef{Value: acct.ID}, kms.PageRequest{}))
			}},
		{"SearchAPIKeysByRing",
			func() (any, error) { return wrap(c.SearchAPIKeysByRing(ctx, ringRef, kms.PageRequest{})) },
			func() (any, error) { return wrap(e.svc.SearchAPIKeysByRing(sctx, ringRef, kms.PageRequest{})) }},
		{"GetUser",
			func() (any, error) { return wrap(c.GetUser(ctx, kms.UserRef{Value: "ada@example.com", ByEmail: true})) },
			func() (any, error) { return wrap(e.svc.GetUser(sctx, kms.UserRef{Value: made.User.ID, ByID: true})) }},
		{"ListUsers",
			func() (any, error) { return wrap(c.ListUsers(ctx, kms.PageRequest{})) },
			func() (any, error) { return wrap(e.svc.ListUsers(sctx, kms.PageRequest{})) }},
		{"GetActivity",
			func() (any, error) { return wrap(c.GetActivity(ctx, activityID)) },
			func() (any, error) { return wrap(e.svc.GetActivity(sctx, activityID)) }},
	}
	for _, r := range reads {
		t.Run(r.name, func(t *testing.T) {
			got, err := r.client()
			if err != nil {
				t.Fatalf("%s via the client = %v", r.name, err)
			}
			want, err := r.service()
			if err != nil {
				t.Fatalf("%s via the Service = %v", r.name, err)
			}
			same(t, r.name, got, want)
		})
	}

	// What the reads show, beyond equality.
	if l := check(c.ListKeys(ctx, ringRef, kms.PageRequest{}))(t, "ListKeys"); l.Pagination.Count != 2 || l.Data[0].KeyData != nil {
		t.Errorf("ListKeys = %+v, want 2 keys without keyData", l)
	}
	if lin := check(c.GetLineage(ctx, child.Asset.ID, 0))(t, "GetLineage"); len(lin.Ancestors) != 1 || lin.Ancestors[0].ID != enc.Asset.ID || lin.Depth != 3 {
		t.Errorf("GetLineage(child, 0) = %+v, want depth 3 and the first Asset as its parent", lin)
	}
	if l := check(c.SearchAPIKeysByRing(ctx, ringRef, kms.PageRequest{}))(t, "SearchAPIKeysByRing"); !slices.ContainsFunc(l.Data, func(k *kms.APIKey) bool { return k.KeyID == key.KeyID }) {
		t.Errorf("SearchAPIKeysByRing(orders) = %+v, want the key %s", l.Data, key.KeyID)
	}

	// Paging: one ring a page, then the next with the cursor.
	check(c.CreateKeyRing(ctx, kms.CreateKeyRingInput{Name: "payments", KEM: "x25519"}))(t, "CreateKeyRing payments")
	p1 := check(c.ListKeyRings(ctx, kms.PageRequest{Limit: 1}))(t, "ListKeyRings page 1")
	if !p1.Pagination.HasMore || p1.Pagination.NextCursor == "" || len(p1.Data) != 1 {
		t.Fatalf("ListKeyRings(limit 1) = %+v, want one ring and a cursor", p1)
	}
	p2 := check(c.ListKeyRings(ctx, kms.PageRequest{Limit: 1, Cursor: p1.Pagination.NextCursor}))(t, "ListKeyRings page 2")
	if len(p2.Data) != 1 || p2.Data[0].Name == p1.Data[0].Name {
		t.Fatalf("ListKeyRings page 2 = %+v, want the other ring", p2)
	}

	// Deletions.
	if d := check(c.DeleteAsset(ctx, child.Asset.ID))(t, "DeleteAsset"); !d.Deleted || d.ID != child.Asset.ID {
		t.Errorf("DeleteAsset = %+v", d)
	}
	_, err := c.GetAsset(ctx, child.Asset.ID)
	wantKind(t, "GetAsset(deleted)", err, kms.KindNotFound)
	if d := check(c.DeleteAPIKey(ctx, kms.APIKeyRef{Value: key.Key, BySecret: true}))(t, "DeleteAPIKey by secret"); d.ID || d.APIKey != key.Key {
		t.Errorf("DeleteAPIKey by secret = %+v", d)
	}
	if d := check(c.DeleteAPIKey(ctx, kms.APIKeyRef{Value: spare.KeyID}))(t, "DeleteAPIKey by ID"); !d.ID || d.APIKey != spare.KeyID {
		t.Errorf("DeleteAPIKey by ID = %+v", d)
	}
	if d := check(c.DeleteAccount(ctx, kms.AccountRef{Value: "acme", ByUID: true}))(t, "DeleteAccount"); d.ID != acct.ID {
		t.Errorf("DeleteAccount = %+v, want %s", d, acct.ID)
	}
	if d := check(c.DeleteUser(ctx, kms.UserRef{Value: "ada"}))(t, "DeleteUser"); d.Message == "" {
		t.Errorf("DeleteUser = %+v, want a message", d)
	}
	if d := check(c.DeleteKeyRing(ctx, kms.RingRef{Name: "orders"}))(t, "DeleteKeyRing"); d.ID != created.Ring.ID {
		t.Errorf("DeleteKeyRing = %+v, want %s", d, created.Ring.ID)
	}
	_, err = c.GetKeyRing(ctx, ringRef)
	wantKind(t, "GetKeyRing(deleted)", err, kms.KindNotFound)
}

// TestKeyStates drives a key's states through the client, by ring name
// and by ring ID, and checks the errors of a disabled key.
func TestKeyStates(t *testing.T) {
	e := newEnv(t, "")
	ctx := context.Background()
	created := check(e.c.CreateKeyRing(ctx, kms.CreateKeyRingInput{Name: "cs", KEM: "x25519"}))(t, "CreateKeyRing")
	first, ref := created.Key.ID, kms.RingRef{Name: "cs"}
	old := check(e.c.Encrypt(ctx, kms.EncryptInput{RingName: "cs"}))(t, "Encrypt")

	_, err := e.c.SetKeyState(ctx, ref, first, kms.KeyStateInput{State: kms.KeyDisabled})
	wantKind(t, "SetKeyState(active key)", err, kms.KindInvalid)
	k := check(e.c.SetKeyState(ctx, kms.RingRef{Name: created.Ring.ID, ByID: true}, first, kms.KeyStateInput{State: kms.KeyDisabled, Rotate: true}))(t, "SetKeyState(by ID)")
	if k.State != kms.KeyDisabled {
		t.Fatalf("SetKeyState = %+v, want disabled", k)
	}
	_, err = e.c.Decrypt(ctx, kms.DecryptInput{Hash: old.Hash, Header: old.Header})
	if e := wantKind(t, "Decrypt(disabled key)", err, kms.KindDisabled); e.State != kms.KeyDisabled {
		t.Errorf("Decrypt(disabled key): state %q, want disabled", e.State)
	}

	k = check(e.c.DestroyKey(ctx, ref, first, kms.DestroyKeyInput{After: "2h"}))(t, "DestroyKey")
	want := check(e.svc.ListKeys(e.rootCtx, ref, kms.PageRequest{}))(t, "ListKeys").Data[0]
	if want.EncryptCount == nil || *want.EncryptCount != 1 {
		t.Fatalf("ListKeys: encryptCount %v, want 1", want.EncryptCount)
	}
	want.EncryptCount = nil // a list's; a state change answers the key as it is now
	same(t, "DestroyKey", k, want)
	if k.State != kms.KeyDestroyScheduled {
		t.Fatalf("DestroyKey = %+v, want destroy_scheduled", k)
	}
	k = check(e.c.CancelDestroyKey(ctx, ref, first))(t, "CancelDestroyKey")
	if k.State != kms.KeyDisabled || k.DestroyAt != nil {
		t.Fatalf("CancelDestroyKey = %+v, want disabled", k)
	}
	check(e.c.SetKeyState(ctx, ref, first, kms.KeyStateInput{State: kms.KeyEnabled}))(t, "SetKeyState(enabled)")
	check(e.c.Decrypt(ctx, kms.DecryptInput{Hash: old.Hash, Header: old.Header}))(t, "Decrypt(enabled again)")

	u := check(e.c.KeyUsage(ctx, ref, first))(t, "KeyUsage")
	same(t, "KeyUsage", u, check(e.svc.KeyUsage(e.rootCtx, ref, first))(t, "Service.KeyUsage"))
	if u.EncryptCount != 1 || u.DecryptCount != 1 {
		t.Fatalf("KeyUsage = %+v, want one encrypt and one decrypt", u)
	}
	hashes := check(e.c.ListKeyHashes(ctx, kms.RingRef{Name: created.Ring.ID, ByID: true}, first, kms.PageRequest{Limit: 5}))(t, "ListKeyHashes")
	if len(hashes.Data) != 1 || hashes.Data[0].Hash != old.Hash {
		t.Fatalf("ListKeyHashes = %+v, want the hash %s", hashes.Data, old.Hash)
	}

	asym := check(e.c.CreateAsymKeyRing(ctx, kms.CreateAsymKeyRingInput{Name: "acs"}))(t, "CreateAsymKeyRing")
	aref := kms.RingRef{Name: "acs"}
	check(e.c.DestroyAsymKey(ctx, aref, asym.Key.ID, kms.DestroyKeyInput{Rotate: true}))(t, "DestroyAsymKey")
	_, err = e.c.GetAsymKey(ctx, aref, asym.Key.ID)
	wantKind(t, "GetAsymKey(scheduled)", err, kms.KindDisabled)
	check(e.c.CancelDestroyAsymKey(ctx, aref, asym.Key.ID))(t, "CancelDestroyAsymKey")
	check(e.c.SetAsymKeyState(ctx, aref, asym.Key.ID, kms.KeyStateInput{State: kms.KeyEnabled}))(t, "SetAsymKeyState")
	check(e.c.GetAsymKey(ctx, aref, asym.Key.ID))(t, "GetAsymKey(enabled again)")
}

// TestUserFlows signs in, refreshes and logs out; invites a User who
// completes the invitation; and resets a password.
func TestUserFlows(t *testing.T) {
	e := newEnv(t, "")
	c, ctx := e.c, context.Background()
	made := check(c.CreateUser(ctx, kms.UserInput{Username: "grace", Email: "grace@example.com", FirstName: "Grace", LastName: "Hopper"}))(t, "CreateUser")
	public := c.WithBearer("") // no credential: the public calls

	t.Run("login, refresh, logout", func(t *testing.T) {
		in := check(public.Login(ctx, kms.LoginInput{Username: "grace", Password: made.Password}))(t, "Login")
		if in.AccessToken == "" || in.User.ID != made.User.ID {
			t.Fatalf("Login = %+v, want grace and a token", in)
		}
		byEmail := check(public.Login(ctx, kms.LoginInput{Username: "GRACE@example.com", Password: made.Password, ByEmail: true}))(t, "Login by email")
		grace := c.WithBearer(in.AccessToken)
		if u := check(grace.GetUser(ctx, kms.UserRef{Value: "grace"}))(t, "GetUser(self)"); u.ID != made.User.ID {
			t.Fatalf("GetUser(self) = %+v", u)
		}
		fresh := check(grace.Refresh(ctx))(t, "Refresh")
		if fresh.AccessToken == "" || fresh.AccessToken == in.AccessToken {
			t.Fatalf("Refresh = %+v, want a new token", fresh)
		}
		_, err := grace.GetUser(ctx, kms.UserRef{Value: "grace"})
		wantKind(t, "GetUser with the refreshed-away token", err, kms.KindUnauthenticated)
		again := c.WithBearer(fresh.AccessToken)
		check(struct{}{}, again.Logout(ctx))(t, "Logout")
		_, err = again.GetUser(ctx, kms.UserRef{Value: "grace"})
		wantKind(t, "GetUser after Logout", err, kms.KindUnauthenticated)
		check(struct{}{}, c.WithBearer(byEmail.AccessToken).Logout(ctx))(t, "Logout (email login)")
		// An API key cannot log out.
		wantKind(t, "Logout with an API key", c.Logout(ctx), kms.KindInvalid)
	})

	t.Run("invitation", func(t *testing.T) {
		inv := check(c.Invite(ctx, kms.InviteInput{Username: "alan", Email: "alan@example.com", FirstName: "Alan", LastName: "Turing"}))(t, "Invite")
		token := tokenOf(t, inv.LoginURL)
		if mailed := tokenOf(t, e.mail.Next(t).Body); mailed != token {
			t.Fatalf("mailed token %q, want the loginUrl's %q", mailed, token)
		}
		v := check(public.ValidateInvite(ctx, token))(t, "ValidateInvite")
		if v.State != kms.InviteSuccess || v.User.Username != "alan" {
			t.Fatalf("ValidateInvite = %+v, want success for alan", v)
		}
		done := check(public.CompleteInvite(ctx, token, "Tur1ng-machine"))(t, "CompleteInvite")
		if done.AccessToken == "" || done.User.Username != "alan" {
			t.Fatalf("CompleteInvite = %+v, want alan and a token", done)
		}
		alan := check(client.New(c.BaseURL(), client.WithToken(done.AccessToken)))(t, "client.New(WithToken)")
		if u := check(alan.GetUser(ctx, kms.UserRef{Value: "alan"}))(t, "GetUser with the invite's token"); u.Status != kms.UserActive {
			t.Fatalf("GetUser(alan) = %+v, want active", u)
		}
	})

	t.Run("password reset", func(t *testing.T) {
		msg := check(public.StartPasswordReset(ctx, "grace@example.com"))(t, "StartPasswordReset")
		if msg == "" {
			t.Fatal("StartPasswordReset = \"\", want a message")
		}
		token := tokenOf(t, e.mail.Next(t).Body)
		check(struct{}{}, public.ValidatePasswordReset(ctx, token))(t, "ValidatePasswordReset")
		wantKind(t, "ValidatePasswordReset(bad token)", public.ValidatePasswordReset(ctx, token+"x"), kms.KindInvalid)
		wantKind(t, "CompletePasswordReset(bad token)", public.CompletePasswordReset(ctx, token+"x", "N3w-password"), kms.KindInvalid)
		check(struct{}{}, public.CompletePasswordReset(ctx, token, "N3w-password"))(t, "CompletePasswordReset")
		check(public.Login(ctx, kms.LoginInput{Username: "grace", Password: "N3w-password"}))(t, "Login with the new password")
	})
}

// TestSearchActivity pages through the audit trail of a ring (POST
// /auth/search/activity); it runs once kms.Service has SearchActivity.
func TestSearchActivity(t *testing.T) {
	if _, ok := reflect.TypeFor[*kms.Service]().MethodByName("SearchActivity"); !ok {
		t.Skip("kms.Service has no SearchActivity yet, so httpapi has no POST /auth/search/activity")
	}
	e := newEnv(t, "")
	c, ctx := e.c, context.Background()
	check(c.CreateKeyRing(ctx, kms.CreateKeyRingInput{Name: "orders", KEM: "x25519"}))(t, "CreateKeyRing")
	for range 3 {
		check(c.Encrypt(ctx, kms.EncryptInput{RingName: "orders"}))(t, "Encrypt")
	}
	f := client.ActivityFilter{Ring: "orders", Action: "encrypt"}
	var seen []*kms.Activity
	page := kms.PageRequest{Limit: 2}
	for {
		l := check(c.SearchActivity(ctx, f, page))(t, "SearchActivity")
		seen = append(seen, l.Data...)
		if !l.Pagination.HasMore {
			break
		}
		page.Cursor = l.Pagination.NextCursor
	}
	if len(seen) != 3 {
		t.Fatalf("SearchActivity(ring orders, encrypt) found %d records, want 3", len(seen))
	}
	for _, a := range seen {
		if a.Ring != "orders" || a.Action != "encrypt" || !a.Valid {
			t.Errorf("record %+v, want a granted encrypt on orders", a)
		}
	}
	same(t, "GetActivity", check(c.GetActivity(ctx, seen[0].ID))(t, "GetActivity"), seen[0])
}
