package kms_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ringkms/kms"
)

// TestDescribeCredential: an API key is described with its sorted flags,
// its creation and no expiry; a User's access token with the User's
// flags, its issue and its real expiry, whose TTL runs down with the
// clock; a secret that is no credential is Unauthenticated, and so is
// the token once it expired.
func TestDescribeCredential(t *testing.T) {
	e := newUserEnv(t)
	k, err := e.svc.CreateAPIKey(e.root, kms.APIKeyInput{AccountID: e.acct, Flags: kms.Flags{"keyring.b.encrypt": true, "keyring.a.read": true}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := e.svc.DescribeCredential(context.Background(), k.Key)
	if err != nil || c.Kind != kms.PrincipalAPIKey || c.ID != k.KeyID || c.AccountID != e.acct ||
		!slices.Equal(c.Flags, []string{"keyring.a.read", "keyring.b.encrypt"}) || !c.IssuedAt.Equal(k.CreatedAt) ||
		!c.ExpiresAt.IsZero() || c.TTL != 0 {
		t.Fatalf("DescribeCredential(API key) = %+v, %v", c, err)
	}

	u, pw := e.createUser(t, "ada", kms.Flags{"keyring.x.decrypt": true})
	_, token := e.signIn(t, "ada", pw)
	c, err = e.svc.DescribeCredential(context.Background(), token)
	if err != nil || c.Kind != kms.PrincipalUser || c.ID != u.ID || !slices.Equal(c.Flags, []string{"keyring.x.decrypt"}) ||
		!c.IssuedAt.Equal(e.clock.Now()) || c.TTL <= 0 || !c.ExpiresAt.Equal(c.IssuedAt.Add(c.TTL)) {
		t.Fatalf("DescribeCredential(access token) = %+v, %v", c, err)
	}
	ttl := c.TTL
	e.advance(time.Minute)
	if c, err := e.svc.DescribeCredential(context.Background(), token); err != nil || c.TTL != ttl-time.Minute {
		t.Errorf("TTL a minute later = %+v, %v; want %v", c, err, ttl-time.Minute)
	}
	e.advance(ttl)
	_, err = e.svc.DescribeCredential(context.Background(), token)
	wantKind(t, "DescribeCredential(expired token)", err, kms.KindUnauthenticated)
	_, err = e.svc.DescribeCredential(context.Background(), "rk_nothing")
	wantKind(t, "DescribeCredential(no credential)", err, kms.KindUnauthenticated)
}

// TestLoginAPIKey: the login of an API key needs its ID and its secret;
// it answers the key's description and is recorded; a wrong secret, a
// secret of another key, or a User's token is Unauthenticated and a
// refused apikey.login, with no record of the ID given.
func TestLoginAPIKey(t *testing.T) {
	e := newUserEnv(t)
	k, err := e.svc.CreateAPIKey(e.root, kms.APIKeyInput{AccountID: e.acct, Flags: kms.Flags{"keyring.a.encrypt": true}})
	if err != nil {
		t.Fatal(err)
	}
	other, err := e.svc.CreateAPIKey(e.root, kms.APIKeyInput{AccountID: e.acct, Flags: kms.Flags{}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := e.svc.LoginAPIKey(context.Background(), k.KeyID, k.Key)
	if err != nil || c.ID != k.KeyID || !slices.Equal(c.Flags, []string{"keyring.a.encrypt"}) {
		t.Fatalf("LoginAPIKey = %+v, %v", c, err)
	}
	u, pw := e.createUser(t, "ada", kms.Flags{})
	_, token := e.signIn(t, "ada", pw)
	for _, tc := range []struct{ what, id, secret string }{
		{"a wrong secret", k.KeyID, "rk_wrong"},
		{"another key's secret", k.KeyID, other.Key},
		{"a User's access token", k.KeyID, token},
		{"a secret given as the ID", other.Key, other.Key},
	} {
		_, err := e.svc.LoginAPIKey(context.Background(), tc.id, tc.secret)
		wantKind(t, "LoginAPIKey with "+tc.what, err, kms.KindUnauthenticated)
	}
	_, err = e.svc.LoginAPIKey(context.Background(), "", k.Key)
	wantKind(t, "LoginAPIKey without an ID", err, kms.KindInvalid)

	recs, err := e.svc.SearchActivity(e.root, kms.ActivityFilter{Action: "apikey.login"}, kms.PageRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range recs.Data {
		got = append(got, a.KeyID+" "+map[bool]string{true: "granted", false: "refused"}[a.Valid])
		for _, v := range a.Props {
			if s, _ := v.(string); strings.Contains(s, other.Key) {
				t.Errorf("record %+v holds a secret", a)
			}
		}
	}
	slices.Sort(got)
	want := []string{k.KeyID + " granted", "anonymous refused", u.ID + " refused", other.KeyID + " refused", other.KeyID + " refused"}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("apikey.login records = %q, want %q", got, want)
	}
}
