package kms

import "context"

// PrincipalKind says what kind of credential a Principal presented.
type PrincipalKind uint8

const (
	PrincipalAPIKey      PrincipalKind = iota + 1 // an API key of an Account
	PrincipalUser                                 // a User's access token
	PrincipalApplication                          // the application that embeds the library (Service.Application)
)

// Principal is the authenticated caller of an operation. The Service sets
// it up from a credential (Authenticate); callers only carry it in the
// context with WithPrincipal.
type Principal struct {
	Kind      PrincipalKind
	ID        string // API key ID, or User ID
	AccountID string // the Account the credential acts for
	flags     Flags
}

// Can reports whether the principal holds the flag, directly, through a
// wildcard, or through the root flag "*".
func (p *Principal) Can(flag string) bool { return p != nil && p.flags.Allows(flag) }

type principalKey struct{}

// WithPrincipal returns a context that carries p. Every Service method that
// needs a caller fails with an Unauthenticated error when there is none.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal carried by ctx, or nil.
func PrincipalFrom(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey{}).(*Principal)
	return p
}

// principal returns the caller or fails closed.
func principal(ctx context.Context) (*Principal, error) {
	if p := PrincipalFrom(ctx); p != nil {
		return p, nil
	}
	return nil, Errorf(KindUnauthenticated, "no credential")
}

type clientKey struct{}

// WithClientAddr returns a context that carries the network address of the
// client (an IP address, without port), for the throttling of failed
// logins. httpapi sets it from the connection.
func WithClientAddr(ctx context.Context, addr string) context.Context {
	return context.WithValue(ctx, clientKey{}, addr)
}

// clientAddr returns the client address carried by ctx, or "".
func clientAddr(ctx context.Context) string {
	a, _ := ctx.Value(clientKey{}).(string)
	return a
}
