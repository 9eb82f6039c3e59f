package transit

import (
	"net/http"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/httpedge"
)

// Vault's token and AppRole paths that the clients of the transit engine
// call besides it: a token's holder looks it up and renews it
// (go-kms-wrapping's transit wrapper renews at start, Vault's agent and
// CLI look up), and a machine logs in with a role and a secret ID.
// ringkms's credentials are the tokens: an API key, which does not
// expire, or a User's access token, with its real expiry. Neither is
// renewable here (an access token is renewed by /auth/refresh of
// kmsd's own interface), so renew-self answers the token as it is, with
// renewable false, as Vault answers a token it cannot extend.
// auth/approle/login takes an API key's ID as role_id and its secret as
// secret_id, and answers that secret as the client token: a login issues
// no other credential (kms.Service.LoginAPIKey, recorded apikey.login).

// authRoutes are the routes below /v1/auth.
func (a *api) authRoutes() []route {
	return []route{
		{method: http.MethodGet, path: "/token/lookup-self", handle: a.lookupSelf, read: true, flag: "self"},
		{method: http.MethodPost, path: "/token/lookup-self", handle: a.lookupSelf, read: true, flag: "self"},
		{method: http.MethodPost, path: "/token/renew-self", handle: a.renewSelf, flag: "self"},
		{method: http.MethodPost, path: "/approle/login", handle: a.appRoleLogin, flag: "public", public: true},
	}
}

// caller describes the credential of r, which the pipeline authenticated.
func (a *api) caller(r *http.Request) (string, *kms.Credential, error) {
	secret, err := a.credential(r)
	if err != nil {
		return "", nil, err
	}
	c, err := a.svc.DescribeCredential(r.Context(), secret)
	return secret, c, err
}

// lookupSelf answers the caller's token as Vault's auth/token/lookup-self
// describes one.
func (a *api) lookupSelf(r *http.Request, _ httprouter.Params) (*answer, error) {
	if _, err := a.readParams(r); err != nil {
		return nil, err
	}
	secret, c, err := a.caller(r)
	if err != nil {
		return nil, err
	}
	var expire any
	if !c.ExpiresAt.IsZero() {
		expire = c.ExpiresAt.UTC().Format(time.RFC3339Nano)
	}
	ttl := int64(c.TTL / time.Second)
	return &answer{data: map[string]any{
		"id":               secret,
		"accessor":         "",
		"creation_time":    c.IssuedAt.Unix(),
		"creation_ttl":     ttl,
		"display_name":     displayName(c),
		"entity_id":        "",
		"expire_time":      expire,
		"explicit_max_ttl": 0,
		"issue_time":       c.IssuedAt.UTC().Format(time.RFC3339Nano),
		"meta":             map[string]string{"account_id": c.AccountID, "id": c.ID},
		"num_uses":         0,
		"orphan":           true,
		"path":             "auth/token/create",
		"policies":         policies(c),
		"renewable":        false,
		"ttl":              ttl,
		"type":             "service",
	}}, nil
}

// renewSelf answers auth/token/renew-self: the caller's token, not
// extended (increment is read and has no effect), renewable false.
func (a *api) renewSelf(r *http.Request, _ httprouter.Params) (*answer, error) {
	p, err := a.readParams(r)
	if err != nil {
		return nil, err
	}
	if _, _, err := p.seconds("increment"); err != nil {
		return nil, err
	}
	secret, c, err := a.caller(r)
	if err != nil {
		return nil, err
	}
	return &answer{auth: authData(secret, c)}, nil
}

// appRoleLogin answers auth/approle/login: role_id is an API key's ID,
// secret_id its secret, which comes back as the client token.
func (a *api) appRoleLogin(r *http.Request, _ httprouter.Params) (*answer, error) {
	p, err := a.readParams(r)
	if err != nil {
		return nil, err
	}
	if err := p.unsupported("role_name"); err != nil {
		return nil, err
	}
	var roleID, secretID string
	if err := p.into(map[string]any{"role_id": &roleID, "secret_id": &secretID}); err != nil {
		return nil, err
	}
	if roleID == "" {
		return nil, kms.Errorf(kms.KindInvalid, "missing role_id")
	}
	if secretID == "" {
		return nil, kms.Errorf(kms.KindInvalid, "missing secret_id")
	}
	c, err := a.svc.LoginAPIKey(r.Context(), roleID, secretID)
	if kms.ErrorKind(err) == kms.KindUnauthenticated {
		// Vault's answer to a role or secret ID it does not know.
		return nil, &httpedge.StatusError{Status: http.StatusBadRequest, Message: "invalid role or secret ID"}
	}
	if err != nil {
		return nil, err
	}
	return &answer{auth: authData(secretID, c)}, nil
}

// authData is the auth block of Vault's answers that carry a token.
func authData(secret string, c *kms.Credential) map[string]any {
	return map[string]any{
		"client_token":   secret,
		"accessor":       "",
		"policies":       policies(c),
		"token_policies": policies(c),
		"metadata":       map[string]string{"account_id": c.AccountID, "id": c.ID},
		"lease_duration": int64(c.TTL / time.Second),
		"renewable":      false,
		"entity_id":      "",
		"token_type":     "service",
		"orphan":         true,
	}
}

// policies are the credential's flags, which stand where Vault names a
// token's policies.
func policies(c *kms.Credential) []string {
	if c.Flags == nil {
		return []string{}
	}
	return c.Flags
}

// displayName names the credential as Vault's display_name does.
func displayName(c *kms.Credential) string {
	if c.Kind == kms.PrincipalAPIKey {
		return "apikey-" + c.ID
	}
	return "user-" + c.ID
}
