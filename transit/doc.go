// Package transit serves the HTTP interface of HashiCorp Vault's transit
// secrets engine over the held keys of a *kms.Service: what SOPS,
// OpenTofu's state encryption, Kubernetes KMS plugins, Vault's
// auto-unseal, Tink, sigstore and the Vault CLI speak, answered by
// ringkms.
//
//	h := transit.New(svc, transit.Options{})
//	mux.Handle("/v1/transit/", h) // the paths are Vault's, /v1/<mount>/...
//
// or mux.Handle(transit.PathPrefix, h) to answer Vault's other paths too
// (sys/health, auth/...): 404 in Vault's error shape, saying that only the
// transit engine is served.
//
// # What it serves
//
// Under /v1/<mount>/ (Options.Mount, "transit" by default), with Vault's
// request and answer shapes (the data envelope, batch_input and
// batch_results, {"errors": [...]} with Vault's status codes):
//
//	POST   keys/:name           create (type, key_size, parameter_set, exportable)
//	GET    keys/:name           read
//	LIST   keys                 list (also GET keys?list=true)
//	DELETE keys/:name           delete, when its configuration allows it
//	POST   keys/:name/rotate    a new latest version
//	POST   keys/:name/config    min_decryption_version, min_encryption_version,
//	                            deletion_allowed, auto_rotate_period, exportable
//	POST   encrypt/:name        plaintext (base64), associated_data, key_version,
//	                            batch_input; makes the key on first use, for a
//	                            caller that may
//	POST   decrypt/:name        ciphertext, associated_data, batch_input
//	POST   rewrap/:name         ciphertext, associated_data, key_version, batch_input
//	POST   datakey/plaintext/:name, datakey/wrapped/:name   bits, key_version
//	POST   sign/:name[/:hash]   input, hash_algorithm, prehashed, marshaling_algorithm,
//	                            signature_algorithm, salt_length, batch_input
//	POST   verify/:name[/:hash] input with signature or hmac, batch_input
//	POST   hmac/:name[/:hash]   input, algorithm, batch_input
//	GET    export/:type/:name[/:version]   encryption-key, signing-key, hmac-key,
//	                            public-key
//
// and, below /v1/auth, Vault's token look-up and renewal and AppRole's
// login, for the caller's own credential (auth.go). PUT is taken for
// POST, as Vault takes it (its Go client writes with PUT). Derived and
// convergent keys, backup and the other paths of Vault's engine answer
// 400 (a parameter) or 404 (a path) saying what is served instead.
// docs/TRANSIT.md has the whole story.
//
// # What it does not decide
//
// The handler holds no rule: a transit key is a held key of the Service
// (an /asym ring whose keys it keeps), and the Service authorizes each
// call with the ring's flags
// (docs/PERMISSIONS.md maps each route to its flag), records it in the
// activity trail (actions transit.*, never a plaintext), applies the key
// states, the ring's maxEncryptCount and rotationPeriod, the usage counts
// and the rate limits (Service.Admit, each item of a batch a call). The
// handler turns the credential of X-Vault-Token (or Authorization: Bearer
// <secret>: an API key or a User's access token) into a Principal, the
// request into Service calls and their answers and errors into Vault's
// shapes.
package transit
