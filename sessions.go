package kms

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/ringkms/kms/internal/cache"
	"github.com/ringkms/kms/internal/passhash"
	"github.com/ringkms/kms/internal/throttle"
	"github.com/ringkms/kms/internal/workers"
)

// userState is the in-memory state of the Users' half of a Service: the
// cache of access-token sessions, the login and reset throttles (whose
// counts are in the store), and the work of reset requests under way.
type userState struct {
	sessions   *cache.Cache[string, *sessionEntry] // digest of an access token -> session
	throttles  *throttle.Set                       // of logins and reset requests
	background *workers.Pool                       // issueReset
}

// maxBackground bounds the reset requests whose work runs at once; past
// it, requests are answered but dropped.
const maxBackground = 64

// newUserState returns the Users' state of a Service over st, whose
// throttles key their counts with throttleKey. logErr logs what fails
// behind an answer.
func newUserState(size int, st Store, throttleKey [32]byte, logErr func(error, string)) *userState {
	go passhash.Dummy() // ready before the first failed login needs it
	return &userState{
		sessions:   cache.New[string, *sessionEntry](size),
		throttles:  throttle.New(st, pfxThrottle, throttleKey, logErr),
		background: workers.New(maxBackground),
	}
}

func (s *Service) userState() *userState { return s.users }

// Access tokens. A User who logs in (or completes an invitation) gets an
// access token: "rkt_" and 32 random bytes in unpadded base64url. The
// service keeps only its SHA-256 digest, under which it stores a session.
// The token acts for the User's Account with the User's flags (as they are
// at each request) until it expires (Options.TokenTTL after it was issued),
// is refreshed or logged out, the User is deleted or changes or resets its
// password. Refresh carries on the sign-in that issued the first token of
// a chain, but no further than Options.SessionLifetime after it: no token
// expires later, and a refresh then is refused. Expired sessions are
// deleted when next presented, and a User's expired sessions when it next
// logs in.

// session is the stored state of an access token.
type session struct {
	UserID    string    `json:"userId"`
	AccountID string    `json:"accountId"`
	ExpiresAt time.Time `json:"expiresAt"`
	CreatedAt time.Time `json:"createdAt"`
	// SignedInAt is when the login or invitation completion that began
	// the chain of refreshes of this token took place. Zero (a session
	// stored before it was kept) means CreatedAt.
	SignedInAt time.Time `json:"signedInAt,omitzero"`
}

// signedIn returns when the sign-in that began the chain of sess took
// place.
func (sess *session) signedIn() time.Time {
	if sess.SignedInAt.IsZero() {
		return sess.CreatedAt
	}
	return sess.SignedInAt
}

// sessionEntry is a cached session: the principal it authenticates and
// when it expires.
type sessionEntry struct {
	p         *Principal
	userID    string
	expiresAt time.Time
}

// LoginInput signs a User in.
type LoginInput struct {
	Username string // the username, or the email address with ByEmail
	Password string
	ByEmail  bool
}

// LoginResult is a signed-in User and its new access token.
type LoginResult struct {
	User        *User  `json:"user"`
	AccessToken string `json:"accessToken"`
}

// errNoSession says that a secret shaped like an access token has no
// session; Authenticate then tries it as an API key.
var errNoSession = Errorf(KindUnauthenticated, "no session")

// actor is the principal that records of a public flow name: the User
// when known, else anonymous.
func actor(u *userRecord) *Principal {
	if u == nil {
		return anonymous
	}
	return &Principal{Kind: PrincipalUser, ID: u.ID, AccountID: u.AccountID}
}

// recordPublic writes the record of a step of a public flow. When opErr is
// set the step was refused: the record says so (valid false, result the
// kind of opErr) and recordPublic returns opErr (or the journal's error).
func (s *Service) recordPublic(u *userRecord, action string, props map[string]any, opErr error) error {
	if opErr != nil {
		return s.refuse(actor(u), action, "", props, opErr)
	}
	return s.record(actor(u), action, "", props, nil)
}

// forgetSessions empties the cache of sessions, after a change to a User
// that its access tokens must see at once.
func (s *Service) forgetSessions() { s.userState().sessions.Reset() }

// authenticateToken returns the principal of the access token whose digest
// (secretDigest) is digest: a session that has not expired, of an active
// User of an existing Account. A session that does not exist is
// errNoSession; any other refusal is errBadCredential.
//
// A cached session counts only while the credential cache (s.principals)
// still holds the same principal under the token's digest: whatever drops
// credentials from that cache (an Account deleted...) drops sessions too.
func (s *Service) authenticateToken(ctx context.Context, digest string) (*Principal, error) {
	st := s.userState()
	now := s.now()
	if e, ok := st.sessions.Get(digest); ok {
		if p, ok := s.principals.Get(digest); ok && p == e.p {
			if now.Before(e.expiresAt) {
				return e.p, nil
			}
			s.expireSession(digest, e.userID)
			return nil, errBadCredential
		}
	}
	gen, pgen := st.sessions.Generation(), s.principals.Generation()
	var e *sessionEntry
	err := s.store.View(ctx, func(tx Txn) error {
		var sess session
		if _, err := getJSON(tx, join(pfxSession, []byte(digest)), &sess, errNoSession); err != nil {
			return err
		}
		e = &sessionEntry{userID: sess.UserID, expiresAt: sess.ExpiresAt}
		if !now.Before(sess.ExpiresAt) {
			return nil
		}
		u, err := getUser(tx, sess.UserID)
		if err != nil {
			return err
		}
		if u.Status != UserActive {
			return errBadCredential
		}
		if _, err := getAccount(tx, u.AccountID, false); err != nil {
			return err
		}
		e.p = &Principal{Kind: PrincipalUser, ID: u.ID, AccountID: u.AccountID, flags: u.Flags}
		return nil
	})
	switch {
	case err == errNoSession:
		return nil, err
	case isNotFound(err) || ErrorKind(err) == KindUnauthenticated:
		return nil, errBadCredential
	case err != nil:
		return nil, internalError("authenticate", err)
	}
	if e.p == nil { // expired
		s.expireSession(digest, e.userID)
		return nil, errBadCredential
	}
	st.sessions.Fill(digest, e, gen)
	s.principals.Fill(digest, e.p, pgen)
	return e.p, nil
}

// expireSession deletes an expired session. A failure only delays it.
func (s *Service) expireSession(digest, userID string) {
	err := s.submit(nil, func(tx Txn) error {
		return deleteSession(tx, digest, userID)
	}, func() { s.dropSession(digest) })
	if err != nil {
		s.log.Warn().Err(err).Msg("delete expired session")
	}
}

// dropSession removes a session from the caches.
func (s *Service) dropSession(digest string) {
	s.userState().sessions.Remove(digest)
	s.principals.Remove(digest)
}

// putSession stores a new session for the token whose digest is given.
func putSession(tx Txn, digest string, sess *session) error {
	v, err := json.Marshal(sess)
	if err != nil {
		return err
	}
	if err := tx.Set(join(pfxSession, []byte(digest)), v); err != nil {
		return err
	}
	return tx.Set(join(pfxSessionUser, []byte(sess.UserID), sep, []byte(digest)), nil)
}

func deleteSession(tx Txn, digest, userID string) error {
	if err := tx.Delete(join(pfxSession, []byte(digest))); err != nil {
		return err
	}
	return tx.Delete(join(pfxSessionUser, []byte(userID), sep, []byte(digest)))
}

// userSessions returns the digests of a User's sessions.
func userSessions(tx Txn, userID string) ([]string, error) {
	prefix := join(pfxSessionUser, []byte(userID), sep)
	var out []string
	err := tx.Scan(ScanOptions{Prefix: prefix, KeysOnly: true}, func(k, _ []byte) (bool, error) {
		out = append(out, string(k[len(prefix):]))
		return true, nil
	})
	return out, err
}

// deleteUserSessions revokes every session of a User.
func deleteUserSessions(tx Txn, userID string) error {
	digests, err := userSessions(tx, userID)
	if err != nil {
		return err
	}
	for _, d := range digests {
		if err := deleteSession(tx, d, userID); err != nil {
			return err
		}
	}
	return nil
}

// pruneSessions deletes a User's expired sessions.
func pruneSessions(tx Txn, userID string, now time.Time) error {
	digests, err := userSessions(tx, userID)
	if err != nil {
		return err
	}
	for _, d := range digests {
		v, err := tx.Get(join(pfxSession, []byte(d)))
		if err != nil && !isNotFound(err) {
			return err
		}
		var sess session
		if err == nil {
			if err := json.Unmarshal(v, &sess); err != nil {
				return err
			}
		}
		if !now.Before(sess.ExpiresAt) {
			if err := deleteSession(tx, d, userID); err != nil {
				return err
			}
		}
	}
	return nil
}

// startSession stores a new session of u inside a journal job, for the
// token whose digest is given, in the chain of a sign-in at signedIn (now,
// for a login). u must be active. The token expires Options.TokenTTL from
// now, or at the end of the sign-in's lifetime if that comes first.
func (s *Service) startSession(tx Txn, u *userRecord, digest string, now, signedIn time.Time) error {
	if err := pruneSessions(tx, u.ID, now); err != nil {
		return err
	}
	expires := now.Add(s.opts.TokenTTL)
	if end := signedIn.Add(s.opts.SessionLifetime); end.Before(expires) {
		expires = end
	}
	return putSession(tx, digest, &session{UserID: u.ID, AccountID: u.AccountID, ExpiresAt: expires, CreatedAt: now, SignedInAt: signedIn})
}

// Login signs a User in by username (or email) and password and returns
// the User with a new access token.
//
// Wrong credentials get one answer, an Invalid error "invalid username or
// password", whether the User exists, is only invited, or gave a wrong
// password; a missing User costs the same argon2id computation as a wrong
// password. Failures are throttled per User and per client address
// (WithClientAddr): after 5 failures for one User, or 20 from one address,
// within 15 minutes, attempts are refused for 15 minutes with a RateLimited
// error saying when to retry, without checking the password; each further
// lockout lasts twice as long, up to a day. A successful login clears the
// User's count. The counts are in the store, shared by every Service over
// it, and survive restarts (see internal/throttle).
func (s *Service) Login(ctx context.Context, in LoginInput) (*LoginResult, error) {
	const action = "user.login"
	if in.Username == "" {
		return nil, &Error{Kind: KindInvalid, Message: "username is required", Fields: map[string]string{"username": "username is required"}}
	}
	if in.Password == "" {
		return nil, &Error{Kind: KindInvalid, Message: "password is required", Fields: map[string]string{"password": "password is required"}}
	}
	by := "username"
	if in.ByEmail {
		by = "email"
	}
	u, err := viewOne(ctx, s.store, func(tx Txn) (*userRecord, error) {
		return findUser(tx, UserRef{Value: in.Username, ByEmail: in.ByEmail})
	})
	if isNotFound(err) || ErrorKind(err) == KindInvalid {
		u, err = nil, nil
	} else if err != nil {
		return nil, internalError("read user", err)
	}
	st := s.userState()
	userKey := "n/" + secretDigest(strings.ToLower(in.Username)) // bounded, whatever the name's length
	if u != nil {
		userKey = "u/" + u.ID
	}
	addr := s.clientAddr(ctx)
	now := s.now()
	try, until, err := st.throttles.BeginLogin(ctx, userKey, addr, now)
	if err != nil {
		return nil, err
	}
	if try == nil {
		err := Errorf(KindRateLimited, "too many failed logins: try again after %s", until.UTC().Format(time.RFC3339))
		return nil, s.recordPublic(u, action, map[string]any{"by": by, "reason": "throttled"}, err)
	}
	ok, reason, err := s.checkLogin(ctx, u, in.Password)
	if err != nil {
		try.Cancel(s.now())
		return nil, err
	}
	if !ok {
		try.End(ctx, s.now(), true)
		return nil, s.recordPublic(u, action, map[string]any{"by": by, "reason": reason}, errBadLogin)
	}
	token := newSecret(accessTokenPrefix)
	digest := secretDigest(token)
	created := s.now().UTC()
	var out *User
	act := s.newActivity(actor(u), action, "", true, map[string]any{"by": by})
	err = s.submit(act, func(tx Txn) error {
		cur, err := getUser(tx, u.ID)
		if isNotFound(err) || err == nil && cur.Status != UserActive {
			return errBadLogin // deleted or changed since the check
		} else if err != nil {
			return err
		}
		if _, err := getAccount(tx, cur.AccountID, false); isNotFound(err) {
			return errBadLogin // the Account is gone: its Users cannot act
		} else if err != nil {
			return err
		}
		if err := s.startSession(tx, cur, digest, created, created); err != nil {
			return err
		}
		out, err = cur.public(tx)
		return err
	}, nil)
	switch {
	case err == nil:
		try.End(ctx, s.now(), false)
	case err == errBadLogin:
		try.End(ctx, s.now(), true)
	default:
		try.Cancel(s.now())
	}
	if err != nil {
		return nil, err
	}
	return &LoginResult{User: out, AccessToken: token}, nil
}

// checkLogin verifies pw for u (nil when no such User). It always runs
// argon2id once (against a dummy hash when u cannot log in), except for a
// password too long to be anyone's. reason is for the activity record.
func (s *Service) checkLogin(ctx context.Context, u *userRecord, pw string) (ok bool, reason string, err error) {
	if len(pw) > PasswordMaxLength {
		return false, "password too long", nil
	}
	hash, reason := passhash.Dummy(), ""
	switch {
	case u == nil:
		reason = "unknown user"
	case u.Status != UserActive || len(u.Password) == 0:
		reason = "user not active"
	default:
		if hash, err = s.openPassword(u); err != nil {
			return false, "", err
		}
	}
	match, err := passhash.Verify(ctx, hash, pw)
	if err != nil {
		return false, "", err
	}
	if reason != "" {
		return false, reason, nil
	}
	if !match {
		return false, "wrong password", nil
	}
	return true, "", nil
}

// userSession checks that token is an access token of the User p and
// returns its digest and session, inside a journal job.
func userSession(tx Txn, p *Principal, token string, now time.Time) (string, *session, error) {
	if !strings.HasPrefix(token, accessTokenPrefix) || len(token) > 512 {
		return "", nil, errBadCredential
	}
	digest := secretDigest(token)
	var sess session
	if _, err := getJSON(tx, join(pfxSession, []byte(digest)), &sess, errBadCredential); err != nil {
		return "", nil, err
	}
	if sess.UserID != p.ID || !now.Before(sess.ExpiresAt) {
		return "", nil, errBadCredential
	}
	return digest, &sess, nil
}

// Refresh exchanges the caller's access token for a new one and returns it
// with the User. token is the access token the caller presented (the
// bearer secret); it must be one of the caller's own and is revoked. An API
// key gets an Invalid error. Past Options.SessionLifetime after the login
// that began the chain of refreshes, the token is refused
// (Unauthenticated): the User must log in again.
func (s *Service) Refresh(ctx context.Context, token string) (*LoginResult, error) {
	const action = "user.refresh"
	p, err := principal(ctx)
	if err != nil {
		return nil, err
	}
	if p.Kind != PrincipalUser {
		return nil, s.recordFailure(p, action, "", Errorf(KindInvalid, "refresh needs a user access token"))
	}
	fresh := newSecret(accessTokenPrefix)
	digest := secretDigest(fresh)
	now := s.now().UTC()
	var out *User
	var old string
	act := s.newActivity(p, action, "", true, nil)
	err = s.submit(act, func(tx Txn) error {
		d, sess, err := userSession(tx, p, token, now)
		if err != nil {
			return err
		}
		u, err := getUser(tx, sess.UserID)
		if isNotFound(err) || err == nil && u.Status != UserActive {
			return errBadCredential
		} else if err != nil {
			return err
		}
		signedIn := sess.signedIn()
		if !now.Before(signedIn.Add(s.opts.SessionLifetime)) {
			return errBadCredential // the sign-in has run its course
		}
		if err := deleteSession(tx, d, u.ID); err != nil {
			return err
		}
		if err := s.startSession(tx, u, digest, now, signedIn); err != nil {
			return err
		}
		old = d
		out, err = u.public(tx)
		return err
	}, func() { s.dropSession(old) })
	if err != nil {
		return nil, err
	}
	return &LoginResult{User: out, AccessToken: fresh}, nil
}

// Logout revokes token, an access token of the caller (the bearer secret
// it presented). An API key gets an Invalid error.
func (s *Service) Logout(ctx context.Context, token string) error {
	const action = "user.logout"
	p, err := principal(ctx)
	if err != nil {
		return err
	}
	if p.Kind != PrincipalUser {
		return s.recordFailure(p, action, "", Errorf(KindInvalid, "logout needs a user access token"))
	}
	now := s.now().UTC()
	var old string
	act := s.newActivity(p, action, "", true, nil)
	return s.submit(act, func(tx Txn) error {
		d, sess, err := userSession(tx, p, token, now)
		if err != nil {
			return err
		}
		old = d
		return deleteSession(tx, d, sess.UserID)
	}, func() { s.dropSession(old) })
}
