// Package client calls ringkms over HTTP: kmsd, or the handler of package
// httpapi mounted in another server.
//
// A Client has the methods of kms.Service, with the same names, arguments
// and results (the types of package kms), so code moves between the
// in-process library and a remote service with little change:
//
//	c, err := client.FromEnv() // KMS_ADDR, KMS_API_KEY or KMS_API_KEY_FILE, KMS_CACERT
//	if err != nil {
//		return err
//	}
//	enc, err := c.Encrypt(ctx, kms.EncryptInput{RingName: "payments"})
//	if err != nil {
//		return err
//	}
//	// Keep enc.Hash and enc.Header with the data; unwrap enc.Key.KeyData
//	// with the ring's private key (docs/FORMAT.md), make the data key with
//	// enc.KeyShare (kms.DataKey) and encrypt with it.
//	dec, err := c.Decrypt(ctx, kms.DecryptInput{Hash: enc.Hash, Header: enc.Header})
//
// # Settings of the environment
//
// FromEnv reads the settings that every client of ringkms reads (kmsctl,
// kmsbench and the examples too), so one shell configures them all:
//
//	KMS_ADDR           the service's base URL (default http://127.0.0.1:8200)
//	KMS_API_KEY        the API key itself, or
//	KMS_API_KEY_FILE   a file that holds it
//	KMS_CACERT         a PEM file of the CA certificates to trust, for a
//	                   kmsd whose certificate a private CA signed
//
// Options given to FromEnv win over the environment. New reads no
// environment: it takes the base URL and options alone, such as
// client.New("https://kms.example.com", client.WithAPIKey(key)).
// kmsd's own listen address is KMS_LISTEN (or its flag -addr): it
// ignores the URL in KMS_ADDR, so clients and kmsd share a shell.
//
// # TLS
//
// Over https://, the client checks the service's certificate against the
// system's roots, or against the CA certificates of WithCACert (PEM) or
// WithRootCAs (a pool) alone. A certificate it refuses fails the call with
// an Internal error whose message says so ("the service's certificate is
// not trusted", or not valid for the host) and whose Err is the
// crypto/tls error (errors.As finds x509.UnknownAuthorityError in it): the
// answer cannot be taken as the service's, and trying again does not
// help.
//
// # Credentials
//
// Every call but Healthz, Login, the invitation and the password reset
// sends the client's bearer secret: an API key (WithAPIKey) or a User's
// access token (WithToken). WithBearer derives a client with another
// secret, as after Login:
//
//	res, err := c.Login(ctx, kms.LoginInput{Username: "ada", Password: pw})
//	user := c.WithBearer(res.AccessToken)
//
// Refresh and Logout act on the client's own access token.
//
// # Errors
//
// Every error is a *kms.Error of the kind the server reported, so callers
// branch as they would on the Service's errors:
//
//	if errors.Is(err, kms.ErrNotFound) { ... }
//	if e := kms.AsError(err); e != nil && e.State == kms.InviteExpired { ... }
//
// Message is the server's message; Fields, State and Details carry the
// members errors, state and results of the answer (Details is a
// kms.PasswordCheck when State is "malformed-password", else the raw JSON).
// A service that could not be reached (a refused connection, a lost one)
// or that answers it cannot serve now (503, or a proxy's 502 or 504) is
// an Unavailable error: try again later, or another node. A server fault
// (500), an answer that is not the service's, or a call that the caller's
// own context ended is an Internal error. The cause, if any, is in Err:
// an Unavailable error with one got no answer (the service could not be
// reached), one without is the service's (or a proxy's) answer. The
// status is in the message of an answer that carries no code of the
// service's (a proxy's 502, say); the kind says it otherwise.
// Decrypt, like Service.Decrypt, returns its result together with the
// Unprocessable error of a failed verification.
//
// # Base URL
//
// The base URL may carry a path prefix, for a handler mounted under one
// (http://127.0.0.1:8080/kms). Path parameters are escaped; answers are
// read up to MaxResponseBytes. A Client is safe for concurrent use; set
// timeouts on the http.Client given to WithHTTPClient, or on the context.
package client
