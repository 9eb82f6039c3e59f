package client

import (
	"context"
	"net/http"

	"github.com/ringkms/kms"
)

// Key lifecycle states (docs/API.md): each call answers the key without
// its key data. asym selects the /asym group of rings.

func keyPath(asym bool, ref kms.RingRef, keyID, tail string) (string, string) {
	group := "/ks"
	if asym {
		group = "/asym"
	}
	return endpoint(group+"/keyrings/%s/keys/%s", ref.Name, keyID) + tail, yes(ref.ByID)
}

func (c *Client) keyState(ctx context.Context, method string, asym bool, ref kms.RingRef, keyID, tail string, body any) (*kms.Key, error) {
	path, byID := keyPath(asym, ref, keyID, tail)
	return callWrapped[*kms.Key, keyBody[kms.Key]](c, ctx, req{method: method, path: path, query: query("id", byID), body: body})
}

// SetKeyState enables or disables a key of a /ks ring (PATCH
// /ks/keyrings/{ring}/keys/{keyId}).
func (c *Client) SetKeyState(ctx context.Context, ref kms.RingRef, keyID string, in kms.KeyStateInput) (*kms.Key, error) {
	return c.keyState(ctx, http.MethodPatch, false, ref, keyID, "", in)
}

// DestroyKey schedules the destruction of a key of a /ks ring (POST
// /ks/keyrings/{ring}/keys/{keyId}/destroy).
func (c *Client) DestroyKey(ctx context.Context, ref kms.RingRef, keyID string, in kms.DestroyKeyInput) (*kms.Key, error) {
	return c.keyState(ctx, http.MethodPost, false, ref, keyID, "/destroy", in)
}

// CancelDestroyKey cancels the scheduled destruction of a key of a /ks
// ring, which becomes disabled (DELETE
// /ks/keyrings/{ring}/keys/{keyId}/destroy).
func (c *Client) CancelDestroyKey(ctx context.Context, ref kms.RingRef, keyID string) (*kms.Key, error) {
	return c.keyState(ctx, http.MethodDelete, false, ref, keyID, "/destroy", nil)
}

// SetAsymKeyState is SetKeyState for a key of an /asym ring.
func (c *Client) SetAsymKeyState(ctx context.Context, ref kms.RingRef, keyID string, in kms.KeyStateInput) (*kms.Key, error) {
	return c.keyState(ctx, http.MethodPatch, true, ref, keyID, "", in)
}

// DestroyAsymKey is DestroyKey for a key of an /asym ring.
func (c *Client) DestroyAsymKey(ctx context.Context, ref kms.RingRef, keyID string, in kms.DestroyKeyInput) (*kms.Key, error) {
	return c.keyState(ctx, http.MethodPost, true, ref, keyID, "/destroy", in)
}

// CancelDestroyAsymKey is CancelDestroyKey for a key of an /asym ring.
func (c *Client) CancelDestroyAsymKey(ctx context.Context, ref kms.RingRef, keyID string) (*kms.Key, error) {
	return c.keyState(ctx, http.MethodDelete, true, ref, keyID, "/destroy", nil)
}

// KeyUsage returns how often a key of a /ks ring was used (GET
// /ks/keyrings/{ring}/keys/{keyId}/usage).
func (c *Client) KeyUsage(ctx context.Context, ref kms.RingRef, keyID string) (*kms.KeyUsage, error) {
	path, byID := keyPath(false, ref, keyID, "/usage")
	return call[kms.KeyUsage](c, ctx, req{method: http.MethodGet, path: path, query: query("id", byID)})
}

// AsymKeyUsage returns how often a key of an /asym ring was used by
// transit calls (GET /asym/keyrings/{ring}/keys/{keyId}/usage).
func (c *Client) AsymKeyUsage(ctx context.Context, ref kms.RingRef, keyID string) (*kms.KeyUsage, error) {
	path, byID := keyPath(true, ref, keyID, "/usage")
	return call[kms.KeyUsage](c, ctx, req{method: http.MethodGet, path: path, query: query("id", byID)})
}

// ListKeyHashes pages through the hashes issued under a key of a /ks ring
// (GET /ks/keyrings/{ring}/keys/{keyId}/hashes).
func (c *Client) ListKeyHashes(ctx context.Context, ref kms.RingRef, keyID string, page kms.PageRequest) (*kms.List[*kms.KeyHash], error) {
	path, byID := keyPath(false, ref, keyID, "/hashes")
	return call[kms.List[*kms.KeyHash]](c, ctx, req{method: http.MethodGet, path: path, query: pageQuery(page, "id", byID)})
}
