package httpapi

import (
	"net/http"
	"strings"

	"github.com/julienschmidt/httprouter"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/httpedge"
)

// The /auth group (docs/API.md): Users and login, Accounts, API
// keys and activity. As everywhere, a handler decodes, calls one Service
// method and encodes; who may do what is the Service's to decide.

// queryTrue reports whether the query parameter name is "true" (in any
// case), as the ?id=, ?uid= and ?email= switches are.
func queryTrue(r *http.Request, name string) bool {
	return strings.EqualFold(r.URL.Query().Get(name), "true")
}

// bearerSecret returns the secret of the request's Authorization header,
// which the bearer middleware has accepted: refresh and logout act on the
// access token that was presented.
func bearerSecret(r *http.Request) string {
	secret, _ := httpedge.BearerToken(r.Header.Get("Authorization"))
	return secret
}

// messageBody is an answer that is only a message.
type messageBody struct {
	Message string `json:"message"`
}

// emptyBody is the {} of password reset completion.
type emptyBody struct{}

// tokenPasswordRequest is the body of invitation and password reset
// completion.
type tokenPasswordRequest struct {
	Token    string `json:"token"`
	Password string `json:"password"`
}

// POST /auth/validate
func (a *api) validateAPIKey(r *http.Request, _ httprouter.Params) (any, error) {
	return decoded(a, r, a.svc.ValidateAPIKey)
}

// POST /auth/user/invite, answered {"loginUrl": ...}.
func (a *api) invite(r *http.Request, _ httprouter.Params) (any, error) {
	return decoded(a, r, a.svc.Invite)
}

// GET /auth/user/invite-validate?token=. A bad token is a 401 whose state
// is expired or invalid. A browser (an Accept that prefers text/html),
// which opened the link of an invitation's mail, gets a page instead
// (invitePage).
func (a *api) validateInvite(r *http.Request, _ httprouter.Params) (any, error) {
	if prefersHTML(r) {
		return a.invitePage(r), nil
	}
	return result(a.svc.ValidateInvite(r.Context(), r.URL.Query().Get("token")))
}

// POST /auth/user/invite-complete, answered {"user", "accesstoken"}.
func (a *api) completeInvite(r *http.Request, _ httprouter.Params) (any, error) {
	var in tokenPasswordRequest
	if err := a.decode(r, &in); err != nil {
		return nil, err
	}
	return result(a.svc.CompleteInvite(r.Context(), in.Token, in.Password))
}

// loginRequest is the body of POST /auth/basic/login.
type loginRequest struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

// POST /auth/basic/login(?email=true), answered {"user", "accessToken"}.
// With ?email=true the username member holds the User's email address.
func (a *api) login(r *http.Request, _ httprouter.Params) (any, error) {
	var in loginRequest
	if err := a.decode(r, &in); err != nil {
		return nil, err
	}
	return result(a.svc.Login(r.Context(), kms.LoginInput{Username: in.Username, Password: in.Password, ByEmail: queryTrue(r, "email")}))
}

// GET /auth/basic/refresh: the access token presented is exchanged for a
// new one, answered {"user", "accessToken"}.
func (a *api) refresh(r *http.Request, _ httprouter.Params) (any, error) {
	return result(a.svc.Refresh(r.Context(), bearerSecret(r)))
}

// POST /auth/basic/logout: the access token presented is revoked.
func (a *api) logout(r *http.Request, _ httprouter.Params) (any, error) {
	if err := a.svc.Logout(r.Context(), bearerSecret(r)); err != nil {
		return nil, err
	}
	return messageBody{"logged out"}, nil
}

// emailRequest is the body of POST /auth/basic/reset-password-start.
type emailRequest struct {
	Email string `json:"email"`
}

// POST /auth/basic/reset-password-start, answered {"message"} alike for
// known and unknown addresses.
func (a *api) startPasswordReset(r *http.Request, _ httprouter.Params) (any, error) {
	var in emailRequest
	if err := a.decode(r, &in); err != nil {
		return nil, err
	}
	msg, err := a.svc.StartPasswordReset(r.Context(), in.Email)
	if err != nil {
		return nil, err
	}
	return messageBody{msg}, nil
}

// POST /auth/basic/reset-password-complete. It answers an empty
// object, 200 on success and 400 on failure: whatever went wrong (a bad
// token, a password that breaks the rules, a malformed body) the body is
// {} with the error's status, so it tells nothing of the token. The error
// still goes to the log line.
func (a *api) completePasswordReset(r *http.Request, _ httprouter.Params) (any, error) {
	var in tokenPasswordRequest
	if err := a.decode(r, &in); err != nil {
		return emptyBody{}, err
	}
	if err := a.svc.CompletePasswordReset(r.Context(), in.Token, in.Password); err != nil {
		return emptyBody{}, err
	}
	return emptyBody{}, nil
}

// GET /auth/basic/reset-password-complete?token=: whether a reset token
// can still complete a reset, for the page the mailed link opens. 200
// {"state":"valid"}, or 400 {} like the POST, telling nothing more. A
// browser (an Accept that prefers text/html), which opened the link of
// the mail, gets that page (resetPage).
func (a *api) checkPasswordReset(r *http.Request, _ httprouter.Params) (any, error) {
	if prefersHTML(r) {
		return a.resetPage(r), nil
	}
	if err := a.svc.ValidatePasswordReset(r.Context(), r.URL.Query().Get("token")); err != nil {
		return emptyBody{}, err
	}
	return struct {
		State string `json:"state"`
	}{"valid"}, nil
}

// userRef names the User of the :username parameter: by email address
// with ?email=true, by ID with ?id=true.
func userRef(r *http.Request, ps httprouter.Params) kms.UserRef {
	return kms.UserRef{Value: ps.ByName("username"), ByEmail: queryTrue(r, "email"), ByID: queryTrue(r, "id")}
}

// GET /auth/users/:username
func (a *api) getUser(r *http.Request, ps httprouter.Params) (any, error) {
	return result(a.svc.GetUser(r.Context(), userRef(r, ps)))
}

// PATCH /auth/users/:username
func (a *api) updateUser(r *http.Request, ps httprouter.Params) (any, error) {
	return decodedFor(a, r, userRef(r, ps), a.svc.UpdateUser)
}

// DELETE /auth/users/:username, answered {"message"}.
func (a *api) deleteUser(r *http.Request, ps httprouter.Params) (any, error) {
	return result(a.svc.DeleteUser(r.Context(), userRef(r, ps)))
}

// GET /auth/users
func (a *api) listUsers(r *http.Request, _ httprouter.Params) (any, error) {
	return paged(r, a.svc.ListUsers)
}

// POST /auth/users, answered {"user", "password"}. A username or email
// already taken is a 400 whose errors member names it.
func (a *api) createUser(r *http.Request, _ httprouter.Params) (any, error) {
	return decoded(a, r, a.svc.CreateUser)
}

// accountRef names the Account of the :id parameter: by UID with
// ?uid=true.
func accountRef(r *http.Request, ps httprouter.Params) kms.AccountRef {
	return kms.AccountRef{Value: ps.ByName("id"), ByUID: queryTrue(r, "uid")}
}

// POST /auth/accounts
func (a *api) createAccount(r *http.Request, _ httprouter.Params) (any, error) {
	return decoded(a, r, a.svc.CreateAccount)
}

// GET /auth/accounts
func (a *api) listAccounts(r *http.Request, _ httprouter.Params) (any, error) {
	return paged(r, a.svc.ListAccounts)
}

// GET /auth/accounts/:id
func (a *api) getAccount(r *http.Request, ps httprouter.Params) (any, error) {
	return result(a.svc.GetAccount(r.Context(), accountRef(r, ps)))
}

// PATCH /auth/accounts/:id
func (a *api) updateAccount(r *http.Request, ps httprouter.Params) (any, error) {
	return decodedFor(a, r, accountRef(r, ps), a.svc.UpdateAccount)
}

// DELETE /auth/accounts/:id, answered with the Account as it was.
func (a *api) deleteAccount(r *http.Request, ps httprouter.Params) (any, error) {
	return result(a.svc.DeleteAccount(r.Context(), accountRef(r, ps)))
}

// GET /auth/accounts/:id/apikeys
func (a *api) listAccountAPIKeys(r *http.Request, ps httprouter.Params) (any, error) {
	return pagedFor(r, accountRef(r, ps), a.svc.ListAccountAPIKeys)
}

// GET /auth/apikey
func (a *api) listAPIKeys(r *http.Request, _ httprouter.Params) (any, error) {
	return paged(r, a.svc.ListAPIKeys)
}

// createAPIKeyRequest is the body of POST /auth/apikey.
type createAPIKeyRequest struct {
	AccountID string         `json:"accountId"`
	Flags     kms.Flags      `json:"flags"`
	Props     map[string]any `json:"props"`
}

// POST /auth/apikey(?uid=true), answered with the key and its secret.
// With ?uid=true, accountId holds the Account's UID.
func (a *api) createAPIKey(r *http.Request, _ httprouter.Params) (any, error) {
	var in createAPIKeyRequest
	if err := a.decode(r, &in); err != nil {
		return nil, err
	}
	return result(a.svc.CreateAPIKey(r.Context(), kms.APIKeyInput{
		AccountID: in.AccountID, AccountByUID: queryTrue(r, "uid"), Flags: in.Flags, Props: in.Props,
	}))
}

// updateAPIKeyRequest is the body of PUT /auth/apikey (the key named by
// its secret, key) and PUT /auth/apikeyid (by its ID, apikeyid).
type updateAPIKeyRequest struct {
	Op         string          `json:"op"`
	Key        string          `json:"key"`
	APIKeyID   string          `json:"apikeyid"`
	Active     *bool           `json:"active"`
	References *kms.APIKeyRefs `json:"references"`
	Flags      kms.Flags       `json:"flags"`
	Props      map[string]any  `json:"props"`
}

func (in *updateAPIKeyRequest) update(ref kms.APIKeyRef) kms.APIKeyUpdate {
	return kms.APIKeyUpdate{Op: in.Op, Ref: ref, Active: in.Active, References: in.References, Flags: in.Flags, Props: in.Props}
}

// PUT /auth/apikey: the key named by its secret.
func (a *api) updateAPIKey(r *http.Request, _ httprouter.Params) (any, error) {
	var in updateAPIKeyRequest
	if err := a.decode(r, &in); err != nil {
		return nil, err
	}
	return result(a.svc.UpdateAPIKey(r.Context(), in.update(kms.APIKeyRef{Value: in.Key, BySecret: true})))
}

// PUT /auth/apikeyid: the key named by its ID.
func (a *api) updateAPIKeyByID(r *http.Request, _ httprouter.Params) (any, error) {
	var in updateAPIKeyRequest
	if err := a.decode(r, &in); err != nil {
		return nil, err
	}
	return result(a.svc.UpdateAPIKey(r.Context(), in.update(kms.APIKeyRef{Value: in.APIKeyID})))
}

// GET /auth/apikey/:apikeyid and GET /auth/apikey/:apikeyid/props: the
// key in its safe form.
func (a *api) getAPIKey(r *http.Request, ps httprouter.Params) (any, error) {
	return result(a.svc.GetAPIKey(r.Context(), ps.ByName("apikeyid")))
}

// DELETE /auth/apikey/:apikey(?id=true): the path holds the key's secret,
// or its ID with ?id=true. The route is marked secretPath.
func (a *api) deleteAPIKey(r *http.Request, ps httprouter.Params) (any, error) {
	byID := queryTrue(r, "id")
	return result(a.svc.DeleteAPIKey(r.Context(), kms.APIKeyRef{Value: ps.ByName("apikey"), BySecret: !byID}))
}

// GET /auth/search/keyring/:keyringname/apikey(?id=true)
func (a *api) searchAPIKeysByRing(r *http.Request, ps httprouter.Params) (any, error) {
	ref := kms.RingRef{Name: ps.ByName("keyringname"), ByID: queryTrue(r, "id")}
	return pagedFor(r, ref, a.svc.SearchAPIKeysByRing)
}

// GET /auth/activity/:id
func (a *api) getActivity(r *http.Request, ps httprouter.Params) (any, error) {
	return result(a.svc.GetActivity(r.Context(), ps.ByName("id")))
}

// POST /auth/search/activity?cursor=&limit= with the filters in the body
// (an empty body means no filter).
func (a *api) searchActivity(r *http.Request, _ httprouter.Params) (any, error) {
	return searched(a, r, a.svc.SearchActivity)
}
