package httpapi

import (
	"net/http"
	"strconv"

	"github.com/julienschmidt/httprouter"

	"github.com/ringkms/kms"
)

// GET /assets/:id
func (a *api) getAsset(r *http.Request, ps httprouter.Params) (any, error) {
	return result(a.svc.GetAsset(r.Context(), ps.ByName("id")))
}

// DELETE /assets/:id
func (a *api) deleteAsset(r *http.Request, ps httprouter.Params) (any, error) {
	return result(a.svc.DeleteAsset(r.Context(), ps.ByName("id")))
}

// POST /assets/search?cursor=&limit= with the filters in the body (an
// empty body means no filter).
func (a *api) searchAssets(r *http.Request, _ httprouter.Params) (any, error) {
	return searched(a, r, a.svc.SearchAssets)
}

// GET /assets/:id/lineage?depth=
func (a *api) getLineage(r *http.Request, ps httprouter.Params) (any, error) {
	depth := 0
	if d := r.URL.Query().Get("depth"); d != "" {
		n, err := strconv.Atoi(d)
		if err != nil || n < 1 {
			return nil, kms.Errorf(kms.KindInvalid, "depth must be a whole number from 1 to %d", kms.MaxLineageDepth)
		}
		depth = n
	}
	return result(a.svc.GetLineage(r.Context(), ps.ByName("id"), depth))
}
