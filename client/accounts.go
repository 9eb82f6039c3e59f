package client

import (
	"context"
	"net/http"

	"github.com/ringkms/kms"
)

// Accounts, API keys and activity (docs/API.md, "Users, Accounts, API keys,
// activity").

// apiKeyRequest is the body of POST /auth/apikey.
type apiKeyRequest struct {
	AccountID string         `json:"accountId"`
	Flags     kms.Flags      `json:"flags"`
	Props     map[string]any `json:"props,omitempty"`
}

// apiKeyUpdateRequest is the body of PUT /auth/apikey (the key named by
// its secret, Key) and PUT /auth/apikeyid (named by its ID, APIKeyID).
type apiKeyUpdateRequest struct {
	Op         string          `json:"op"`
	Key        string          `json:"key,omitempty"`
	APIKeyID   string          `json:"apikeyid,omitempty"`
	Active     *bool           `json:"active,omitempty"`
	References *kms.APIKeyRefs `json:"references,omitempty"`
	Flags      kms.Flags       `json:"flags,omitempty"`
	Props      map[string]any  `json:"props,omitempty"`
}

// CreateAccount creates an Account (POST /auth/accounts).
func (c *Client) CreateAccount(ctx context.Context, in kms.AccountInput) (*kms.Account, error) {
	return call[kms.Account](c, ctx, req{method: http.MethodPost, path: "/auth/accounts", body: in})
}

// GetAccount returns an Account, by ID or by UID (GET /auth/accounts/{id}).
func (c *Client) GetAccount(ctx context.Context, ref kms.AccountRef) (*kms.Account, error) {
	return call[kms.Account](c, ctx, req{method: http.MethodGet, path: endpoint("/auth/accounts/%s", ref.Value), query: query("uid", yes(ref.ByUID))})
}

// ListAccounts returns a page of the Accounts (GET /auth/accounts).
func (c *Client) ListAccounts(ctx context.Context, page kms.PageRequest) (*kms.List[*kms.Account], error) {
	return call[kms.List[*kms.Account]](c, ctx, req{method: http.MethodGet, path: "/auth/accounts", query: pageQuery(page)})
}

// UpdateAccount changes an Account and returns it (PATCH
// /auth/accounts/{id}).
func (c *Client) UpdateAccount(ctx context.Context, ref kms.AccountRef, in kms.AccountUpdate) (*kms.Account, error) {
	return call[kms.Account](c, ctx, req{method: http.MethodPatch, path: endpoint("/auth/accounts/%s", ref.Value), query: query("uid", yes(ref.ByUID)), body: in})
}

// DeleteAccount deletes an Account that has no API keys or Users left and
// returns it as it was (DELETE /auth/accounts/{id}).
func (c *Client) DeleteAccount(ctx context.Context, ref kms.AccountRef) (*kms.Account, error) {
	return call[kms.Account](c, ctx, req{method: http.MethodDelete, path: endpoint("/auth/accounts/%s", ref.Value), query: query("uid", yes(ref.ByUID))})
}

// ListAccountAPIKeys returns a page of an Account's API keys, in their
// safe form (GET /auth/accounts/{accountId}/apikeys).
func (c *Client) ListAccountAPIKeys(ctx context.Context, ref kms.AccountRef, page kms.PageRequest) (*kms.List[*kms.APIKey], error) {
	return call[kms.List[*kms.APIKey]](c, ctx, req{method: http.MethodGet, path: endpoint("/auth/accounts/%s/apikeys", ref.Value), query: pageQuery(page, "uid", yes(ref.ByUID))})
}

// CreateAPIKey creates an API key and returns it with its secret, the only
// time the secret is shown (POST /auth/apikey). in.Flags is required: nil
// is sent as null, which the service refuses; kms.Flags{} makes a key
// without flags.
func (c *Client) CreateAPIKey(ctx context.Context, in kms.APIKeyInput) (*kms.APIKey, error) {
	body := apiKeyRequest{AccountID: in.AccountID, Flags: in.Flags, Props: in.Props}
	return call[kms.APIKey](c, ctx, req{method: http.MethodPost, path: "/auth/apikey", query: query("uid", yes(in.AccountByUID)), body: body})
}

// ListAPIKeys returns a page of the API keys, in their safe form (GET
// /auth/apikey).
func (c *Client) ListAPIKeys(ctx context.Context, page kms.PageRequest) (*kms.List[*kms.APIKey], error) {
	return call[kms.List[*kms.APIKey]](c, ctx, req{method: http.MethodGet, path: "/auth/apikey", query: pageQuery(page)})
}

// GetAPIKey returns an API key by ID, in its safe form (GET
// /auth/apikey/{apikeyid}).
func (c *Client) GetAPIKey(ctx context.Context, id string) (*kms.APIKey, error) {
	return call[kms.APIKey](c, ctx, req{method: http.MethodGet, path: endpoint("/auth/apikey/%s", id)})
}

// UpdateAPIKey changes an API key's flags, props, state or Account: PUT
// /auth/apikey when in.Ref names the key by its secret, PUT /auth/apikeyid
// when by its ID. The answer's Flags and Props are nil unless the
// credential holds apikeys.read.
func (c *Client) UpdateAPIKey(ctx context.Context, in kms.APIKeyUpdate) (*kms.APIKeyUpdateResult, error) {
	body := apiKeyUpdateRequest{Op: in.Op, Active: in.Active, References: in.References, Flags: in.Flags, Props: in.Props}
	path := "/auth/apikeyid"
	if in.Ref.BySecret {
		path, body.Key = "/auth/apikey", in.Ref.Value
	} else {
		body.APIKeyID = in.Ref.Value
	}
	return call[kms.APIKeyUpdateResult](c, ctx, req{method: http.MethodPut, path: path, body: body})
}

// DeleteAPIKey deletes an API key, named by ID or by secret (DELETE
// /auth/apikey/{apikey}).
func (c *Client) DeleteAPIKey(ctx context.Context, ref kms.APIKeyRef) (*kms.DeleteAPIKeyResult, error) {
	r := req{method: http.MethodDelete, path: endpoint("/auth/apikey/%s", ref.Value), query: query("id", yes(!ref.BySecret))}
	if ref.BySecret {
		r.pattern = "/auth/apikey/{apikey}"
	}
	return call[kms.DeleteAPIKeyResult](c, ctx, r)
}

// SearchAPIKeysByRing returns a page of the API keys whose flags name a
// key ring (GET /auth/search/keyring/{keyringname}/apikey).
func (c *Client) SearchAPIKeysByRing(ctx context.Context, ref kms.RingRef, page kms.PageRequest) (*kms.List[*kms.APIKey], error) {
	return call[kms.List[*kms.APIKey]](c, ctx, req{method: http.MethodGet, path: endpoint("/auth/search/keyring/%s/apikey", ref.Name), query: pageQuery(page, "id", yes(ref.ByID))})
}

// ValidateAPIKey checks another API key and records the activity reported
// with it (POST /auth/validate).
func (c *Client) ValidateAPIKey(ctx context.Context, in kms.ValidateInput) (*kms.ValidateResult, error) {
	return call[kms.ValidateResult](c, ctx, req{method: http.MethodPost, path: "/auth/validate", body: in})
}

// SearchActivity returns a page of the activity records that match f, the
// audit trail (POST /auth/search/activity). Send the same f with every page
// of one sequence.
func (c *Client) SearchActivity(ctx context.Context, f ActivityFilter, page kms.PageRequest) (*kms.List[*kms.Activity], error) {
	return call[kms.List[*kms.Activity]](c, ctx, req{method: http.MethodPost, path: "/auth/search/activity", query: pageQuery(page), body: f})
}

// GetActivity returns an activity record (GET /auth/activity/{id}).
func (c *Client) GetActivity(ctx context.Context, id string) (*kms.Activity, error) {
	return call[kms.Activity](c, ctx, req{method: http.MethodGet, path: endpoint("/auth/activity/%s", id)})
}
