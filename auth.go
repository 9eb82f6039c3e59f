package kms

import (
	"context"
	"errors"
	"strings"
)

// visibleTo reports whether p may see and act on a resource of account.
func visibleTo(p *Principal, account string) bool {
	return p.AccountID == account || p.Can(FlagAllAccounts)
}

// maxFlagLen bounds one flag name; maxFlags the flags of one credential.
const (
	maxFlagLen = 200
	maxFlags   = 1000
)

// normalize validates the flags and returns them with lower-case names.
//
// Nil stays nil, so that an update that names no flags keeps them.
func (f Flags) normalize() (Flags, error) {
	if f == nil {
		return nil, nil
	}
	if len(f) > maxFlags {
		return nil, Errorf(KindInvalid, "flags: at most %d", maxFlags)
	}
	out := make(Flags, len(f))
	for name, v := range f {
		n := strings.ToLower(name)
		if n == "" || len(n) > maxFlagLen {
			return nil, Errorf(KindInvalid, "flags: a flag name must have 1 to %d characters", maxFlagLen)
		}
		for _, seg := range strings.Split(n, ".") {
			if seg == "" {
				return nil, Errorf(KindInvalid, "flags: %q has an empty segment", name)
			}
			for _, c := range seg {
				if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '*') {
					return nil, Errorf(KindInvalid, "flags: %q has a character other than a-z, 0-9, '_', '-', '*' and '.'", name)
				}
			}
		}
		out[n] = v
	}
	return out, nil
}

// uncovered returns the first flag, in name order, that flags grant and p
// does not hold; "" when p holds every flag that flags grant. A flag set
// to false grants nothing, so it needs no cover.
func (p *Principal) uncovered(flags Flags) string {
	lack := ""
	for name, granted := range flags {
		if granted && !p.Can(name) && (lack == "" || name < lack) {
			lack = name
		}
	}
	return lack
}

// checkFlagReach is the reach rule: p may change, activate, deactivate,
// move or delete something that holds flags (an API key, a User; an
// Account through its API keys and Users) only if it holds every flag
// granted there. Otherwise apikeys.write could revive a deactivated root
// key, or strip or delete a stronger one, and users.write could take over
// a stronger User (change its email, then reset its password). Activating
// a key grants its flags anew, and this rule is what covers it. what names
// the thing changed, holder the one that holds flags ("it", or "its API
// key ..." for an Account).
func checkFlagReach(p *Principal, what, holder string, flags Flags) error {
	if name := p.uncovered(flags); name != "" {
		return Errorf(KindPermissionDenied, "cannot act on %s: %s holds flag %q, which the caller does not", what, holder, name)
	}
	return nil
}

// rings returns the lower-case names of the rings that the flags grant an
// operation on in a keyring.<ring>.<op> flag, without the wildcard. A flag
// set to false names no ring.
func (f Flags) rings() []string {
	seen := map[string]bool{}
	var out []string
	for name, granted := range f {
		if !granted {
			continue
		}
		rest, ok := strings.CutPrefix(name, "keyring.")
		if !ok {
			continue
		}
		ring, _, ok := strings.Cut(rest, ".")
		if !ok || ring == "*" || seen[ring] {
			continue
		}
		seen[ring] = true
		out = append(out, ring)
	}
	return out
}

// Authenticate returns the principal of a bearer secret: an active API key
// of an existing Account, or a User's access token ("rkt_...") that has not
// expired nor been revoked, of an active User of an existing Account. Any
// other secret is an Unauthenticated error that says nothing of why.
func (s *Service) Authenticate(ctx context.Context, secret string) (*Principal, error) {
	if secret == "" || len(secret) > 512 {
		return nil, errBadCredential
	}
	digest := secretDigest(secret)
	if strings.HasPrefix(secret, accessTokenPrefix) {
		// An access token, unless no session has that digest: then it may
		// still be an API key whose secret an operator chose (bootstrap).
		// The cache of API keys is not consulted for it, since an access
		// token's principal may linger there after its session is gone.
		if p, err := s.authenticateToken(ctx, digest); err != errNoSession {
			return p, err
		}
		return s.readAPIKey(ctx, digest)
	}
	return s.principals.Load(digest, func() (*Principal, error) { return s.readAPIKey(ctx, digest) })
}

// readAPIKey reads the principal of the API key whose secret has digest.
func (s *Service) readAPIKey(ctx context.Context, digest string) (*Principal, error) {
	var p *Principal
	err := s.store.View(ctx, func(tx Txn) error {
		id, err := tx.Get(join(pfxAPIDigest, []byte(digest)))
		if err != nil {
			return err
		}
		k, err := getAPIKey(tx, string(id))
		if err != nil {
			return err
		}
		if !k.Active {
			return errBadCredential
		}
		if _, err := getAccount(tx, k.AccountID, false); err != nil {
			return err
		}
		p = &Principal{Kind: PrincipalAPIKey, ID: k.KeyID, AccountID: k.AccountID, flags: k.Flags}
		return nil
	})
	if isNotFound(err) || ErrorKind(err) == KindUnauthenticated {
		return nil, errBadCredential
	}
	if err != nil {
		return nil, internalError("authenticate", err)
	}
	return p, nil
}

var errBadCredential = Errorf(KindUnauthenticated, "invalid credential")

// authorize returns the caller when it holds flag. When it does not, it
// records the denial of action (on ring, if any) and returns a
// PermissionDenied error naming the flag.
func (s *Service) authorize(ctx context.Context, action, ring, flag string) (*Principal, error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	if p.Can(flag) {
		return p, nil
	}
	if LooksLikeSecret(ring) { // neither the record nor the error may hold it (unresolvedRing)
		flag = strings.Replace(flag, ring, "<a name shaped like a credential>", 1)
		ring = ""
	}
	return nil, s.refuse(p, action, ring, map[string]any{"flag": flag}, Errorf(KindPermissionDenied, "missing permission flag %s", flag))
}

// BootstrapResult says what Bootstrap did.
type BootstrapResult struct {
	Created   bool   // false when the store already had an API key
	AccountID string // the root Account, when created
	KeyID     string // the root API key, when created
	Secret    string // the generated secret, when none was given; shown once
}

// BootstrapAccountUID is the uid of the Account that Bootstrap creates.
const BootstrapAccountUID = "root"

// errBootstrapped is Bootstrap's mutation finding API keys: another
// process bootstrapped the store first.
var errBootstrapped = &Error{Kind: KindConflict, Message: "the store has API keys already: another node bootstrapped it"}

// Bootstrap makes a store usable: when it holds no API key at all, it
// creates the root Account and an API key with the flag "*". The key's
// secret is secret when given (at least 32 characters), or a new one that
// the result carries, to be shown once. On a store that has API keys,
// Bootstrap does nothing.
func (s *Service) Bootstrap(ctx context.Context, secret string) (BootstrapResult, error) {
	if secret != "" && len(secret) < minSecretLen {
		return BootstrapResult{}, Errorf(KindInvalid, "bootstrap API key must have at least %d characters", minSecretLen)
	}
	var empty bool
	var root *Account // the root Account, when Application made it first
	err := s.store.View(ctx, func(tx Txn) error {
		empty = true
		err := tx.Scan(ScanOptions{Prefix: pfxAPIKey, KeysOnly: true}, func(_, _ []byte) (bool, error) {
			empty = false
			return false, nil
		})
		if err != nil || !empty {
			return err
		}
		if root, err = getAccount(tx, BootstrapAccountUID, true); isNotFound(err) {
			root, err = nil, nil
		}
		return err
	})
	if err != nil || !empty {
		return BootstrapResult{}, err
	}
	generated := secret == ""
	if generated {
		secret = newSecret(apiKeyPrefix)
	}
	now := s.now()
	sys := &Principal{Kind: PrincipalAPIKey, ID: "bootstrap", flags: Flags{FlagRoot: true}}
	acct := root
	if acct == nil {
		acct = &Account{ID: newID(now), UID: BootstrapAccountUID, Notes: "created by bootstrap", Props: map[string]any{}, CreatedAt: now, UpdatedAt: now}
	}
	k := &apiKeyRecord{
		APIKey: APIKey{KeyID: newID(now), Active: true, AccountID: acct.ID, References: APIKeyRefs{AccountID: acct.ID},
			Flags: Flags{FlagRoot: true}, Props: map[string]any{}, CreatedAt: now, UpdatedAt: now},
		Digest: secretDigest(secret),
	}
	act := s.newActivity(sys, "bootstrap", "", true, map[string]any{"accountId": acct.ID, "apikeyId": k.KeyID})
	// The Account and its key commit together, so a crash leaves either
	// both or neither, and a restart bootstraps again.
	err = s.submit(act, func(tx Txn) error {
		// Checked again in the commit: nodes that start together on a
		// new shared store all try, and one bootstraps.
		if err := tx.Scan(ScanOptions{Prefix: pfxAPIKey, KeysOnly: true}, func(_, _ []byte) (bool, error) {
			return false, errBootstrapped
		}); err != nil {
			return err
		}
		if root != nil {
			// Still there? Else the answer would name a deleted Account.
			if _, err := getAccount(tx, root.ID, false); err != nil {
				return err
			}
		} else if err := createRootAccount(tx, acct); err != nil {
			return err
		}
		if err := adjustCount(tx, countAPIKeys+acct.ID, 1, 0, "API keys"); err != nil {
			return err
		}
		var err error
		if k.SealedSecret, err = s.sealAPIKeySecret(tx, k.KeyID, secret); err != nil {
			return err
		}
		return putAPIKey(tx, k)
	}, nil)
	if errors.Is(err, errBootstrapped) {
		return BootstrapResult{}, nil
	}
	if err != nil {
		return BootstrapResult{}, err
	}
	res := BootstrapResult{Created: true, AccountID: acct.ID, KeyID: k.KeyID}
	if generated {
		res.Secret = secret
	}
	return res, nil
}

// createRootAccount writes the root Account a and counts it.
func createRootAccount(tx Txn, a *Account) error {
	if err := putAccount(tx, a, ""); err != nil {
		return err
	}
	return adjustCount(tx, countAccounts, 1, 0, "accounts")
}

// Application returns the principal of the application that embeds the
// library, for calls it makes as itself: it holds the master key, and so
// every right already, and needs no bootstrap secret to prove it. The
// principal holds the flag "*" in the root Account (uid "root", the one
// Bootstrap makes; Application makes it on a store that has none, and a
// later Bootstrap puts the root API key in it). Its activity records name
// it "app:" followed by name, so that the trail tells the application's
// calls from those of API keys and Users.
//
//	p, err := svc.Application(ctx, "billing")
//	ctx = kms.WithPrincipal(ctx, p)
//
// name is 1 to 64 characters of a-z, 0-9, '-', '_' and '.'. Give this
// principal only to the application's own code: a request handler should
// authenticate its caller instead (Authenticate).
func (s *Service) Application(ctx context.Context, name string) (*Principal, error) {
	if name == "" || len(name) > 64 || strings.Trim(name, "abcdefghijklmnopqrstuvwxyz0123456789-_.") != "" {
		return nil, Errorf(KindInvalid, "application name %q: want 1 to 64 characters of a-z, 0-9, '-', '_' and '.'", name)
	}
	p := &Principal{Kind: PrincipalApplication, ID: "app:" + name, flags: Flags{FlagRoot: true}}
	if err := s.inRootAccount(ctx, p, "created for application "+name); err != nil {
		return nil, err
	}
	return p, nil
}

// inRootAccount puts p in the root Account (uid "root"), which it makes,
// recorded under p with notes, on a store that has none.
func (s *Service) inRootAccount(ctx context.Context, p *Principal, notes string) error {
	root, err := viewOne(ctx, s.store, func(tx Txn) (*Account, error) { return getAccount(tx, BootstrapAccountUID, true) })
	if err == nil {
		p.AccountID = root.ID
		return nil
	}
	if !isNotFound(err) {
		return internalError("read the root account", err)
	}
	now := s.now()
	root = &Account{ID: newID(now), UID: BootstrapAccountUID, Notes: notes, Props: map[string]any{}, CreatedAt: now, UpdatedAt: now}
	act := s.newActivity(p, "bootstrap", "", true, map[string]any{"accountId": root.ID})
	if err := s.submit(act, func(tx Txn) error { return createRootAccount(tx, root) }, nil); err != nil {
		if ErrorKind(err) == KindConflict {
			// Made by another caller meanwhile: act in that one.
			return s.inRootAccount(ctx, p, notes)
		}
		return err
	}
	p.AccountID = root.ID
	return nil
}

// apiKeySecretAAD is what the sealed secret of API key id is bound to.
func apiKeySecretAAD(id string) []byte { return []byte("apikey/secret/" + id) }

// sealAPIKeySecret seals the secret of the API key id in tx.
func (s *Service) sealAPIKeySecret(tx Txn, id, secret string) ([]byte, error) {
	return s.barrier.SealIn(tx, []byte(secret), apiKeySecretAAD(id))
}
