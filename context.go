package kms

import (
	"context"
	"net/netip"
	"strings"
	"sync"
)

// PrincipalKind says what kind of credential a Principal presented.
type PrincipalKind uint8

const (
	PrincipalAPIKey      PrincipalKind = iota + 1 // an API key of an Account
	PrincipalUser                                 // a User's access token
	PrincipalApplication                          // the application that embeds the library (Service.Application)
	PrincipalLocal                                // a caller on the service's host, for one held key (Service.LocalCaller)
)

// Principal is the authenticated caller of an operation. The Service sets
// it up from a credential (Authenticate); callers only carry it in the
// context with WithPrincipal.
type Principal struct {
	Kind      PrincipalKind
	ID        string // API key ID, or User ID
	AccountID string // the Account the credential acts for
	flags     Flags
	// call names the protocol's call that p makes (Via), which each
	// record of the call carries.
	call string
}

// Via returns p making the call named call of a protocol whose calls are
// named otherwise than the service's operations ("aws.Encrypt"): every
// record that the call writes carries it as its prop "call", so that the
// trail says which call of which protocol did what. p is not changed.
func (p *Principal) Via(call string) *Principal {
	c := *p
	c.call = call
	return &c
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
// client (an IP address, without port), for the rate limit per address
// and the throttles of failed logins and of password resets, which count
// an IPv6 client by its prefix (Options.IPv6Prefix). httpapi and transit
// set it from the connection, or from the header of a trusted proxy.
func WithClientAddr(ctx context.Context, addr string) context.Context {
	return context.WithValue(ctx, clientKey{}, addr)
}

// DefaultIPv6Prefix is the length of the IPv6 prefix that names one
// client when Options.IPv6Prefix is zero: a /64, what a host or a home
// network is given.
const DefaultIPv6Prefix = 64

// clientAddr returns what the client of ctx (WithClientAddr) is counted
// as by the rate limit per address and the login and reset throttles, ""
// when ctx names none: an IPv4 address as it is, an IPv4-mapped IPv6
// address as its IPv4 address, and an IPv6 address as the prefix of
// Options.IPv6Prefix bits that holds it, in CIDR notation
// ("2001:db8:1:2::/64"; the address alone at 128). Text that is not an IP
// address counts as it is.
func (s *Service) clientAddr(ctx context.Context) string {
	a, _ := ctx.Value(clientKey{}).(string)
	if strings.IndexByte(a, ':') < 0 {
		return a // IPv4 (no allocation on the common path), or none
	}
	ip, err := netip.ParseAddr(a)
	if err != nil {
		return a
	}
	ip = ip.WithZone("").Unmap()
	if ip.Is4() || s.opts.IPv6Prefix >= 128 {
		return ip.String()
	}
	p, err := ip.Prefix(s.opts.IPv6Prefix)
	if err != nil {
		return ip.String() // cannot be: New checks the length
	}
	var buf [len("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff/128")]byte
	return string(p.AppendTo(buf[:0]))
}

type answerKey struct{}

// WithAnswerNotice returns a context for a call whose answer the caller
// sends itself, and sent, which the caller calls once the answer is on its
// way (more than once is harmless). Work that a call leaves behind its
// answer (a password reset's look-up, token and mail: StartPasswordReset)
// waits for sent, instead of guessing when the answer has left from the
// end of the call: on a busy machine the answer of an HTTP handler that
// has returned may still wait for a processor, and the work behind it
// would then show in its time. httpapi calls sent once it has flushed the
// answer to the connection.
func WithAnswerNotice(ctx context.Context) (context.Context, func()) {
	ch := make(chan struct{})
	var once sync.Once
	return context.WithValue(ctx, answerKey{}, ch), func() { once.Do(func() { close(ch) }) }
}

// answerSent returns the channel that WithAnswerNotice put in ctx, closed
// once the answer is sent, or nil.
func answerSent(ctx context.Context) <-chan struct{} {
	ch, _ := ctx.Value(answerKey{}).(chan struct{})
	return ch
}

// anonymous is the actor of the records of public flows (login,
// invitation, reset) when no User is known.
var anonymous = &Principal{Kind: PrincipalUser, ID: "anonymous"}

// Flags are the permissions of a credential: flag name -> granted. Names
// are dot-separated and lower-case; docs/PERMISSIONS.md lists them. A
// segment "*" stands for any value of that segment (keyring.*.rotate), and
// the flag "*" alone grants everything.
type Flags map[string]bool

// Allows reports whether the flags grant flag: exactly, through "*" alone,
// or through a flag with "*" in place of one of flag's segments, but for
// the operation of keyring.<ring>.export, which only a flag naming it
// grants (keyring.<ring>.export, keyring.*.export) besides "*": a
// keyring.<ring>.* given for a ring's use must not hand out its keys.
func (f Flags) Allows(flag string) bool {
	if f[FlagRoot] || f[flag] {
		return true
	}
	segs := strings.Split(flag, ".")
	named := len(segs) == 3 && segs[0] == "keyring" && segs[2] == OpExport
	for i := range segs {
		if named && i == 2 {
			continue
		}
		saved := segs[i]
		segs[i] = "*"
		ok := f[strings.Join(segs, ".")]
		segs[i] = saved
		if ok {
			return true
		}
	}
	return false
}

// Flag names outside the key rings. Key ring flags are built by RingFlag.
const (
	FlagRoot          = "*"
	FlagAccountsRead  = "accounts.read"
	FlagAccountsWrite = "accounts.write"
	FlagAPIKeysRead   = "apikeys.read"
	FlagAPIKeysWrite  = "apikeys.write"

	// FlagAllAccounts lets a credential act on the resources of every
	// Account. Without it (or "*"), a credential sees and changes only the
	// Users, API keys, activity and Assets of its own Account.
	FlagAllAccounts = "accounts.all"
)
