// Package httpapi serves a *kms.Service over HTTP: the interface that
// docs/API.md describes (Assets, /ks, /auth and /asym), and a health check.
// docs/openapi.json is its OpenAPI document, route by route.
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
//	GET    /openapi.json                           public; the OpenAPI 3.1 document of every route
//	GET    /ks/hash/:hash                          LookupHash
//	GET    /ks/header/:header                      LookupHeader
//	POST   /ks/decrypt                             Decrypt (a failed verification is a 422 in the 200 shape)
//	POST   /ks/encrypt                             Encrypt
//	POST   /ks/rotate                              Rotate, answered {"key": ...}
//	POST   /ks/keyrings                            CreateKeyRing
//	GET    /ks/keyrings                            ListKeyRings (?cursor, ?limit)
//	GET    /ks/keyrings/:ringname                  GetKeyRing, answered {"ring": ...} (?id=true: by ID)
//	POST   /ks/encrypt/batch                       EncryptBatch
//	POST   /ks/decrypt/batch                       DecryptBatch
//	GET    /ks/config                              GetConfig (?ringname[&id=true]), answered {"config": ...}
//	PUT    /ks/config                              SetConfig, body {"ringname": ..., "config": {...}}
//	DELETE /ks/keyrings/:ringname                  DeleteKeyRing
//	GET    /ks/keyrings/:ringname/keys             ListKeys (?cursor, ?limit, ?id=true)
//	GET    /ks/keyrings/:ringname/keys/:keyId      GetKey (?id=true)
//	GET    /ks/keyrings/:ringname/keys/:keyId/usage   KeyUsage (?id=true)
//	GET    /ks/keyrings/:ringname/keys/:keyId/hashes  ListKeyHashes (?cursor, ?limit, ?id=true)
//	POST   /asym/keyrings                          CreateAsymKeyRing
//	GET    /asym/keyrings/:ringname/keys/:keyId    GetAsymKey (?id=true); a held key's (a transit key's) without its key
//	GET    /asym/keyrings/:ringname/keys/:keyId/export   ExportAsymKey (?id=true): an exportable held key, in the clear
//	POST   /asym/rotate                            RotateAsym, answered {"key": ...}
//	GET    /assets/:id                             GetAsset
//	DELETE /assets/:id                             DeleteAsset
//	POST   /assets/search                          SearchAssets (?cursor, ?limit; filters in the body, which may be absent)
//	GET    /assets/:id/lineage                     GetLineage (?depth)
//
//	POST   /auth/validate                          ValidateAPIKey
//	POST   /auth/user/invite                       Invite, answered {"loginUrl": ...}
//	GET    /auth/user/invite-validate              public; ValidateInvite (?token); 401 {"state": "invalid"|"expired"}; a browser gets an HTML page
//	POST   /auth/user/invite-complete              public; CompleteInvite {token, password}, answered {"user", "accesstoken"}
//	POST   /auth/basic/login                       public; Login (?email=true: username is the email address)
//	GET    /auth/basic/refresh                     Refresh of the access token presented, answered {"user", "accessToken"}
//	POST   /auth/basic/logout                      Logout of the access token presented, answered {"message": ...}
//	POST   /auth/basic/reset-password-start        public; StartPasswordReset {email}, answered {"message": ...}
//	POST   /auth/basic/reset-password-complete     public; CompletePasswordReset {token, password}: 200 {} or 400 {}
//	GET    /auth/basic/reset-password-complete     public; ValidatePasswordReset (?token): 200 {"state":"valid"} or 400 {}; a browser gets an HTML page
//	GET    /auth/users/:username                   GetUser (?email=true: by email; ?id=true: by ID)
//	PATCH  /auth/users/:username                   UpdateUser (?email=true, ?id=true)
//	DELETE /auth/users/:username                   DeleteUser (?email=true, ?id=true)
//	GET    /auth/users                             ListUsers (?cursor, ?limit)
//	POST   /auth/users                             CreateUser, answered {"user", "password"}
//	POST   /auth/accounts                          CreateAccount
//	GET    /auth/accounts                          ListAccounts (?cursor, ?limit)
//	GET    /auth/accounts/:id                      GetAccount (?uid=true: by UID)
//	PATCH  /auth/accounts/:id                      UpdateAccount (?uid=true)
//	DELETE /auth/accounts/:id                      DeleteAccount (?uid=true), answered with the Account
//	GET    /auth/accounts/:id/apikeys              ListAccountAPIKeys (?uid=true, ?cursor, ?limit)
//	GET    /auth/apikey                            ListAPIKeys (?cursor, ?limit)
//	POST   /auth/apikey                            CreateAPIKey {accountId, flags, props} (?uid=true: accountId is a UID)
//	PUT    /auth/apikey                            UpdateAPIKey of the key named by its secret {op, key, ...}
//	PUT    /auth/apikeyid                          UpdateAPIKey of the key named by its ID {op, apikeyid, ...}
//	GET    /auth/apikey/:apikeyid                  GetAPIKey
//	GET    /auth/apikey/:apikeyid/props            GetAPIKey
//	DELETE /auth/apikey/:apikey                    DeleteAPIKey by secret (?id=true: by ID), answered {"apikey", "id"}
//	GET    /auth/search/keyring/:keyringname/apikey  SearchAPIKeysByRing (?id=true, ?cursor, ?limit)
//	POST   /auth/search/activity                   SearchActivity (?cursor, ?limit; filters in the body, which may be absent)
//	GET    /auth/activity/:id                      GetActivity
//
// Every route but the public ones needs "Authorization: Bearer <secret>",
// an API key or a User's access token; docs/PERMISSIONS.md gives the flag
// of each route. The public ones carry their own credential (a password,
// an invitation or reset token) or protect nothing (/healthz).
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
// /ks/decrypt departs from the shape: a hash or header that
// fails verification is a 422 whose body is the decrypt answer, with
// asset.valid false and asset.message saying which check failed. The
// other documented exceptions add members to the error shape:
// "errors" (the fields at fault: a username or email already taken),
// "state" (an invitation "invalid" or "expired", a "malformed-password")
// and "results" (the password check). POST
// /auth/basic/reset-password-complete answers {} for every failure, with
// its status (400 for a bad token or password), so it tells nothing of the
// token. Failed logins and password reset requests are throttled: 429
// (code rate_limited).
//
// # Logging
//
// With Options.Logger set, every request gets one line: req_id (also
// answered in X-Request-Id), method, route, path, status, size, duration,
// principal (the API key or User ID) and, for errors, code; a 5xx line is
// at level error and carries the full error. Headers, query strings and
// bodies are never logged, and a route whose path carries a secret
// (DELETE /auth/apikey/:apikey) is logged by its route only. Every other
// path is logged, and echoed by a 404, with what may be a secret in it
// redacted, whether or not it matches a route: the segments after one
// that names API keys, and those shaped like a secret.
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
