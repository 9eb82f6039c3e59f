// Package httpapi serves a *kms.Service over HTTP: the interface of
// SPEC.md sections 4.2 and 4.6, and a health check.
//
// It is a thin adapter. A handler decodes the request, calls one Service
// method and encodes its answer; authorization, validation and the audit
// trail live in package kms, so an HTTP caller and an in-process caller get
// the same checks and leave the same trail. httpapi only turns a bearer
// credential into a kms.Principal and a kms error into a status code.
//
// # Routes
//
//	GET    /healthz                                public; 200 {"status":"ok"}, 503 when the store does not answer
//	GET    /ks/hash/:hash                          LookupHash
//	GET    /ks/header/:header                      LookupHeader
//	POST   /ks/decrypt                             Decrypt (a failed verification is a 422 in the 200 shape)
//	POST   /ks/encrypt                             Encrypt
//	POST   /ks/rotate                              Rotate, answered {"key": ...}
//	POST   /ks/keyrings                            CreateKeyRing
//	GET    /ks/keyrings                            ListKeyRings (?cursor, ?limit)
//	GET    /ks/keyrings/:ringname                  GetKeyRing, answered {"ring": ...} (?id=true: by ID)
//	GET    /ks/config                              GetConfig (?ringname), answered {"config": ...}
//	PUT    /ks/config                              SetConfig, body {"ringname": ..., "config": {...}}
//	DELETE /ks/keyrings/:ringname                  DeleteKeyRing
//	GET    /ks/keyrings/:ringname/keys             ListKeys (?cursor, ?limit, ?id=true)
//	GET    /ks/keyrings/:ringname/keys/:keyId      GetKey (?id=true)
//	POST   /asym/keyrings                          CreateAsymKeyRing
//	GET    /asym/keyrings/:ringname/keys/:keyId    GetAsymKey (?id=true)
//	POST   /asym/rotate                            RotateAsym, answered {"key": ...}
//
// Every route but /healthz needs "Authorization: Bearer <API key>".
// Lists take the query parameters cursor and limit (default 100, 1 to
// 10000, larger values capped; anything else is a 400).
//
// # Requests and answers
//
// Request bodies are JSON with Content-Type application/json, at most
// Options.MaxBodyBytes (1 MiB by default); members a route does not know
// are ignored. Every answer is JSON. An error is
//
//	{"message": "what went wrong", "code": "not_found"}
//
// with the status of its kind: invalid 400, unauthenticated 401,
// permission_denied 403, not_found 404, conflict 400 (an existing name, a
// ring still in use), limit 403, unprocessable 422, too_large 413, internal
// 500. A 500 says only "internal error"; its detail goes to the log with
// the request ID, which every answer carries in X-Request-Id. An unknown
// path is a 404 and a known path with another method a 405 (code
// method_not_allowed, with an Allow header), in the same shape; /healthz
// answers 503 (code unavailable) when the store does not answer. POST
// /ks/decrypt is the one exception to the shape: a hash or header that
// fails verification is a 422 whose body is the decrypt answer, with
// asset.valid false and asset.message saying which check failed.
//
// # Logging
//
// With Options.Logger set, every request gets one line: req_id (also
// answered in X-Request-Id), method, route, path, status, size, duration,
// principal (the API key ID) and, for errors, code; a 5xx line is at level
// error and carries the full error. Headers, query strings and bodies are
// never logged. The request's logger is in its context
// (zerolog.Ctx(r.Context())).
//
// # Mounting
//
// New returns an http.Handler that expects the paths above. To serve it
// under a prefix of an existing mux, strip the prefix:
//
//	mux := http.NewServeMux()
//	mux.Handle("/kms/", http.StripPrefix("/kms", httpapi.New(svc, httpapi.Options{Logger: &logger})))
//
// The server that runs the handler should set its own timeouts
// (ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout).
package httpapi
