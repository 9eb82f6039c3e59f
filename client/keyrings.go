package client

import (
	"context"
	"net/http"

	"github.com/ringkms/kms"
)

// Key rings and keys, /ks and /asym (docs/API.md, "Key rings").

// ringBody, keyBody and configBody are the answers that wrap their value:
// {"ring": ...}, {"key": ...}, {"config": ...}.
type ringBody struct {
	Ring *kms.KeyRing `json:"ring"`
}

type keyBody[K any] struct {
	Key *K `json:"key"`
}

type configBody struct {
	Config *kms.KeyRingConfig `json:"config"`
}

func (b *ringBody) value() *kms.KeyRing         { return b.Ring }
func (b *keyBody[K]) value() *K                 { return b.Key }
func (b *configBody) value() *kms.KeyRingConfig { return b.Config }

// setConfigRequest is the body of PUT /ks/config.
type setConfigRequest struct {
	RingName string             `json:"ringname"`
	Config   *kms.KeyRingConfig `json:"config"`
}

// CreateKeyRing creates a /ks key ring and its first key (POST
// /ks/keyrings). Without in.PublicKey the answer carries the ring's
// private key, this once.
func (c *Client) CreateKeyRing(ctx context.Context, in kms.CreateKeyRingInput) (*kms.CreateKeyRingResult, error) {
	return call[kms.CreateKeyRingResult](c, ctx, req{method: http.MethodPost, path: "/ks/keyrings", body: in})
}

// GetKeyRing returns a /ks key ring, by name or by ID (GET
// /ks/keyrings/{ring}).
func (c *Client) GetKeyRing(ctx context.Context, ref kms.RingRef) (*kms.KeyRing, error) {
	return callWrapped[*kms.KeyRing, ringBody](c, ctx, req{method: http.MethodGet, path: endpoint("/ks/keyrings/%s", ref.Name), query: query("id", yes(ref.ByID))})
}

// ListKeyRings returns a page of the /ks key rings (GET /ks/keyrings).
func (c *Client) ListKeyRings(ctx context.Context, page kms.PageRequest) (*kms.List[*kms.KeyRing], error) {
	return call[kms.List[*kms.KeyRing]](c, ctx, req{method: http.MethodGet, path: "/ks/keyrings", query: pageQuery(page)})
}

// DeleteKeyRing deletes a /ks key ring and its keys, by name or by ID
// (DELETE /ks/keyrings/{ring}).
func (c *Client) DeleteKeyRing(ctx context.Context, ref kms.RingRef) (*kms.DeleteKeyRingResult, error) {
	return call[kms.DeleteKeyRingResult](c, ctx, req{method: http.MethodDelete, path: endpoint("/ks/keyrings/%s", ref.Name), query: query("id", yes(ref.ByID))})
}

// ListKeys returns a page of a ring's keys, without their key data (GET
// /ks/keyrings/{ring}/keys).
func (c *Client) ListKeys(ctx context.Context, ref kms.RingRef, page kms.PageRequest) (*kms.List[*kms.Key], error) {
	return call[kms.List[*kms.Key]](c, ctx, req{method: http.MethodGet, path: endpoint("/ks/keyrings/%s/keys", ref.Name), query: pageQuery(page, "id", yes(ref.ByID))})
}

// GetKey returns a key of a ring with its wrapped key data (GET
// /ks/keyrings/{ring}/keys/{keyId}).
func (c *Client) GetKey(ctx context.Context, ref kms.RingRef, keyID string) (*kms.Key, error) {
	return call[kms.Key](c, ctx, req{method: http.MethodGet, path: endpoint("/ks/keyrings/%s/keys/%s", ref.Name, keyID), query: query("id", yes(ref.ByID))})
}

// Rotate gives a /ks ring a new active key and returns it (POST /ks/rotate).
func (c *Client) Rotate(ctx context.Context, in kms.RotateInput) (*kms.Key, error) {
	return callWrapped[*kms.Key, keyBody[kms.Key]](c, ctx, req{method: http.MethodPost, path: "/ks/rotate", body: in})
}

// GetConfig returns the configuration of a ring (GET /ks/config).
func (c *Client) GetConfig(ctx context.Context, ref kms.RingRef) (*kms.KeyRingConfig, error) {
	return c.getConfig(ctx, "/ks", ref)
}

// SetConfig replaces the configuration of a ring and returns it (PUT
// /ks/config).
func (c *Client) SetConfig(ctx context.Context, ref kms.RingRef, cfg *kms.KeyRingConfig) (*kms.KeyRingConfig, error) {
	return c.setConfig(ctx, "/ks", ref, cfg)
}

// GetAsymConfig returns the configuration of an /asym ring (GET
// /asym/config).
func (c *Client) GetAsymConfig(ctx context.Context, ref kms.RingRef) (*kms.KeyRingConfig, error) {
	return c.getConfig(ctx, "/asym", ref)
}

// SetAsymConfig replaces the configuration of an /asym ring and returns
// it (PUT /asym/config).
func (c *Client) SetAsymConfig(ctx context.Context, ref kms.RingRef, cfg *kms.KeyRingConfig) (*kms.KeyRingConfig, error) {
	return c.setConfig(ctx, "/asym", ref, cfg)
}

// getConfig reads a ring's configuration from the service at prefix
// (/ks or /asym).
func (c *Client) getConfig(ctx context.Context, prefix string, ref kms.RingRef) (*kms.KeyRingConfig, error) {
	return callWrapped[*kms.KeyRingConfig, configBody](c, ctx, req{method: http.MethodGet, path: prefix + "/config", query: query("ringname", ref.Name, "id", yes(ref.ByID))})
}

// setConfig replaces a ring's configuration at the service at prefix
// (/ks or /asym).
func (c *Client) setConfig(ctx context.Context, prefix string, ref kms.RingRef, cfg *kms.KeyRingConfig) (*kms.KeyRingConfig, error) {
	return callWrapped[*kms.KeyRingConfig, configBody](c, ctx, req{method: http.MethodPut, path: prefix + "/config", query: query("id", yes(ref.ByID)), body: setConfigRequest{RingName: ref.Name, Config: cfg}})
}

// Encrypt returns the active key of a ring, wrapped for the ring's public
// key, with a new hash and a signed header; with in.Asset it creates or
// updates an Asset (POST /ks/encrypt). On a ring with split data keys the
// answer's KeyShare is the call's share: kms.DataKey makes the call's
// data key of it and the unwrapped key.
func (c *Client) Encrypt(ctx context.Context, in kms.EncryptInput) (*kms.EncryptResult, error) {
	return call[kms.EncryptResult](c, ctx, req{method: http.MethodPost, path: "/ks/encrypt", body: in})
}

// Decrypt returns the key of an earlier Encrypt, named by its hash and
// header, and on a ring with split data keys its KeyShare (POST
// /ks/decrypt). As with Service.Decrypt, a hash, header or
// Asset that fails verification returns both the result (Asset.Valid
// false, Asset.Message saying which check failed, no Key) and an
// Unprocessable error.
func (c *Client) Decrypt(ctx context.Context, in kms.DecryptInput) (*kms.DecryptResult, error) {
	out := new(kms.DecryptResult)
	err := c.do(ctx, req{method: http.MethodPost, path: "/ks/decrypt", body: in, out: out, outOn422: true})
	// A 422 in the decrypt shape always says which check failed; any
	// other error comes without a result.
	if err != nil && (kms.ErrorKind(err) != kms.KindUnprocessable || out.Asset.Message == "") {
		return nil, err
	}
	return out, err
}

// LookupHash returns the ring and key a hash names (GET /ks/hash/{hash}).
func (c *Client) LookupHash(ctx context.Context, hash string) (*kms.HashInfo, error) {
	return call[kms.HashInfo](c, ctx, req{method: http.MethodGet, path: endpoint("/ks/hash/%s", hash)})
}

// LookupHeader describes a header and whether it verifies (GET
// /ks/header/{header}).
func (c *Client) LookupHeader(ctx context.Context, header string) (*kms.HeaderInfo, error) {
	return call[kms.HeaderInfo](c, ctx, req{method: http.MethodGet, path: endpoint("/ks/header/%s", header)})
}

// CreateAsymKeyRing creates an /asym key ring, whose keys are returned in
// the clear (POST /asym/keyrings).
func (c *Client) CreateAsymKeyRing(ctx context.Context, in kms.CreateAsymKeyRingInput) (*kms.CreateAsymKeyRingResult, error) {
	return call[kms.CreateAsymKeyRingResult](c, ctx, req{method: http.MethodPost, path: "/asym/keyrings", body: in})
}

// GetAsymKey returns a key of an /asym ring (GET
// /asym/keyrings/{ring}/keys/{keyId}), without its key when the service
// holds it (a transit key's: Held).
func (c *Client) GetAsymKey(ctx context.Context, ref kms.RingRef, keyID string) (*kms.AsymKey, error) {
	return call[kms.AsymKey](c, ctx, req{method: http.MethodGet, path: endpoint("/asym/keyrings/%s/keys/%s", ref.Name, keyID), query: query("id", yes(ref.ByID))})
}

// ExportAsymKey returns a key that the service holds (a transit key's),
// in the clear, when the key is exportable and the credential holds
// keyring.<ring>.export (GET /asym/keyrings/{ring}/keys/{keyId}/export).
func (c *Client) ExportAsymKey(ctx context.Context, ref kms.RingRef, keyID string) (*kms.AsymKey, error) {
	return call[kms.AsymKey](c, ctx, req{method: http.MethodGet, path: endpoint("/asym/keyrings/%s/keys/%s/export", ref.Name, keyID), query: query("id", yes(ref.ByID))})
}

// RotateAsym gives an /asym ring a new active key and returns it (POST
// /asym/rotate).
func (c *Client) RotateAsym(ctx context.Context, in kms.RotateInput) (*kms.AsymKey, error) {
	return callWrapped[*kms.AsymKey, keyBody[kms.AsymKey]](c, ctx, req{method: http.MethodPost, path: "/asym/rotate", body: in})
}

// EncryptBatch makes many encrypt calls on one ring in one request (POST
// /ks/encrypt/batch): Count of them, or one per item; each item has its
// own answer (with its own KeyShare on a split ring) or error, in order.
func (c *Client) EncryptBatch(ctx context.Context, in kms.EncryptBatchInput) (*kms.EncryptBatchResult, error) {
	return call[kms.EncryptBatchResult](c, ctx, req{method: http.MethodPost, path: "/ks/encrypt/batch", body: in})
}

// DecryptBatch makes a decrypt call per item in one request (POST
// /ks/decrypt/batch); each item has its own answer (with the KeyShare of
// its call on a split ring) or error, in order.
func (c *Client) DecryptBatch(ctx context.Context, in kms.DecryptBatchInput) (*kms.DecryptBatchResult, error) {
	return call[kms.DecryptBatchResult](c, ctx, req{method: http.MethodPost, path: "/ks/decrypt/batch", body: in})
}
