package kms_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/kmstest"
)

func TestCreateUser(t *testing.T) {
	e := newUserEnv(t)
	res, err := e.svc.CreateUser(e.root, kms.UserInput{
		Username: "Alice", Email: "Alice@Example.com", FirstName: "Alice", LastName: "Liddell",
		Props: map[string]any{"team": "red"}, Flags: kms.Flags{"keyring.x.encrypt": true},
	})
	if err != nil {
		t.Fatal(err)
	}
	u := res.User
	if u.ID == "" || u.Username != "Alice" || u.Email != "Alice@Example.com" || u.Status != kms.UserActive ||
		u.AccountID != e.acct || u.DisplayName != "Alice Liddell" || u.Props["team"] != "red" ||
		!u.Flags["keyring.x.encrypt"] || u.Keys == nil || len(u.Keys) != 0 {
		t.Fatalf("CreateUser = %+v", u)
	}
	if len(res.Password) < 20 || !kms.CheckPassword(res.Password).IsValid {
		t.Fatalf("generated password has %d characters, valid=%v", len(res.Password), kms.CheckPassword(res.Password).IsValid)
	}
	if _, token := e.signIn(t, "alice", res.Password); !strings.HasPrefix(token, "rkt_") {
		t.Fatalf("access token %q lacks the rkt_ prefix", token[:4])
	}
	if storeHolds(t, e.st, res.Password) || storeHolds(t, e.st, "argon2id") {
		t.Fatal("the store holds the password or its hash in the clear")
	}

	t.Run("taken", func(t *testing.T) {
		tests := []struct {
			name, username, email string
			fields                []string
		}{
			{"username in other case", "ALICE", "other@example.com", []string{"username"}},
			{"email in other case", "alice2", "alice@EXAMPLE.COM", []string{"email"}},
			{"both", "alice", "ALICE@example.com", []string{"email", "username"}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				_, err := e.svc.CreateUser(e.root, kms.UserInput{Username: tt.username, Email: tt.email, FirstName: "A", LastName: "B"})
				ke := wantError(t, "CreateUser", err, kms.KindConflict, "")
				var got []string
				for f := range ke.Fields {
					got = append(got, f)
				}
				slices.Sort(got)
				if !slices.Equal(got, tt.fields) {
					t.Fatalf("CreateUser fields = %v, want %v", ke.Fields, tt.fields)
				}
			})
		}
	})

	t.Run("malformed", func(t *testing.T) {
		tests := []struct {
			name  string
			in    kms.UserInput
			field string
		}{
			{"no username", kms.UserInput{Email: "a@b.co", FirstName: "A", LastName: "B"}, "username"},
			{"username with a space", kms.UserInput{Username: "a b", Email: "a@b.co", FirstName: "A", LastName: "B"}, "username"},
			{"username too long", kms.UserInput{Username: strings.Repeat("a", 65), Email: "a@b.co", FirstName: "A", LastName: "B"}, "username"},
			{"no email", kms.UserInput{Username: "bob", FirstName: "A", LastName: "B"}, "email"},
			{"email without domain dot", kms.UserInput{Username: "bob", Email: "bob@localhost", FirstName: "A", LastName: "B"}, "email"},
			{"email with two @", kms.UserInput{Username: "bob", Email: "b@b@b.co", FirstName: "A", LastName: "B"}, "email"},
			{"email with double dot", kms.UserInput{Username: "bob", Email: "b..b@b.co", FirstName: "A", LastName: "B"}, "email"},
			{"email too long", kms.UserInput{Username: "bob", Email: "b@" + strings.Repeat("x", 250) + ".co", FirstName: "A", LastName: "B"}, "email"},
			{"no first name", kms.UserInput{Username: "bob", Email: "a@b.co", LastName: "B"}, "firstName"},
			{"no last name", kms.UserInput{Username: "bob", Email: "a@b.co", FirstName: "A"}, "lastName"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				_, err := e.svc.CreateUser(e.root, tt.in)
				ke := wantError(t, "CreateUser", err, kms.KindInvalid, "")
				if ke.Fields[tt.field] == "" {
					t.Fatalf("CreateUser fields = %v, want %s", ke.Fields, tt.field)
				}
			})
		}
	})

	t.Run("permissions", func(t *testing.T) {
		reader := e.as(t, kms.Flags{kms.FlagUsersRead: true})
		_, err := e.svc.CreateUser(reader, userInput("carol", nil))
		wantKind(t, "CreateUser without users.write", err, kms.KindPermissionDenied)
		writer := e.as(t, kms.Flags{kms.FlagUsersWrite: true})
		_, err = e.svc.CreateUser(writer, userInput("carol", kms.Flags{"keyring.x.rotate": true}))
		wantKind(t, "CreateUser granting a flag the caller lacks", err, kms.KindPermissionDenied)
		other := e.account(t, "other")
		in := userInput("carol", nil)
		in.AccountID = other.ID
		_, err = e.svc.CreateUser(writer, in)
		wantKind(t, "CreateUser in another Account without accounts.all", err, kms.KindNotFound)
		in.AccountID = "00000000000000000000000000000000"
		_, err = e.svc.CreateUser(e.root, in)
		wantKind(t, "CreateUser in an unknown Account", err, kms.KindNotFound)
		in.AccountID = other.ID
		res, err := e.svc.CreateUser(e.root, in)
		if err != nil || res.User.AccountID != other.ID {
			t.Fatalf("CreateUser in another Account with accounts.all = %+v, %v", res, err)
		}
	})
}

func TestGetUser(t *testing.T) {
	e := newUserEnv(t)
	u, _ := e.createUser(t, "Dave", nil)
	tests := []struct {
		name string
		ref  kms.UserRef
		kind kms.Kind // 0 when found
	}{
		{"by username", kms.UserRef{Value: "Dave"}, 0},
		{"by username in other case", kms.UserRef{Value: "DAVE"}, 0},
		{"by email", kms.UserRef{Value: "dave@EXAMPLE.com", ByEmail: true}, 0},
		{"by ID", kms.UserRef{Value: u.ID, ByID: true}, 0},
		{"missing username", kms.UserRef{Value: "nobody"}, kms.KindNotFound},
		{"missing email", kms.UserRef{Value: "nobody@example.com", ByEmail: true}, kms.KindNotFound},
		{"username given as email", kms.UserRef{Value: "Dave", ByEmail: true}, kms.KindNotFound},
		{"unknown ID", kms.UserRef{Value: "00000000000000000000000000000000", ByID: true}, kms.KindNotFound},
		{"malformed ID", kms.UserRef{Value: "xyz", ByID: true}, kms.KindNotFound},
		{"empty", kms.UserRef{}, kms.KindInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := e.svc.GetUser(e.root, tt.ref)
			if tt.kind != 0 {
				wantKind(t, "GetUser", err, tt.kind)
				return
			}
			if err != nil || got.ID != u.ID || got.Username != "Dave" {
				t.Fatalf("GetUser(%+v) = %+v, %v", tt.ref, got, err)
			}
		})
	}
	t.Run("without users.read", func(t *testing.T) {
		_, err := e.svc.GetUser(e.as(t, kms.Flags{"keyring.x.read": true}), kms.UserRef{Value: "dave"})
		wantKind(t, "GetUser", err, kms.KindPermissionDenied)
	})
	t.Run("keys the User owns", func(t *testing.T) {
		_, pw := e.createUser(t, "keyowner", kms.Flags{kms.FlagAPIKeysWrite: true, "keyring.x.read": true})
		ctx, _ := e.signIn(t, "keyowner", pw)
		k, err := e.svc.CreateAPIKey(ctx, kms.APIKeyInput{AccountID: e.acct, Flags: kms.Flags{"keyring.x.read": true}})
		if err != nil {
			t.Fatal(err)
		}
		got, err := e.svc.GetUser(e.root, kms.UserRef{Value: "keyowner"})
		if err != nil || !slices.Equal(got.Keys, []string{k.KeyID}) {
			t.Fatalf("GetUser keys = %v, %v; want [%s]", got.Keys, err, k.KeyID)
		}
	})
}

func TestUpdateUser(t *testing.T) {
	e := newUserEnv(t)
	u, pw := e.createUser(t, "erin", nil)
	e.createUser(t, "frank", nil)

	email, first, display := "Erin.New@example.com", "Erin", ""
	got, err := e.svc.UpdateUser(e.root, kms.UserRef{Value: "erin"}, kms.UserUpdate{
		Email: &email, FirstName: &first, DisplayName: &display, Props: map[string]any{"k": "v"},
	})
	if err != nil || got.Email != email || got.FirstName != "Erin" || got.LastName != "Last" || got.DisplayName != "" ||
		got.Props["k"] != "v" || got.Username != "erin" || !got.UpdatedAt.Equal(e.clock.Now()) {
		t.Fatalf("UpdateUser = %+v, %v", got, err)
	}
	if got, err := e.svc.GetUser(e.root, kms.UserRef{Value: "erin.new@EXAMPLE.com", ByEmail: true}); err != nil || got.ID != u.ID {
		t.Fatalf("GetUser by the new email = %v, %v", got, err)
	}
	_, err = e.svc.GetUser(e.root, kms.UserRef{Value: "erin@example.com", ByEmail: true})
	wantKind(t, "GetUser by the old email", err, kms.KindNotFound)

	taken := "FRANK@example.com"
	_, err = e.svc.UpdateUser(e.root, kms.UserRef{Value: "erin"}, kms.UserUpdate{Email: &taken})
	if ke := wantError(t, "UpdateUser to a taken email", err, kms.KindConflict, ""); ke.Fields["email"] == "" {
		t.Fatalf("fields = %v, want email", ke.Fields)
	}
	empty := ""
	_, err = e.svc.UpdateUser(e.root, kms.UserRef{Value: "erin"}, kms.UserUpdate{LastName: &empty})
	wantKind(t, "UpdateUser to an empty last name", err, kms.KindInvalid)
	_, err = e.svc.UpdateUser(e.root, kms.UserRef{Value: "nobody"}, kms.UserUpdate{FirstName: &first})
	wantKind(t, "UpdateUser of a missing User", err, kms.KindNotFound)

	t.Run("self", func(t *testing.T) {
		self, _ := e.signIn(t, "erin", pw)
		last := "Self"
		got, err := e.svc.UpdateUser(self, kms.UserRef{Value: u.ID, ByID: true}, kms.UserUpdate{LastName: &last})
		if err != nil || got.LastName != "Self" {
			t.Fatalf("UpdateUser of self = %+v, %v", got, err)
		}
		if got, err := e.svc.GetUser(self, kms.UserRef{Value: "erin"}); err != nil || got.ID != u.ID {
			t.Fatalf("GetUser of self = %+v, %v", got, err)
		}
		_, err = e.svc.UpdateUser(self, kms.UserRef{Value: "erin"}, kms.UserUpdate{Flags: kms.Flags{"keyring.x.read": true}})
		wantKind(t, "UpdateUser of its own flags", err, kms.KindPermissionDenied)
		_, err = e.svc.UpdateUser(self, kms.UserRef{Value: "frank"}, kms.UserUpdate{LastName: &last})
		wantKind(t, "UpdateUser of another User", err, kms.KindPermissionDenied)
		_, err = e.svc.GetUser(self, kms.UserRef{Value: "frank"})
		wantKind(t, "GetUser of another User", err, kms.KindPermissionDenied)
		_, err = e.svc.GetUser(self, kms.UserRef{Value: "nobody"})
		wantKind(t, "GetUser of a missing User", err, kms.KindPermissionDenied)
		_, err = e.svc.DeleteUser(self, kms.UserRef{Value: "erin"})
		wantKind(t, "DeleteUser of self", err, kms.KindPermissionDenied)
	})

	t.Run("flags take effect on the live token", func(t *testing.T) {
		e.ring(t, "x")
		self, token := e.signIn(t, "erin", pw)
		_, err := e.svc.Encrypt(self, kms.EncryptInput{RingName: "x"})
		wantKind(t, "Encrypt before the grant", err, kms.KindPermissionDenied)
		if _, err := e.svc.UpdateUser(e.root, kms.UserRef{Value: "erin"}, kms.UserUpdate{Flags: kms.Flags{"keyring.x.encrypt": true}}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.svc.Encrypt(e.actingWith(t, token), kms.EncryptInput{RingName: "x"}); err != nil {
			t.Fatalf("Encrypt after the grant = %v", err)
		}
		writer := e.as(t, kms.Flags{kms.FlagUsersWrite: true, "keyring.x.encrypt": true})
		_, err = e.svc.UpdateUser(writer, kms.UserRef{Value: "erin"}, kms.UserUpdate{Flags: kms.Flags{"keyring.x.rotate": true}})
		wantKind(t, "UpdateUser granting a flag the caller lacks", err, kms.KindPermissionDenied)
		if _, err := e.svc.UpdateUser(writer, kms.UserRef{Value: "erin"}, kms.UserUpdate{Flags: kms.Flags{}}); err != nil {
			t.Fatalf("UpdateUser taking the flags away = %v", err)
		}
		_, err = e.svc.Encrypt(e.actingWith(t, token), kms.EncryptInput{RingName: "x"})
		wantKind(t, "Encrypt after the flags were taken away", err, kms.KindPermissionDenied)
	})

	t.Run("a more powerful User is out of reach", func(t *testing.T) {
		e.createUser(t, "boss", kms.Flags{"*": true})
		writer := e.as(t, kms.Flags{kms.FlagUsersWrite: true})
		mine := "mine@example.com"
		_, err := e.svc.UpdateUser(writer, kms.UserRef{Value: "boss"}, kms.UserUpdate{Email: &mine})
		wantKind(t, "UpdateUser of a User with more flags", err, kms.KindPermissionDenied)
		_, err = e.svc.DeleteUser(writer, kms.UserRef{Value: "boss"})
		wantKind(t, "DeleteUser of a User with more flags", err, kms.KindPermissionDenied)
		if _, err := e.svc.UpdateUser(writer, kms.UserRef{Value: "frank"}, kms.UserUpdate{Email: &mine}); err != nil {
			t.Fatalf("UpdateUser of a User without flags = %v", err)
		}
	})
}

func TestDeleteUser(t *testing.T) {
	e := newUserEnv(t)
	u, pw := e.createUser(t, "gina", nil)
	_, token := e.signIn(t, "gina", pw)
	tests := []struct {
		name string
		ref  kms.UserRef
	}{
		{"by username", kms.UserRef{Value: "GINA"}},
		{"by ID", kms.UserRef{Value: u.ID, ByID: true}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if i > 0 {
				u, _ = e.createUser(t, "gina", nil)
				tt.ref.Value = u.ID
			}
			res, err := e.svc.DeleteUser(e.root, tt.ref)
			if err != nil || !strings.Contains(res.Message, "gina") {
				t.Fatalf("DeleteUser = %+v, %v", res, err)
			}
			_, err = e.svc.GetUser(e.root, tt.ref)
			wantKind(t, "GetUser after delete", err, kms.KindNotFound)
			_, err = e.svc.DeleteUser(e.root, tt.ref)
			wantKind(t, "DeleteUser again", err, kms.KindNotFound)
		})
	}
	_, err := e.svc.Authenticate(context.Background(), token)
	wantKind(t, "Authenticate with the deleted User's token", err, kms.KindUnauthenticated)
	_, err = e.svc.Login(context.Background(), kms.LoginInput{Username: "gina", Password: pw})
	wantKind(t, "Login of a deleted User", err, kms.KindInvalid)
}

func TestListUsers(t *testing.T) {
	e := newUserEnv(t)
	names := []string{"user-e", "user-a", "USER-d", "user-c", "user-b"}
	for _, n := range names {
		e.createUser(t, n, nil)
	}
	other := e.account(t, "other")
	for _, n := range []string{"zed", "amy"} {
		in := userInput(n, nil)
		in.AccountID = other.ID
		if _, err := e.svc.CreateUser(e.root, in); err != nil {
			t.Fatal(err)
		}
	}
	key, err := e.svc.CreateAPIKey(e.root, kms.APIKeyInput{AccountID: other.ID, Flags: kms.Flags{kms.FlagUsersRead: true}})
	if err != nil {
		t.Fatal(err)
	}
	otherCtx := e.actingWith(t, key.Key)

	list := func(t *testing.T, ctx context.Context, limit int) []string {
		t.Helper()
		var got []string
		req := kms.PageRequest{Limit: limit}
		for range 20 {
			page, err := e.svc.ListUsers(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if page.Pagination.Count != len(page.Data) || page.Pagination.Count > limit {
				t.Fatalf("page %+v has %d users", page.Pagination, len(page.Data))
			}
			for _, u := range page.Data {
				got = append(got, u.Username)
			}
			if !page.Pagination.HasMore {
				return got
			}
			req.Cursor = page.Pagination.NextCursor
		}
		t.Fatal("ListUsers does not end")
		return nil
	}
	tests := []struct {
		name string
		ctx  context.Context
		want []string
	}{
		{"every Account with accounts.all", e.root, []string{"amy", "user-a", "user-b", "user-c", "USER-d", "user-e", "zed"}},
		{"own Account", e.as(t, kms.Flags{kms.FlagUsersRead: true}), []string{"user-a", "user-b", "user-c", "USER-d", "user-e"}},
		{"the other Account", otherCtx, []string{"amy", "zed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := list(t, tt.ctx, 2); !slices.Equal(got, tt.want) {
				t.Fatalf("ListUsers = %v, want %v", got, tt.want)
			}
		})
	}
	t.Run("tenancy", func(t *testing.T) {
		_, err := e.svc.GetUser(otherCtx, kms.UserRef{Value: "user-a"})
		wantKind(t, "GetUser of another Account's User", err, kms.KindNotFound)
		if _, err := e.svc.GetUser(otherCtx, kms.UserRef{Value: "amy"}); err != nil {
			t.Fatalf("GetUser of own Account's User = %v", err)
		}
		_, err = e.svc.ListUsers(e.as(t, kms.Flags{kms.FlagUsersWrite: true}), kms.PageRequest{})
		wantKind(t, "ListUsers without users.read", err, kms.KindPermissionDenied)
	})
}

// A User's access token acts with the User's flags.
func TestUserFlags(t *testing.T) {
	e := newUserEnv(t)
	e.ring(t, "x")
	_, pw := e.createUser(t, "henry", kms.Flags{"keyring.x.encrypt": true})
	ctx, _ := e.signIn(t, "henry", pw)
	if p := kms.PrincipalFrom(ctx); p.Kind != kms.PrincipalUser || p.AccountID != e.acct {
		t.Fatalf("principal = %+v", p)
	}
	if _, err := e.svc.Encrypt(ctx, kms.EncryptInput{RingName: "x"}); err != nil {
		t.Fatalf("Encrypt = %v", err)
	}
	_, err := e.svc.Rotate(ctx, kms.RotateInput{RingName: "x"})
	wantKind(t, "Rotate", err, kms.KindPermissionDenied)
	_, err = e.svc.ListUsers(ctx, kms.PageRequest{})
	wantKind(t, "ListUsers", err, kms.KindPermissionDenied)
}

func TestMaxUsers(t *testing.T) {
	e := newUserEnv(t, func(o *kms.Options) { o.Limits.MaxUsers = 2 })
	e.createUser(t, "one", nil)
	if _, err := e.svc.Invite(e.root, kms.InviteInput(userInput("two", nil))); err != nil {
		t.Fatal(err)
	}
	_, err := e.svc.CreateUser(e.root, userInput("three", nil))
	wantKind(t, "CreateUser past the limit", err, kms.KindLimit)
	_, err = e.svc.Invite(e.root, kms.InviteInput(userInput("three", nil)))
	wantKind(t, "Invite past the limit", err, kms.KindLimit)
	if _, err := e.svc.DeleteUser(e.root, kms.UserRef{Value: "two"}); err != nil {
		t.Fatal(err)
	}
	e.createUser(t, "three", nil)
}

// Every operation leaves a record, and no record holds a secret.
func TestUserActivity(t *testing.T) {
	e := newUserEnv(t)
	u, pw := e.createUser(t, "ivy", nil)
	_, token := e.signIn(t, "ivy", pw)
	_, err := e.svc.Login(context.Background(), kms.LoginInput{Username: "ivy", Password: "Wrong-pass1"})
	wantKind(t, "Login with a wrong password", err, kms.KindInvalid)
	_, err = e.svc.Login(context.Background(), kms.LoginInput{Username: "nobody", Password: "Wrong-pass1"})
	wantKind(t, "Login of an unknown user", err, kms.KindInvalid)
	_, err = e.svc.GetUser(e.as(t, kms.Flags{"keyring.x.read": true}), kms.UserRef{Value: "ivy"})
	wantKind(t, "GetUser without users.read", err, kms.KindPermissionDenied)

	type rec struct {
		action, keyID, result string
		valid                 bool
	}
	var got []rec
	for _, a := range records(t, e.st) {
		if strings.HasPrefix(a.Action, "user.") {
			got = append(got, rec{a.Action, a.KeyID, fmt.Sprint(a.Props["result"]), a.Valid})
		}
		for _, secret := range []string{pw, token, "Wrong-pass1"} {
			if strings.Contains(fmt.Sprint(a.Props), secret) {
				t.Fatalf("record %s holds a secret: %v", a.Action, a.Props)
			}
		}
	}
	rootID := kms.PrincipalFrom(e.root).ID
	want := []rec{
		{"user.create", rootID, "ok", true},
		{"user.login", u.ID, "ok", true},
		{"user.login", u.ID, "invalid", false},
		{"user.login", "anonymous", "invalid", false},
	}
	if len(got) != len(want)+1 || !slices.Equal(got[:len(want)], want) || got[len(want)].action != "user.read" || got[len(want)].valid {
		t.Fatalf("user records = %v, want %v and a denied user.read", got, want)
	}
	if storeHolds(t, e.st, token) || storeHolds(t, e.st, pw) {
		t.Fatal("the store holds a token or password")
	}
}

// A bootstrap secret chosen by the operator may look like an access token.
func TestAuthenticateAPIKeyShapedLikeToken(t *testing.T) {
	st := kmstest.MemoryStore(t)
	svc := serviceOn(t, st, kms.Options{MasterKey: kms.GenerateMasterKey()})
	secret := "rkt_" + strings.Repeat("k", 40)
	if _, err := svc.Bootstrap(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the store, then the cache
		p, err := svc.Authenticate(context.Background(), secret)
		if err != nil || p.Kind != kms.PrincipalAPIKey {
			t.Fatalf("Authenticate = %+v, %v", p, err)
		}
	}
	if _, err := svc.Authenticate(context.Background(), "rkt_"+strings.Repeat("u", 43)); !errors.Is(err, kms.ErrUnauthenticated) {
		t.Fatalf("Authenticate(unknown token) = %v", err)
	}
}

// An Account with Users cannot be deleted; once its Users are gone it can,
// and their tokens and logins stay dead.
func TestUsersOfDeletedAccount(t *testing.T) {
	e := newUserEnv(t)
	other := e.account(t, "doomed")
	in := userInput("uma", nil)
	in.AccountID = other.ID
	res, err := e.svc.CreateUser(e.root, in)
	if err != nil {
		t.Fatal(err)
	}
	_, token := e.signIn(t, "uma", res.Password) // cached from here on
	_, err = e.svc.DeleteAccount(e.root, kms.AccountRef{Value: other.ID})
	wantKind(t, "DeleteAccount with a User", err, kms.KindConflict)
	if _, err := e.svc.DeleteUser(e.root, kms.UserRef{Value: "uma"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.DeleteAccount(e.root, kms.AccountRef{Value: other.ID}); err != nil {
		t.Fatal(err)
	}
	_, err = e.svc.Authenticate(context.Background(), token)
	wantKind(t, "Authenticate with a token of a deleted User", err, kms.KindUnauthenticated)
	_, err = e.svc.Login(context.Background(), kms.LoginInput{Username: "uma", Password: res.Password})
	wantKind(t, "Login of a deleted User", err, kms.KindInvalid)
}
