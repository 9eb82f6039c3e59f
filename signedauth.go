package kms

import (
	"context"
	"strings"
)

// Signed requests. A protocol whose clients sign each request with the
// secret of their credential, rather than send it (AWS's Signature
// Version 4), needs the secret to check the signature. The service keeps
// each API key's secret sealed under its seal key, bound to the key's ID
// (apiKeySecretAAD), beside the digest that a bearer credential is found
// by; a rekey reseals it with the other secrets (sealedRecords). Keys
// made before the secret was kept have none, and sign nothing: make a
// new key for such a client.

// errUnknownSigner is the answer to a signed request whose access key is
// not an active API key.
var errUnknownSigner = Errorf(KindUnauthenticated, "the access key of the request is not an active API key")

// AuthenticateSigned returns the principal of the API key keyID when
// verify, given the key's secret, accepts the request that the key's ID
// names (verify checks its signature, and must neither keep nor change
// the secret: it is the one copy the service keeps in memory, as it
// keeps held keys, for the key's next requests). A key that
// does not exist or is inactive, one whose secret the service does not
// keep, and a signature verify refuses are errors
// of kind Unauthenticated; verify's error is wrapped, for the protocol
// to tell why. The principal is the one the key's secret authenticates
// as a bearer credential.
func (s *Service) AuthenticateSigned(ctx context.Context, keyID string, verify func(secret []byte) error) (*Principal, error) {
	if keyID == "" || len(keyID) > 128 || strings.ContainsAny(keyID, "/\x00") {
		return nil, errUnknownSigner
	}
	sg, err := s.signers.Load(keyID, func() (*signer, error) { return s.readSigner(ctx, keyID) })
	if err != nil {
		return nil, err
	}
	if verr := verify(sg.secret); verr != nil {
		return nil, &Error{Kind: KindUnauthenticated, Message: "the request's signature does not verify", Err: verr}
	}
	// The principal as a bearer credential finds it: a key made inactive
	// or deleted since its secret was cached is refused here.
	return s.principals.Load(sg.digest, func() (*Principal, error) { return s.readAPIKey(ctx, sg.digest) })
}

// AuthenticateSession returns the principal of a User's access token
// that a signed request carries as its session token (AWS's
// X-Amz-Security-Token), signed with the token itself as the secret:
// verify, given the token, must accept the request, and keyID, the
// request's access key, must be the token's User's ID. The token is the
// credential, as it is when sent as a bearer secret; the signature binds
// it to the request. Anything else (an API key's secret as the token, a
// token expired or revoked, another User's ID) is an error of kind
// Unauthenticated; verify's error is wrapped.
func (s *Service) AuthenticateSession(ctx context.Context, keyID, token string, verify func(secret []byte) error) (*Principal, error) {
	if !strings.HasPrefix(token, accessTokenPrefix) {
		return nil, Errorf(KindUnauthenticated, "the session token of a signed request must be a User's access token")
	}
	if verr := verify([]byte(token)); verr != nil {
		return nil, &Error{Kind: KindUnauthenticated, Message: "the request's signature does not verify", Err: verr}
	}
	p, err := s.Authenticate(ctx, token)
	if err != nil {
		return nil, err
	}
	if p.Kind != PrincipalUser || p.ID != keyID {
		return nil, Errorf(KindUnauthenticated, "the access key of a request signed with a session token must be the ID of the token's User")
	}
	return p, nil
}

// readSigner reads the signer of the API key keyID from the store.
func (s *Service) readSigner(ctx context.Context, keyID string) (*signer, error) {
	k, err := viewOne(ctx, s.store, func(tx Txn) (*apiKeyRecord, error) { return getAPIKey(tx, keyID) })
	switch {
	case isNotFound(err):
		return nil, errUnknownSigner
	case err != nil:
		return nil, internalError("authenticate", err)
	case !k.Active:
		return nil, errUnknownSigner
	case len(k.SealedSecret) == 0:
		return nil, Errorf(KindUnauthenticated, "API key %s was made before the service kept the secrets that verify signed requests: make a new API key for this client", keyID)
	}
	secret, err := s.barrier.Open(k.SealedSecret, apiKeySecretAAD(k.KeyID))
	if err != nil {
		return nil, internalError("open the secret of an API key", err)
	}
	return &signer{digest: k.Digest, secret: secret}, nil
}
