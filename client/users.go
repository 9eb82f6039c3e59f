package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/ringkms/kms"
)

// Users, invitations and sign-in (docs/API.md, "Users, Accounts, API keys,
// activity").

// loginRequest is the body of POST /auth/basic/login.
type loginRequest struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

// tokenPassword is the body of the invitation and reset completions.
type tokenPassword struct {
	Token    string `json:"token"`
	Password string `json:"password"`
}

// emailRequest is the body of POST /auth/basic/reset-password-start.
type emailRequest struct {
	Email string `json:"email"`
}

// messageBody is an answer {"message": ...}.
type messageBody struct {
	Message string `json:"message"`
}

func (b *messageBody) value() string { return b.Message }

// userQuery is the query that says how the path names a User: ?email=true
// for an email address, ?id=true for an ID, nothing for a username.
func userQuery(ref kms.UserRef) url.Values {
	return query("email", yes(ref.ByEmail), "id", yes(ref.ByID))
}

// CreateUser creates an active User with a generated password, returned
// this once (POST /auth/users).
func (c *Client) CreateUser(ctx context.Context, in kms.UserInput) (*kms.CreateUserResult, error) {
	return call[kms.CreateUserResult](c, ctx, req{method: http.MethodPost, path: "/auth/users", body: in})
}

// GetUser returns a User, by username, email address or ID (GET
// /auth/users/{username}).
func (c *Client) GetUser(ctx context.Context, ref kms.UserRef) (*kms.User, error) {
	return call[kms.User](c, ctx, req{method: http.MethodGet, path: endpoint("/auth/users/%s", ref.Value), query: userQuery(ref)})
}

// UpdateUser changes a User and returns it (PATCH /auth/users/{username}).
func (c *Client) UpdateUser(ctx context.Context, ref kms.UserRef, in kms.UserUpdate) (*kms.User, error) {
	return call[kms.User](c, ctx, req{method: http.MethodPatch, path: endpoint("/auth/users/%s", ref.Value), query: userQuery(ref), body: in})
}

// DeleteUser deletes a User and revokes its access tokens (DELETE
// /auth/users/{username}).
func (c *Client) DeleteUser(ctx context.Context, ref kms.UserRef) (*kms.DeleteUserResult, error) {
	return call[kms.DeleteUserResult](c, ctx, req{method: http.MethodDelete, path: endpoint("/auth/users/%s", ref.Value), query: userQuery(ref)})
}

// ListUsers returns a page of the Users (GET /auth/users).
func (c *Client) ListUsers(ctx context.Context, page kms.PageRequest) (*kms.List[*kms.User], error) {
	return call[kms.List[*kms.User]](c, ctx, req{method: http.MethodGet, path: "/auth/users", query: pageQuery(page)})
}

// Invite creates an invited User and returns the link that completes the
// invitation, which the server also mails (POST /auth/user/invite).
func (c *Client) Invite(ctx context.Context, in kms.InviteInput) (*kms.InviteResult, error) {
	return call[kms.InviteResult](c, ctx, req{method: http.MethodPost, path: "/auth/user/invite", body: in})
}

// ValidateInvite checks an invitation token and returns its User (GET
// /auth/user/invite-validate). An expired or unknown token is an
// Unauthenticated error whose State is kms.InviteExpired or
// kms.InviteInvalid. It needs no credential.
func (c *Client) ValidateInvite(ctx context.Context, token string) (*kms.InviteValidation, error) {
	return call[kms.InviteValidation](c, ctx, req{method: http.MethodGet, path: "/auth/user/invite-validate", query: query("token", token)})
}

// CompleteInvite sets the invited User's password and signs it in (POST
// /auth/user/invite-complete). A password that breaks the rules is an
// Invalid error with State "malformed-password" and Details the
// kms.PasswordCheck; a bad token is Unauthenticated with State expired or
// invalid. It needs no credential.
func (c *Client) CompleteInvite(ctx context.Context, token, password string) (*kms.InviteCompletion, error) {
	return call[kms.InviteCompletion](c, ctx, req{method: http.MethodPost, path: "/auth/user/invite-complete", body: tokenPassword{Token: token, Password: password}})
}

// Login signs a User in with its username (or, with in.ByEmail, its email
// address) and password and returns a new access token (POST
// /auth/basic/login). Use it with WithToken or WithBearer. It needs no
// credential.
func (c *Client) Login(ctx context.Context, in kms.LoginInput) (*kms.LoginResult, error) {
	body := loginRequest{Username: in.Username, Password: in.Password}
	return call[kms.LoginResult](c, ctx, req{method: http.MethodPost, path: "/auth/basic/login", query: query("email", yes(in.ByEmail)), body: body})
}

// Refresh exchanges the client's access token (its bearer secret) for a
// new one, which it returns with the User (GET /auth/basic/refresh). The
// old token is revoked: continue with c.WithBearer(res.AccessToken).
func (c *Client) Refresh(ctx context.Context) (*kms.LoginResult, error) {
	return call[kms.LoginResult](c, ctx, req{method: http.MethodGet, path: "/auth/basic/refresh"})
}

// Logout revokes the client's access token, its bearer secret (POST
// /auth/basic/logout).
func (c *Client) Logout(ctx context.Context) error {
	return c.do(ctx, req{method: http.MethodPost, path: "/auth/basic/logout"})
}

// StartPasswordReset asks for a password reset link to be mailed to the
// address and returns the server's message, the same whether or not the
// address is known (POST /auth/basic/reset-password-start). It needs no
// credential.
func (c *Client) StartPasswordReset(ctx context.Context, email string) (string, error) {
	return callWrapped[string, messageBody](c, ctx, req{method: http.MethodPost, path: "/auth/basic/reset-password-start", body: emailRequest{Email: email}})
}

// CompletePasswordReset sets a new password with the token of a reset link
// (POST /auth/basic/reset-password-complete). The server answers a failure
// with an empty 400, so the error is Invalid without detail. It needs no
// credential.
func (c *Client) CompletePasswordReset(ctx context.Context, token, password string) error {
	return c.do(ctx, req{method: http.MethodPost, path: "/auth/basic/reset-password-complete", body: tokenPassword{Token: token, Password: password}})
}

// ValidatePasswordReset checks a password-reset token without using it
// (GET /auth/basic/reset-password-complete?token=): nil when it can still
// complete a reset. Public: no credential needed.
func (c *Client) ValidatePasswordReset(ctx context.Context, token string) error {
	return c.do(ctx, req{method: http.MethodGet, path: "/auth/basic/reset-password-complete", query: url.Values{"token": {token}}})
}
