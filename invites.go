package kms

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"time"

	"github.com/ringkms/kms/internal/passhash"
)

// Invitations and password resets travel as single-use tokens in a link:
// "rki_" (invitation) or "rkr_" (reset) and 32 random bytes in unpadded
// base64url. The service keeps only their SHA-256 digest, under which it
// stores a tokenRecord, and the digest in the User's record, so that a new
// token or the User's deletion removes the old one. Invitations last
// Options.InviteTTL, resets Options.ResetTTL.

// tokenRecord is the stored state of an invitation or reset token.
type tokenRecord struct {
	UserID    string    `json:"userId"`
	ExpiresAt time.Time `json:"expiresAt"`
	CreatedAt time.Time `json:"createdAt"`
}

// States of an invitation, in the State of the errors of ValidateInvite and
// CompleteInvite and in InviteValidation (docs/API.md, "Users, Accounts,
// API keys, activity").
const (
	InviteSuccess = "success"
	InviteExpired = "expired"
	InviteInvalid = "invalid"
)

// InviteInput invites a User: the fields of UserInput, of which username,
// email, firstName and lastName are required.
type InviteInput UserInput

// InviteResult is the link of an invitation. The same link is mailed to
// the User.
type InviteResult struct {
	LoginURL string `json:"loginUrl"`
}

// InviteValidation is the answer to a valid invitation token.
type InviteValidation struct {
	State string `json:"state"` // InviteSuccess
	User  *User  `json:"user"`
}

// InviteCompletion is the User who completed its invitation, signed in.
type InviteCompletion struct {
	User        *User  `json:"user"`
	AccessToken string `json:"accesstoken"` // in lower case: the interface spells it so here
}

// inviteLink is the link that completes an invitation.
func (s *Service) inviteLink(token string) string {
	return strings.TrimRight(s.opts.BaseURL, "/") + "/auth/user/invite-validate?token=" + url.QueryEscape(token)
}

// Invite creates a User in the state "invited", with no password, and an
// invitation to complete: a single-use token that lasts Options.InviteTTL.
// It answers the link, BaseURL + "/auth/user/invite-validate?token=...",
// and mails the same link to the User through Options.Mailer. Without a
// Mailer the invitation still succeeds (the record says mailed: false) and
// the caller passes the link on; when sending fails, the invitation stands,
// the failure is logged and recorded (action user.invite.mail), and the
// link is answered all the same.
//
// It needs users.write; the rules of CreateUser apply (unique username
// and email, flags, Account, plan limit: invited Users count).
func (s *Service) Invite(ctx context.Context, in InviteInput) (*InviteResult, error) {
	const action = "user.invite"
	p, err := s.authorize(ctx, action, "", FlagUsersWrite)
	if err != nil {
		return nil, err
	}
	u, err := s.prepareUser(p, UserInput(in), UserInvited)
	if err != nil {
		return nil, s.recordFailure(p, action, "", err)
	}
	token := newSecret(inviteTokenPrefix)
	digest := secretDigest(token)
	u.InviteDigest = digest
	tok := &tokenRecord{UserID: u.ID, ExpiresAt: u.CreatedAt.Add(s.opts.InviteTTL), CreatedAt: u.CreatedAt}
	mailer := s.opts.Mailer
	act := s.newActivity(p, action, "", true, map[string]any{"userId": u.ID, "accountId": u.AccountID, "mailed": mailer != nil})
	err = s.submit(act, func(tx Txn) error {
		if err := s.insertUser(tx, u); err != nil {
			return err
		}
		return putToken(tx, pfxInvite, digest, tok)
	}, nil)
	if err != nil {
		return nil, err
	}
	link := s.inviteLink(token)
	if mailer != nil {
		msg := Message{
			To:      u.Email,
			Subject: "Your invitation to ringkms",
			Body: "Hello " + u.DisplayName + ",\n\n" +
				"You have been invited to ringkms as " + u.Username + ". To accept, open this link and choose a password:\n\n" +
				link + "\n\n" +
				"The link can be used once and expires on " + tok.ExpiresAt.Format(time.RFC1123) + ".\n",
		}
		if err := mailer.Send(ctx, msg); err != nil {
			s.log.Error().Err(err).Str("userId", u.ID).Msg("send invitation mail")
			_ = s.record(p, "user.invite.mail", "", map[string]any{"userId": u.ID, "mailed": false}, internalError("send mail", err))
		}
	}
	return &InviteResult{LoginURL: link}, nil
}

func putToken(tx Txn, prefix []byte, digest string, t *tokenRecord) error {
	v, err := json.Marshal(t)
	if err != nil {
		return err
	}
	return tx.Set(join(prefix, []byte(digest)), v)
}

// tokenKind is an invitation's tokens or a password reset's: the index
// of their digests and the prefix of their text.
type tokenKind struct {
	index  []byte
	prefix string
}

var (
	invitation    = tokenKind{index: pfxInvite, prefix: inviteTokenPrefix}
	passwordReset = tokenKind{index: pfxReset, prefix: resetTokenPrefix}
)

// useToken is the write of a token's use, in tx: the token must still be
// usable, as it was when checked (else refused(state)); the User gets
// the password hash, sealed, and what set changes, and the token goes.
// It returns the User as written.
func (s *Service) useToken(tx Txn, kind tokenKind, token string, now time.Time, hash string, refused func(state string) error, set func(*userRecord)) (*userRecord, error) {
	cur, state, err := findToken(tx, kind, token, now)
	if err != nil {
		return nil, err
	}
	if state != InviteSuccess {
		return nil, refused(state)
	}
	sealed, err := s.sealPassword(tx, cur.ID, hash)
	if err != nil {
		return nil, err
	}
	n := *cur
	n.Password = sealed
	set(&n)
	if err := putUser(tx, &n, cur); err != nil {
		return nil, err
	}
	return &n, tx.Delete(join(kind.index, []byte(secretDigest(token))))
}

// lookupToken is findToken in a transaction of its own; a failure of the
// store is an internal error, naming what the caller was doing.
func (s *Service) lookupToken(ctx context.Context, kind tokenKind, token string, now time.Time, doing string) (*userRecord, string, error) {
	var u *userRecord
	var state string
	err := s.store.View(ctx, func(tx Txn) error {
		var err error
		u, state, err = findToken(tx, kind, token, now)
		return err
	})
	if err != nil {
		return nil, "", internalError(doing, err)
	}
	return u, state, nil
}

// findToken looks up an invitation or reset token and its User, and says
// whether it is usable: InviteSuccess, InviteExpired or InviteInvalid. The
// User is nil when unknown. A token of the wrong shape, one already used,
// one of a deleted User or one replaced by a newer token is invalid.
func findToken(tx Txn, kind tokenKind, token string, now time.Time) (*userRecord, string, error) {
	if !strings.HasPrefix(token, kind.prefix) || len(token) > 512 {
		return nil, InviteInvalid, nil
	}
	digest := secretDigest(token)
	v, err := tx.Get(join(kind.index, []byte(digest)))
	if isNotFound(err) {
		return nil, InviteInvalid, nil
	} else if err != nil {
		return nil, "", err
	}
	var t tokenRecord
	if err := json.Unmarshal(v, &t); err != nil {
		return nil, "", err
	}
	u, err := getUser(tx, t.UserID)
	if isNotFound(err) {
		return nil, InviteInvalid, nil
	} else if err != nil {
		return nil, "", err
	}
	current, status := u.InviteDigest, UserInvited
	if kind.prefix == resetTokenPrefix {
		current, status = u.ResetDigest, UserActive
	}
	switch {
	case current != digest || u.Status != status:
		return u, InviteInvalid, nil
	case !now.Before(t.ExpiresAt):
		return u, InviteExpired, nil
	}
	return u, InviteSuccess, nil
}

// inviteError is the Unauthenticated error of an invitation token in
// state (expired or invalid).
func inviteError(state string) error {
	msg := "invalid invitation token"
	if state == InviteExpired {
		msg = "the invitation has expired"
	}
	return &Error{Kind: KindUnauthenticated, Message: msg, State: state}
}

// ValidateInvite checks an invitation token and returns its User. It needs
// no credential. A token that is unknown, used or replaced is an
// Unauthenticated error with State "invalid"; one past its time, State
// "expired".
func (s *Service) ValidateInvite(ctx context.Context, token string) (*InviteValidation, error) {
	const action = "user.invite.validate"
	now := s.now()
	var u *userRecord
	var state string
	var out *User
	err := s.store.View(ctx, func(tx Txn) error {
		var err error
		u, state, err = findToken(tx, invitation, token, now)
		if err == nil && state == InviteSuccess {
			out, err = u.public(tx)
		}
		return err
	})
	if err != nil {
		return nil, internalError("validate invitation", err)
	}
	if state != InviteSuccess {
		return nil, s.recordPublic(u, action, map[string]any{"state": state}, inviteError(state))
	}
	if err := s.recordPublic(u, action, map[string]any{"state": state}, nil); err != nil {
		return nil, err
	}
	return &InviteValidation{State: InviteSuccess, User: out}, nil
}

// CompleteInvite sets the password of an invited User, makes it active,
// uses up the token and signs the User in. It needs no credential. A
// password that breaks the rules is an Invalid error with State
// "malformed-password" and Details the PasswordCheck (checked first); a
// token that is unknown, used or replaced is Unauthenticated with State
// "invalid", one past its time State "expired".
func (s *Service) CompleteInvite(ctx context.Context, token, password string) (*InviteCompletion, error) {
	const action = "user.invite.complete"
	now := s.now()
	u, state, err := s.lookupToken(ctx, invitation, token, now, "complete invitation")
	if err != nil {
		return nil, err
	}
	if check := CheckPassword(password); !check.IsValid {
		return nil, s.recordPublic(u, action, map[string]any{"reason": "malformed password"}, errMalformedPassword(check))
	}
	if state != InviteSuccess {
		return nil, s.recordPublic(u, action, map[string]any{"state": state}, inviteError(state))
	}
	hash, err := passhash.Hash(ctx, password)
	if err != nil {
		return nil, err
	}
	access := newSecret(accessTokenPrefix)
	at := s.now().UTC()
	var out *User
	act := s.newActivity(actor(u), action, "", true, map[string]any{"userId": u.ID})
	err = s.submit(act, func(tx Txn) error {
		n, err := s.useToken(tx, invitation, token, now, hash, inviteError, func(n *userRecord) {
			n.Status, n.InviteDigest, n.UpdatedAt = UserActive, "", at
		})
		if err != nil {
			return err
		}
		if err := s.startSession(tx, n, secretDigest(access), at, at); err != nil {
			return err
		}
		out, err = n.public(tx)
		return err
	}, nil)
	if err != nil {
		return nil, err
	}
	return &InviteCompletion{User: out, AccessToken: access}, nil
}

// resetMessage is the one answer of StartPasswordReset.
const resetMessage = "if the address is known, a reset link has been sent"

// resetInterval is the least time between two reset mails to one User.
const resetInterval = time.Minute

// mailTimeout bounds the sending of a mail in the background.
const mailTimeout = time.Minute

// StartPasswordReset sends a password reset link to the address, when it
// is that of an active User, and answers the same message whether or not
// it is: "if the address is known, a reset link has been sent". It needs
// no credential. The link, BaseURL +
// "/auth/basic/reset-password-complete?token=...", carries the single-use
// token that CompletePasswordReset takes (POST
// /auth/basic/reset-password-complete with the token and a new password).
// The token lasts Options.ResetTTL and replaces any earlier one; at most
// one mail a minute goes to one User. Without a Mailer it fails (Invalid)
// for every address alike.
//
// The answer does the same work for every address: it records the
// request and hands it on. Looking the address up, storing the token and
// sending the mail happen behind it (issueReset), once the request is
// over (afterRequest), so that how long the answer takes does not tell
// whether the address is known. Requests are
// throttled per address and per client address (WithClientAddr), known or
// not, like failed logins: after 5 for one address, or 20 from one client
// address, within 15 minutes, requests are refused for 15 minutes with a
// RateLimited error saying when to retry; each further lockout lasts twice
// as long, up to a day.
func (s *Service) StartPasswordReset(ctx context.Context, email string) (string, error) {
	const action = "user.reset.start"
	if msg := validEmail(email); msg != "" {
		return "", &Error{Kind: KindInvalid, Message: msg, Fields: map[string]string{"email": msg}}
	}
	mailer := s.opts.Mailer
	if mailer == nil {
		return "", s.recordPublic(nil, action, map[string]any{"mailed": false},
			Errorf(KindInvalid, "password reset needs outgoing mail, and none is configured"))
	}
	st := s.userState()
	emailKey := "e/" + secretDigest(strings.ToLower(email)) // the address is not kept in memory
	addr := s.clientAddr(ctx)
	now := s.now()
	try, until, err := st.throttles.BeginReset(ctx, emailKey, addr, now)
	if err != nil {
		return "", err
	}
	if try == nil {
		err := Errorf(KindRateLimited, "too many password reset requests: try again after %s", until.UTC().Format(time.RFC3339))
		return "", s.recordPublic(nil, action, map[string]any{"reason": "throttled"}, err)
	}
	if err := s.recordPublic(nil, action, nil, nil); err != nil {
		try.Cancel(s.now())
		return "", err
	}
	try.End(ctx, s.now(), true) // every request counts
	if !st.background.TryGo(func() {
		afterRequest(ctx)
		s.issueReset(context.WithoutCancel(ctx), mailer, email, now.UTC())
	}) {
		s.log.Warn().Msg("password reset dropped: too many under way")
	}
	return resetMessage, nil
}

// afterRequestWait bounds how long afterRequest waits for the end of a
// request; afterAnswer is how long it waits after it, for the answer to
// be sent (an HTTP request's context is done when its handler returns,
// just before the server flushes the answer).
const (
	afterRequestWait = 100 * time.Millisecond
	afterAnswer      = 2 * time.Millisecond
)

// afterRequest waits until the answer of the request of ctx is sent: the
// caller says so (WithAnswerNotice), or else the request is over (ctx is
// done); at most afterRequestWait. Then it waits afterAnswer more, for the
// answer to leave the machine: work behind an answer then does not compete
// with the answer for the processor, and its length does not show in the
// answer's time.
func afterRequest(ctx context.Context) {
	t := time.NewTimer(afterRequestWait)
	defer t.Stop()
	over := ctx.Done()
	if sent := answerSent(ctx); sent != nil {
		over = sent
	}
	select {
	case <-over:
	case <-t.C:
	}
	time.Sleep(afterAnswer)
}

// errResetRecent refuses a reset mail within resetInterval of the last.
var errResetRecent = Errorf(KindLimit, "a reset link was sent to the user less than a minute ago")

// issueReset does the work behind a password reset request made at at:
// when email is that of an active User who has not been sent a reset
// within resetInterval, it stores a new token in place of any earlier one
// and mails the link. Its record (user.reset.issue) names the User; an
// unknown address leaves none but the request's.
func (s *Service) issueReset(ctx context.Context, mailer Mailer, email string, at time.Time) {
	const action = "user.reset.issue"
	u, err := viewOne(ctx, s.store, func(tx Txn) (*userRecord, error) { return findUser(tx, UserRef{Value: email, ByEmail: true}) })
	if isNotFound(err) {
		return
	} else if err != nil {
		s.log.Error().Err(err).Msg("password reset: read user")
		return
	}
	if u.Status != UserActive {
		_ = s.recordPublic(u, action, map[string]any{"mailed": false, "reason": "user not active"}, nil)
		return
	}
	token := newSecret(resetTokenPrefix)
	digest := secretDigest(token)
	tok := &tokenRecord{UserID: u.ID, ExpiresAt: at.Add(s.opts.ResetTTL), CreatedAt: at}
	err = s.submit(s.newActivity(actor(u), action, "", true, map[string]any{"mailed": true}), func(tx Txn) error {
		cur, err := getUser(tx, u.ID)
		if err != nil {
			return err
		}
		if cur.Status != UserActive || !strings.EqualFold(cur.Email, email) {
			return errUserNotFound // changed since the look-up
		}
		if at.Sub(cur.ResetSentAt) < resetInterval {
			return errResetRecent
		}
		n := *cur
		u = &n
		if n.ResetDigest != "" {
			if err := tx.Delete(join(pfxReset, []byte(n.ResetDigest))); err != nil {
				return err
			}
		}
		n.ResetDigest, n.ResetSentAt = digest, at
		if err := putUser(tx, &n, cur); err != nil {
			return err
		}
		return putToken(tx, pfxReset, digest, tok)
	}, nil)
	if err != nil {
		if ErrorKind(err) == KindInternal {
			s.log.Error().Err(err).Str("userId", u.ID).Msg("password reset: store token")
		}
		return
	}
	msg := Message{
		To:      u.Email,
		Subject: "Reset your ringkms password",
		Body: "Hello " + u.DisplayName + ",\n\n" +
			"Someone asked to reset the password of " + u.Username + ". To choose a new password, open this link:\n\n" +
			s.resetLink(token) + "\n\n" +
			"The link can be used once and expires on " + tok.ExpiresAt.Format(time.RFC1123) + ". " +
			"If you did not ask for it, ignore this mail: your password stays as it is.\n",
	}
	go s.sendMail(ctx, mailer, msg, u, "user.reset.mail")
}

// resetLink is the link that completes a password reset.
func (s *Service) resetLink(token string) string {
	return strings.TrimRight(s.opts.BaseURL, "/") + "/auth/basic/reset-password-complete?token=" + url.QueryEscape(token)
}

// sendMail sends msg to the User u, for the caller that runs it in the
// background: a failure is logged and recorded under action.
func (s *Service) sendMail(ctx context.Context, mailer Mailer, msg Message, u *userRecord, action string) {
	ctx, cancel := context.WithTimeout(ctx, mailTimeout)
	defer cancel()
	if err := mailer.Send(ctx, msg); err != nil {
		s.log.Error().Err(err).Str("userId", u.ID).Str("action", action).Msg("send mail")
		_ = s.recordPublic(u, action, map[string]any{"mailed": false}, internalError("send mail", err))
	}
}

// CompletePasswordReset sets a new password with a reset token, uses the
// token up and revokes every access token of the User. It needs no
// credential. A password that breaks the rules is an Invalid error with
// State "malformed-password" and Details the PasswordCheck; a bad token
// is an Invalid error too. (The HTTP interface answers 200 {} and 400 {}:
// httpapi renders an empty object for both, whatever the error carries.)
func (s *Service) CompletePasswordReset(ctx context.Context, token, password string) error {
	const action = "user.reset.complete"
	now := s.now()
	u, state, err := s.lookupToken(ctx, passwordReset, token, now, "complete password reset")
	if err != nil {
		return err
	}
	if check := CheckPassword(password); !check.IsValid {
		return s.recordPublic(u, action, map[string]any{"reason": "malformed password"}, errMalformedPassword(check))
	}
	if state != InviteSuccess {
		return s.recordPublic(u, action, map[string]any{"state": state}, errBadReset)
	}
	hash, err := passhash.Hash(ctx, password)
	if err != nil {
		return err
	}
	at := s.now().UTC()
	act := s.newActivity(actor(u), action, "", true, map[string]any{"userId": u.ID})
	err = s.submit(act, func(tx Txn) error {
		n, err := s.useToken(tx, passwordReset, token, now, hash, func(string) error { return errBadReset }, func(n *userRecord) {
			n.ResetDigest, n.UpdatedAt = "", at
		})
		if err != nil {
			return err
		}
		return deleteUserSessions(tx, n.ID)
	}, s.forgetSessions)
	if err != nil {
		return err
	}
	s.userState().throttles.ClearUser(ctx, u.ID, s.now())
	return nil
}

// ValidatePasswordReset checks a password-reset token without using it, so
// that the page a reset link opens can tell at once whether to ask for a
// new password: nil when the token can complete a reset, else the same
// Invalid error CompletePasswordReset gives. Public: no principal needed.
func (s *Service) ValidatePasswordReset(ctx context.Context, token string) error {
	u, state, err := s.lookupToken(ctx, passwordReset, token, s.now(), "validate password reset")
	if err != nil {
		return err
	}
	if state != InviteSuccess {
		return s.recordPublic(u, "user.reset.validate", map[string]any{"state": state}, errBadReset)
	}
	return s.recordPublic(u, "user.reset.validate", nil, nil)
}
