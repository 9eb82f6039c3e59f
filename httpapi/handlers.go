package httpapi

import (
	"context"
	"net/http"
	"strings"

	"github.com/julienschmidt/httprouter"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/httpedge"
)

// Each handler decodes its request, calls one Service method and returns
// the answer's body. Authorization, validation and audit are the
// Service's.

// result returns v as a body, or err. It keeps a typed nil pointer from
// becoming a non-nil body.
func result[T any](v *T, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	return v, nil
}

// decoded answers a handler that decodes its body into the one argument,
// after the context, of a Service method.
func decoded[T, R any](a *api, r *http.Request, do func(context.Context, T) (*R, error)) (any, error) {
	var in T
	if err := a.decode(r, &in); err != nil {
		return nil, err
	}
	return result(do(r.Context(), in))
}

// decodedFor is decoded for a Service method that takes what the path
// names, ref, before the decoded argument.
func decodedFor[Ref, T, R any](a *api, r *http.Request, ref Ref, do func(context.Context, Ref, T) (*R, error)) (any, error) {
	var in T
	if err := a.decode(r, &in); err != nil {
		return nil, err
	}
	return result(do(r.Context(), ref, in))
}

// paged answers a handler that lists one page, named by the query's
// cursor and limit, of a Service method.
func paged[R any](r *http.Request, list func(context.Context, kms.PageRequest) (*R, error)) (any, error) {
	page, err := pageRequest(r)
	if err != nil {
		return nil, err
	}
	return result(list(r.Context(), page))
}

// pagedFor is paged for a Service method that lists what the path
// names, ref.
func pagedFor[Ref, R any](r *http.Request, ref Ref, list func(context.Context, Ref, kms.PageRequest) (*R, error)) (any, error) {
	page, err := pageRequest(r)
	if err != nil {
		return nil, err
	}
	return result(list(r.Context(), ref, page))
}

// searched answers a search handler: one page, named by the query, of
// what matches the filter of the body (an empty body, no filter).
func searched[F, R any](a *api, r *http.Request, search func(context.Context, F, kms.PageRequest) (*R, error)) (any, error) {
	page, err := pageRequest(r)
	if err != nil {
		return nil, err
	}
	var f F
	if err := a.decodeOptional(r, &f); err != nil {
		return nil, err
	}
	return result(search(r.Context(), f, page))
}

// ringRef names the ring of the :ringname parameter: by ID with ?id=true.
func ringRef(r *http.Request, ps httprouter.Params) kms.RingRef {
	return queryRingRef(r, ps.ByName("ringname"))
}

// queryRingRef is the ring named name, by ID with ?id=true.
func queryRingRef(r *http.Request, name string) kms.RingRef {
	return kms.RingRef{Name: name, ByID: strings.EqualFold(r.URL.Query().Get("id"), "true")}
}

// pageRequest reads the cursor and limit query parameters.
func pageRequest(r *http.Request) (kms.PageRequest, error) {
	q := r.URL.Query()
	limit, err := kms.ParseLimit(q.Get("limit"))
	if err != nil {
		return kms.PageRequest{}, err
	}
	return kms.PageRequest{Cursor: q.Get("cursor"), Limit: limit}, nil
}

// unhealthy is the 503 of GET /healthz for err: a full disk or a journal
// in doubt says so, in words written for the caller; anything else only
// that the service cannot serve.
func unhealthy(err error) error {
	msg := "service unavailable"
	switch kms.ErrorKind(err) {
	case kms.KindNoSpace, kms.KindUnavailable:
		msg = kms.ErrorMessage(err)
	}
	return &httpedge.StatusError{Status: http.StatusServiceUnavailable, Code: kms.KindUnavailable.String(), Message: msg, Err: err}
}

// GET /healthz
func (a *api) healthz(r *http.Request, _ httprouter.Params) (any, error) {
	if err := a.svc.Ping(r.Context()); err != nil {
		return nil, unhealthy(err)
	}
	return struct {
		Status string `json:"status"`
	}{"ok"}, nil
}

// GET /ks/hash/:hash
func (a *api) lookupHash(r *http.Request, ps httprouter.Params) (any, error) {
	return result(a.svc.LookupHash(r.Context(), ps.ByName("hash")))
}

// GET /ks/header/:header
func (a *api) lookupHeader(r *http.Request, ps httprouter.Params) (any, error) {
	return result(a.svc.LookupHeader(r.Context(), ps.ByName("header")))
}

// POST /ks/decrypt. A failed verification answers 422 with the shape of
// the 200 answer.
func (a *api) decrypt(r *http.Request, _ httprouter.Params) (any, error) {
	var in kms.DecryptInput
	if err := a.decode(r, &in); err != nil {
		return nil, err
	}
	res, err := a.svc.Decrypt(r.Context(), in)
	if err != nil && res != nil && kms.ErrorKind(err) == kms.KindUnprocessable {
		return res, err
	}
	return result(res, err)
}

// POST /ks/encrypt
func (a *api) encrypt(r *http.Request, _ httprouter.Params) (any, error) {
	return decoded(a, r, a.svc.Encrypt)
}

// POST /ks/encrypt/batch
func (a *api) encryptBatch(r *http.Request, _ httprouter.Params) (any, error) {
	return batched(a, r, a.svc.EncryptBatch)
}

// POST /ks/decrypt/batch
func (a *api) decryptBatch(r *http.Request, _ httprouter.Params) (any, error) {
	return batched(a, r, a.svc.DecryptBatch)
}

// batchInput is a pointer to the input of a batch, which counts its calls.
type batchInput[T any] interface {
	*T
	Calls() int
}

// batched is decoded for a batch route: its body is decoded by
// decodeBatch.
func batched[T any, PT batchInput[T], R any](a *api, r *http.Request, do func(context.Context, T) (*R, error)) (any, error) {
	var in T
	if err := a.decodeBatch(r, PT(&in)); err != nil {
		return nil, err
	}
	return result(do(r.Context(), in))
}

// decodeBatch decodes the body of a batch route into in and admits the
// caller for the calls it makes (kms.Service.AdmitN): each item takes a
// call of the rate limits, as a call of its own would, and a batch the
// limits refuse is answered before any item is made. A body that cannot
// be decoded counts as one call, as on any other route.
func (a *api) decodeBatch(r *http.Request, in interface{ Calls() int }) error {
	err := a.decode(r, in)
	n := 1
	if err == nil {
		n = in.Calls()
	}
	ctx := r.Context()
	if aerr := a.svc.AdmitN(ctx, kms.PrincipalFrom(ctx), n); aerr != nil {
		return aerr
	}
	return err
}

// keyBody is the answer to a rotation: {"key": ...}.
type keyBody[K any] struct {
	Key *K `json:"key"`
}

// POST /ks/rotate
func (a *api) rotate(r *http.Request, _ httprouter.Params) (any, error) {
	var in kms.RotateInput
	if err := a.decode(r, &in); err != nil {
		return nil, err
	}
	return keyAnswer(a.svc.Rotate(r.Context(), in))
}

// POST /ks/keyrings
func (a *api) createKeyRing(r *http.Request, _ httprouter.Params) (any, error) {
	return decoded(a, r, a.svc.CreateKeyRing)
}

// GET /ks/keyrings
func (a *api) listKeyRings(r *http.Request, _ httprouter.Params) (any, error) {
	return paged(r, a.svc.ListKeyRings)
}

// GET /ks/keyrings/:ringname
func (a *api) getKeyRing(r *http.Request, ps httprouter.Params) (any, error) {
	ring, err := a.svc.GetKeyRing(r.Context(), ringRef(r, ps))
	if err != nil {
		return nil, err
	}
	return struct {
		Ring *kms.KeyRing `json:"ring"`
	}{ring}, nil
}

// configBody is the answer to GET and PUT /ks/config: {"config": ...}.
type configBody struct {
	Config *kms.KeyRingConfig `json:"config"`
}

// GET /ks/config?ringname=...[&id=true], and /asym/config for an /asym
// ring.
func (a *api) getConfig(asym bool) handler {
	get := forGroup(asym, a.svc.GetConfig, a.svc.GetAsymConfig)
	return func(r *http.Request, _ httprouter.Params) (any, error) {
		return configAnswer(get(r.Context(), queryRingRef(r, r.URL.Query().Get("ringname"))))
	}
}

func configAnswer(cfg *kms.KeyRingConfig, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	return configBody{cfg}, nil
}

// forGroup returns ks, the function of a /ks route, or asym for the
// route's /asym twin.
func forGroup[F any](isAsym bool, ks, asym F) F {
	if isAsym {
		return asym
	}
	return ks
}

// setConfigRequest is the body of PUT /ks/config. The ring's name is
// ringname, or ringanme, a misspelling that clients of the interface send;
// ringanme counts when ringname is absent.
type setConfigRequest struct {
	RingName *string            `json:"ringname"`
	RingAnme string             `json:"ringanme"`
	Config   *kms.KeyRingConfig `json:"config"`
}

// PUT /ks/config, and /asym/config for an /asym ring.
func (a *api) setConfig(asym bool) handler {
	set := forGroup(asym, a.svc.SetConfig, a.svc.SetAsymConfig)
	return func(r *http.Request, _ httprouter.Params) (any, error) {
		var in setConfigRequest
		if err := a.decode(r, &in); err != nil {
			return nil, err
		}
		name := in.RingAnme
		if in.RingName != nil {
			name = *in.RingName
		}
		return configAnswer(set(r.Context(), queryRingRef(r, name), in.Config))
	}
}

// DELETE /ks/keyrings/:ringname
func (a *api) deleteKeyRing(r *http.Request, ps httprouter.Params) (any, error) {
	return result(a.svc.DeleteKeyRing(r.Context(), ringRef(r, ps)))
}

// GET /ks/keyrings/:ringname/keys
func (a *api) listKeys(r *http.Request, ps httprouter.Params) (any, error) {
	return pagedFor(r, ringRef(r, ps), a.svc.ListKeys)
}

// GET /ks/keyrings/:ringname/keys/:keyId
func (a *api) getKey(r *http.Request, ps httprouter.Params) (any, error) {
	return result(a.svc.GetKey(r.Context(), ringRef(r, ps), ps.ByName("keyId")))
}

// POST /asym/keyrings
func (a *api) createAsymKeyRing(r *http.Request, _ httprouter.Params) (any, error) {
	return decoded(a, r, a.svc.CreateAsymKeyRing)
}

// GET /asym/keyrings/:ringname/keys/:keyId
func (a *api) getAsymKey(r *http.Request, ps httprouter.Params) (any, error) {
	return result(a.svc.GetAsymKey(r.Context(), ringRef(r, ps), ps.ByName("keyId")))
}

// GET /asym/keyrings/:ringname/keys/:keyId/export
func (a *api) exportAsymKey(r *http.Request, ps httprouter.Params) (any, error) {
	return result(a.svc.ExportAsymKey(r.Context(), ringRef(r, ps), ps.ByName("keyId")))
}

// POST /asym/rotate
func (a *api) rotateAsym(r *http.Request, _ httprouter.Params) (any, error) {
	var in kms.RotateInput
	if err := a.decode(r, &in); err != nil {
		return nil, err
	}
	return keyAnswer(a.svc.RotateAsym(r.Context(), in))
}
