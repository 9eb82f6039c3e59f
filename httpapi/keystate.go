package httpapi

import (
	"context"
	"net/http"

	"github.com/julienschmidt/httprouter"

	"github.com/ringkms/kms"
)

// Key lifecycle states, under /ks and /asym alike (asym selects the
// group): PATCH changes a key's state, POST .../destroy schedules its
// destruction, DELETE .../destroy cancels it. Each answers the key,
// without key data, in {"key": ...}. The rules are kms's (keystate.go).

// PATCH /{ks,asym}/keyrings/:ringname/keys/:keyId
func (a *api) setKeyState(asym bool) handler {
	return keyChange(a.decode, forGroup(asym, a.svc.SetKeyState, a.svc.SetAsymKeyState))
}

// POST /{ks,asym}/keyrings/:ringname/keys/:keyId/destroy; the body is
// optional.
func (a *api) destroyKey(asym bool) handler {
	return keyChange(a.decodeOptional, forGroup(asym, a.svc.DestroyKey, a.svc.DestroyAsymKey))
}

// keyChange is the handler of a change of a key that takes a body: it
// decodes the body with decode and calls change.
func keyChange[T any](decode func(*http.Request, any) error, change func(context.Context, kms.RingRef, string, T) (*kms.Key, error)) handler {
	return func(r *http.Request, ps httprouter.Params) (any, error) {
		var in T
		if err := decode(r, &in); err != nil {
			return nil, err
		}
		return keyAnswer(change(r.Context(), ringRef(r, ps), ps.ByName("keyId"), in))
	}
}

// DELETE /{ks,asym}/keyrings/:ringname/keys/:keyId/destroy
func (a *api) cancelDestroyKey(asym bool) handler {
	cancel := forGroup(asym, a.svc.CancelDestroyKey, a.svc.CancelDestroyAsymKey)
	return func(r *http.Request, ps httprouter.Params) (any, error) {
		return keyAnswer(cancel(r.Context(), ringRef(r, ps), ps.ByName("keyId")))
	}
}

// keyAnswer answers k in {"key": ...}, or err.
func keyAnswer[K any](k *K, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	return keyBody[K]{Key: k}, nil
}

// GET /ks/keyrings/:ringname/keys/:keyId/usage
func (a *api) keyUsage(r *http.Request, ps httprouter.Params) (any, error) {
	return result(a.svc.KeyUsage(r.Context(), ringRef(r, ps), ps.ByName("keyId")))
}

// GET /asym/keyrings/:ringname/keys/:keyId/usage: the transit calls that
// used the key.
func (a *api) asymKeyUsage(r *http.Request, ps httprouter.Params) (any, error) {
	return result(a.svc.AsymKeyUsage(r.Context(), ringRef(r, ps), ps.ByName("keyId")))
}

// GET /ks/keyrings/:ringname/keys/:keyId/hashes
func (a *api) listKeyHashes(r *http.Request, ps httprouter.Params) (any, error) {
	page, err := pageRequest(r)
	if err != nil {
		return nil, err
	}
	return result(a.svc.ListKeyHashes(r.Context(), ringRef(r, ps), ps.ByName("keyId"), page))
}
