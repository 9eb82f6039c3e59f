package client

import (
	"context"
	"net/http"
	"strconv"

	"github.com/ringkms/kms"
)

// Assets and their lineage (docs/API.md, "Assets").

// GetAsset returns an Asset (GET /assets/{id}).
func (c *Client) GetAsset(ctx context.Context, id string) (*kms.Asset, error) {
	return call[kms.Asset](c, ctx, req{method: http.MethodGet, path: endpoint("/assets/%s", id)})
}

// DeleteAsset deletes an Asset that no other Asset names as a parent
// (DELETE /assets/{id}).
func (c *Client) DeleteAsset(ctx context.Context, id string) (*kms.DeleteAssetResult, error) {
	return call[kms.DeleteAssetResult](c, ctx, req{method: http.MethodDelete, path: endpoint("/assets/%s", id)})
}

// SearchAssets returns a page of the Assets that match f (POST
// /assets/search). Send the same f with every page of one sequence.
func (c *Client) SearchAssets(ctx context.Context, f kms.AssetFilter, page kms.PageRequest) (*kms.List[*kms.Asset], error) {
	return call[kms.List[*kms.Asset]](c, ctx, req{method: http.MethodPost, path: "/assets/search", query: pageQuery(page), body: f})
}

// GetLineage returns the ancestors and descendants of an Asset up to depth
// generations away; 0 means the server's default, 3 (GET
// /assets/{id}/lineage).
func (c *Client) GetLineage(ctx context.Context, id string, depth int) (*kms.Lineage, error) {
	d := ""
	if depth != 0 {
		d = strconv.Itoa(depth)
	}
	return call[kms.Lineage](c, ctx, req{method: http.MethodGet, path: endpoint("/assets/%s/lineage", id), query: query("depth", d)})
}
