package transit_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/client"
	"github.com/ringkms/kms/integration/internal/harness"
)

// TestTokenAuth: the token calls of HashiCorp's client (lookup-self,
// renew-self) on an API key answer its flags as policies and no expiry;
// on a User's access token, its real TTL; AppRole's login with an API
// key's ID and secret answers a client token that encrypts, and a wrong
// secret ID is Vault's 400, recorded as a refused apikey.login.
func TestTokenAuth(t *testing.T) {
	in := harness.New(t)
	p := in.Start(t, "-transit")
	ctx := context.Background()
	secret := in.APIKey(t, p, "keyring.app.encrypt", "keyring.app.create")
	c := vaultClient(t, p, secret)

	self, err := c.Auth().Token().LookupSelf()
	if err != nil {
		t.Fatalf("LookupSelf = %v", err)
	}
	policies, _ := self.TokenPolicies()
	ttl, _ := self.TokenTTL()
	if !slices.Equal(policies, []string{"keyring.app.create", "keyring.app.encrypt"}) || ttl != 0 || self.Data["id"] != secret {
		t.Errorf("LookupSelf of an API key = %+v (policies %v, ttl %v)", self.Data, policies, ttl)
	}
	renewed, err := c.Auth().Token().RenewSelf(0)
	if err != nil || renewed.Auth == nil || renewed.Auth.ClientToken != secret || renewed.Auth.Renewable {
		t.Errorf("RenewSelf of an API key = %+v, %v", renewed, err)
	}

	// A User's access token, with its real lifetime.
	root := harness.Client(t, p, in.Bootstrap)
	u, err := root.CreateUser(ctx, kms.UserInput{Username: "ada", Email: "ada@example.com", FirstName: "Ada", LastName: "L", Flags: kms.Flags{"keyring.app.decrypt": true}})
	if err != nil {
		t.Fatal(err)
	}
	anon, err := client.New(p.URL)
	if err != nil {
		t.Fatal(err)
	}
	login, err := anon.Login(ctx, kms.LoginInput{Username: "ada", Password: u.Password})
	if err != nil {
		t.Fatal(err)
	}
	self, err = vaultClient(t, p, login.AccessToken).Auth().Token().LookupSelf()
	if err != nil {
		t.Fatalf("LookupSelf of an access token = %v", err)
	}
	ttl, _ = self.TokenTTL()
	if ttl <= 0 || ttl > time.Hour || self.Data["expire_time"] == nil {
		t.Errorf("LookupSelf of an access token = %+v (ttl %v), want its real TTL (at most kmsd's default token TTL, an hour)", self.Data, ttl)
	}

	// AppRole: the API key's ID and secret.
	keys, err := root.ListAPIKeys(ctx, kms.PageRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var keyID string
	for _, k := range keys.Data {
		if k.Flags["keyring.app.encrypt"] {
			keyID = k.KeyID
		}
	}
	for _, cl := range clients {
		anon := cl.make(t, p, "")
		if _, err := anon.write("auth/approle/login", map[string]any{"role_id": keyID, "secret_id": secret}); err != nil {
			t.Fatalf("%s: approle login = %v", cl.name, err)
		}
		if _, err := anon.write("auth/approle/login", map[string]any{"role_id": keyID, "secret_id": "rk_wrong"}); !refused(anon, err, 400, "invalid role or secret id") {
			t.Errorf("%s: approle login with a wrong secret ID = %v, want 400", cl.name, err)
		}
	}
	s, err := vaultClient(t, p, "").Logical().Write("auth/approle/login", map[string]any{"role_id": keyID, "secret_id": secret})
	if err != nil || s.Auth == nil || s.Auth.ClientToken != secret {
		t.Fatalf("approle login = %+v, %v", s, err)
	}
	if _, err := vaultClient(t, p, s.Auth.ClientToken).Logical().Write("transit/encrypt/app", map[string]any{"plaintext": b64("x")}); err != nil {
		t.Errorf("encrypt with the client token of the login = %v", err)
	}
	if got := harness.Actions(t, root, client.ActivityFilter{Action: "apikey.login"}); got != "apikey.login apikey.login apikey.login apikey.login apikey.login" {
		t.Errorf("apikey.login records = %q, want five", got)
	}
	p.Stop(t)
	in.VerifyAudit(t)
}
