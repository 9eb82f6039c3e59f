package kms

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/ringkms/kms/internal/passhash"
)

// Flags of the Users' administration. users.write covers invitation,
// creation, change (flags included) and deletion. Without them, a User
// signed in with an access token may still read and change (but for its
// flags) its own User, refresh its token and log out.
const (
	FlagUsersRead  = "users.read"
	FlagUsersWrite = "users.write"
)

// States of a User.
const (
	UserInvited = "invited" // invited, has not set a password yet: cannot log in
	UserActive  = "active"  // can log in
)

// User is a person who signs in with a username (or email) and password and
// acts with an access token. A User belongs to one Account and holds
// permission flags, as an API key does: its access token acts for that
// Account with those flags.
//
// Usernames (1 to 64 characters: ASCII letters, digits and . _ - @) and
// email addresses are unique across all Accounts, without regard to case.
type User struct {
	ID          string         `json:"id"`
	Username    string         `json:"username"`
	FirstName   string         `json:"firstName"`
	LastName    string         `json:"lastName"`
	DisplayName string         `json:"displayName"`
	Keys        []string       `json:"keys"` // IDs of the API keys the User created (owns)
	Email       string         `json:"email"`
	Props       map[string]any `json:"props"`
	AccountID   string         `json:"accountId"`
	Flags       Flags          `json:"flags"`
	Status      string         `json:"status"` // UserInvited or UserActive
	CreatedAt   time.Time      `json:"createdAt"`
	UpdatedAt   time.Time      `json:"updatedAt"`
}

// userRecord is a User as stored. Keys are not stored: they are read from
// the index of API keys by owner. Password is the PHC string of the
// password's argon2id hash (see internal/passhash), sealed under the master key
// with the User's ID as associated data, so the store sees neither the
// password nor its hash. The digests are those of the User's outstanding
// invitation and password reset tokens, if any.
type userRecord struct {
	User
	Password     []byte    `json:"password,omitempty"`
	InviteDigest string    `json:"inviteDigest,omitempty"`
	ResetDigest  string    `json:"resetDigest,omitempty"`
	ResetSentAt  time.Time `json:"resetSentAt,omitzero"`

	sized // bytes as read by getUser, without Keys
}

// UserRef names a User: by username (the default), by email address, or by
// ID. Usernames and addresses match without regard to case.
type UserRef struct {
	Value   string
	ByEmail bool
	ByID    bool
}

// UserUpdate changes a User. Nil fields are left as they are; Props, when
// not nil, replaces the props. Flags, when not nil, replaces the flags: it
// needs users.write, and the caller may grant only flags it holds itself.
type UserUpdate struct {
	Email       *string        `json:"email"`
	FirstName   *string        `json:"firstName"`
	LastName    *string        `json:"lastName"`
	DisplayName *string        `json:"displayName"`
	Props       map[string]any `json:"props"`
	Flags       Flags          `json:"flags"`
	// Password, when not nil, is a new password, which must meet the
	// password rules. Only the User itself may change its password; for
	// another User there is the password reset.
	Password *string `json:"password,omitempty"`
	// CurrentPassword is the User's password, which a User changing its
	// own email or password must give: its access token alone does not
	// prove that the caller knows it.
	CurrentPassword string `json:"currentPassword,omitempty"`
}

// CreateUserResult is a new User and its generated password, shown once.
type CreateUserResult struct {
	User     *User  `json:"user"`
	Password string `json:"password"`
}

// DeleteUserResult says which User was deleted.
type DeleteUserResult struct {
	Message string `json:"message"`
}

func (ref UserRef) key() ([]byte, error) {
	if ref.Value == "" {
		return nil, Errorf(KindInvalid, "a username, email or user ID is required")
	}
	switch {
	case ref.ByID:
		if _, ok := parseID(ref.Value); !ok {
			return nil, errUserNotFound
		}
		return nil, nil
	case ref.ByEmail:
		if len(ref.Value) > maxEmailLen {
			return nil, errUserNotFound
		}
		return join(pfxUserEmail, []byte(strings.ToLower(ref.Value))), nil
	default:
		if len(ref.Value) > maxEmailLen {
			return nil, errUserNotFound
		}
		return join(pfxUserName, []byte(strings.ToLower(ref.Value))), nil
	}
}

var errUserNotFound = Errorf(KindNotFound, "user not found")

// findUser reads the User that ref names.
func findUser(tx Txn, ref UserRef) (*userRecord, error) {
	idx, err := ref.key()
	if err != nil {
		return nil, err
	}
	id := ref.Value
	if idx != nil {
		v, err := tx.Get(idx)
		if isNotFound(err) {
			return nil, errUserNotFound
		} else if err != nil {
			return nil, err
		}
		id = string(v)
	}
	return getUser(tx, id)
}

func getUser(tx Txn, id string) (*userRecord, error) {
	return getSized[userRecord](tx, join(pfxUser, []byte(id)), errUserNotFound)
}

// putUser writes u and its index entries. old, when set, is the record it
// replaces, whose index entries are removed first.
func putUser(tx Txn, u, old *userRecord) error {
	if old != nil {
		for _, k := range old.indexKeys() {
			if err := tx.Delete(k); err != nil {
				return err
			}
		}
	}
	rec := *u
	rec.Keys = nil
	v, err := json.Marshal(&rec)
	if err != nil {
		return err
	}
	if err := tx.Set(join(pfxUser, []byte(u.ID)), v); err != nil {
		return err
	}
	for _, k := range u.indexKeys() {
		if err := tx.Set(k, []byte(u.ID)); err != nil {
			return err
		}
	}
	return nil
}

func (u *userRecord) indexKeys() [][]byte {
	lower := []byte(strings.ToLower(u.Username))
	return [][]byte{
		join(pfxUserName, lower),
		join(pfxUserEmail, []byte(strings.ToLower(u.Email))),
		join(pfxUserAccount, []byte(u.AccountID), sep, lower),
	}
}

// checkUnique refuses a username or email that another User has, as a
// Conflict error naming the field (over HTTP: 400 with errors.username or
// errors.email), like any other name already taken.
func checkUnique(tx Txn, id, username, email string) error {
	fields := map[string]string{}
	if username != "" {
		if v, err := tx.Get(join(pfxUserName, []byte(strings.ToLower(username)))); err == nil && string(v) != id {
			fields["username"] = "username is already taken"
		} else if err != nil && !isNotFound(err) {
			return err
		}
	}
	if email != "" {
		if v, err := tx.Get(join(pfxUserEmail, []byte(strings.ToLower(email)))); err == nil && string(v) != id {
			fields["email"] = "email is already taken"
		} else if err != nil && !isNotFound(err) {
			return err
		}
	}
	if err := fieldsError(fields); err != nil {
		err.(*Error).Kind = KindConflict
		return err
	}
	return nil
}

// userKeys returns the IDs of the API keys that the User owns.
func userKeys(tx Txn, userID string) ([]string, error) {
	prefix := join(pfxAPIOwner, []byte(userID), sep)
	keys := []string{}
	err := tx.Scan(ScanOptions{Prefix: prefix, KeysOnly: true}, func(k, _ []byte) (bool, error) {
		keys = append(keys, string(k[len(prefix):]))
		return true, nil
	})
	return keys, err
}

// public returns the User as answered: with its keys, without secrets.
func (u *userRecord) public(tx Txn) (*User, error) {
	keys, err := userKeys(tx, u.ID)
	if err != nil {
		return nil, err
	}
	out := u.User
	out.Keys = keys
	out.Props = orEmpty(out.Props)
	if out.Flags == nil {
		out.Flags = Flags{}
	}
	return &out, nil
}

// sealPassword seals the PHC hash of a User's password for its record,
// written by tx.
func (s *Service) sealPassword(tx Txn, userID, hash string) ([]byte, error) {
	return s.barrier.SealIn(tx, []byte(hash), passwordAAD(userID))
}

// openPassword returns the PHC hash of a User's password.
func (s *Service) openPassword(u *userRecord) (string, error) {
	b, err := s.barrier.Open(u.Password, passwordAAD(u.ID))
	if err != nil {
		return "", internalError("open password hash", err)
	}
	return string(b), nil
}

func passwordAAD(userID string) []byte { return []byte("user/password/" + userID) }

// checkReach applies the reach rule (checkFlagReach) to a change or the
// deletion of another User; a User reaches itself.
func checkReach(p *Principal, u *userRecord) error {
	if u.ID == p.ID {
		return nil
	}
	return checkFlagReach(p, "user "+u.Username, "it", u.Flags)
}

// prepareUser validates in for p and returns the new User's record, with
// the given status, not yet stored.
func (s *Service) prepareUser(p *Principal, in UserInput, status string) (*userRecord, error) {
	if err := in.validate(); err != nil {
		return nil, err
	}
	if err := checkProps("props", in.Props); err != nil {
		return nil, err
	}
	flags, err := in.Flags.normalize()
	if err != nil {
		return nil, err
	}
	if err := checkGrant(p, flags); err != nil {
		return nil, err
	}
	if flags == nil {
		flags = Flags{}
	}
	account := in.AccountID
	if account == "" {
		account = p.AccountID
	}
	if !visibleTo(p, account) {
		return nil, Errorf(KindNotFound, "account not found")
	}
	display := in.DisplayName
	if display == "" {
		display = in.FirstName + " " + in.LastName
	}
	now := s.now().UTC()
	return &userRecord{User: User{
		ID: newID(now), Username: in.Username, FirstName: in.FirstName, LastName: in.LastName, DisplayName: display,
		Email: in.Email, Props: cloneMap(in.Props), AccountID: account, Flags: flags, Status: status,
		CreatedAt: now, UpdatedAt: now,
	}}, nil
}

// insertUser stores a new User inside a journal job: its Account must
// exist, its username and email must be free, and the plan must have room.
func (s *Service) insertUser(tx Txn, u *userRecord) error {
	if _, err := getAccount(tx, u.AccountID, false); err != nil {
		return err
	}
	if err := checkUnique(tx, u.ID, u.Username, u.Email); err != nil {
		return err
	}
	if err := adjustCount(tx, countUsers, 1, s.opts.Limits.MaxUsers, "users"); err != nil {
		return err
	}
	return putUser(tx, u, nil)
}

// CreateUser creates an active User with a generated password (24
// characters that meet the password rules) and returns both: the only time
// the password is shown. It needs users.write; see UserInput for the
// Account and the flags. A username or email that another User has is an
// Invalid error whose Fields name it.
func (s *Service) CreateUser(ctx context.Context, in UserInput) (*CreateUserResult, error) {
	const action = "user.create"
	p, err := s.authorize(ctx, action, "", FlagUsersWrite)
	if err != nil {
		return nil, err
	}
	u, err := s.prepareUser(p, in, UserActive)
	if err != nil {
		return nil, s.recordFailure(p, action, "", err)
	}
	// Check before the slow hashing; the journal job checks again.
	err = s.store.View(ctx, func(tx Txn) error { return checkUnique(tx, u.ID, u.Username, u.Email) })
	if err != nil {
		return nil, s.recordFailure(p, action, "", internalError("check user", err))
	}
	pw := generatePassword()
	hash, err := passhash.Hash(ctx, pw)
	if err != nil {
		return nil, err
	}
	var out *User
	act := s.newActivity(p, action, "", true, map[string]any{"userId": u.ID, "accountId": u.AccountID})
	err = s.submit(act, func(tx Txn) error {
		var err error
		if u.Password, err = s.sealPassword(tx, u.ID, hash); err != nil {
			return err
		}
		if err := s.insertUser(tx, u); err != nil {
			return err
		}
		out, err = u.public(tx)
		return err
	}, nil)
	if err != nil {
		return nil, err
	}
	return &CreateUserResult{User: out, Password: pw}, nil
}

// resolveUser finds the User that ref names for the caller of action. A
// caller that holds flag reaches the Users of its own Account (of every
// Account with accounts.all; others are NotFound); a User signed in with
// an access token reaches itself without the flag when self is set. Any
// other caller is denied (and the denial recorded), whether or not the
// User exists.
func (s *Service) resolveUser(ctx context.Context, action string, ref UserRef, flag string, self bool) (*Principal, *userRecord, error) {
	p, err := principal(ctx)
	if err != nil {
		return nil, nil, err
	}
	held := p.Can(flag)
	deny := func() error {
		_, err := s.authorize(ctx, action, "", flag)
		return err
	}
	if !held && !(self && p.Kind == PrincipalUser) {
		return nil, nil, deny()
	}
	u, err := viewOne(ctx, s.store, func(tx Txn) (*userRecord, error) { return findUser(tx, ref) })
	if !held && (err != nil || u.ID != p.ID) {
		return nil, nil, deny()
	}
	if err != nil {
		return nil, nil, s.recordFailure(p, action, "", internalError("read user", err))
	}
	if u.ID != p.ID && !visibleTo(p, u.AccountID) {
		return nil, nil, s.recordFailure(p, action, "", errUserNotFound)
	}
	return p, u, nil
}

// userToChange is resolveUser for a change of the User: it needs
// users.write, and the reach rule over the User as it is (checkReach).
func (s *Service) userToChange(ctx context.Context, action string, ref UserRef, self bool) (*Principal, *userRecord, error) {
	p, u, err := s.resolveUser(ctx, action, ref, FlagUsersWrite, self)
	if err != nil {
		return nil, nil, err
	}
	if err := checkReach(p, u); err != nil {
		return nil, nil, s.recordFailure(p, action, "", err)
	}
	return p, u, nil
}

// reachedUser reads the User id in tx and checks the reach rule over
// its flags as they are now, as a change does when it writes.
func reachedUser(tx Txn, p *Principal, id string) (*userRecord, error) {
	u, err := getUser(tx, id)
	if err == nil {
		err = checkReach(p, u)
	}
	if err != nil {
		return nil, err
	}
	return u, nil
}

// GetUser returns a User. It needs users.read, except for a User reading
// itself with its access token. A User missing (or of another Account,
// without accounts.all) is NotFound: 404.
func (s *Service) GetUser(ctx context.Context, ref UserRef) (*User, error) {
	const action = "user.read"
	p, u, err := s.resolveUser(ctx, action, ref, FlagUsersRead, true)
	if err != nil {
		return nil, err
	}
	var out *User
	err = s.store.View(ctx, func(tx Txn) error {
		out, err = u.public(tx)
		return err
	})
	if err != nil {
		return nil, s.recordFailure(p, action, "", internalError("read user", err))
	}
	if err := s.record(p, action, "", map[string]any{"userId": u.ID}, nil); err != nil {
		return nil, err
	}
	return out, nil
}

// UpdateUser changes a User and returns it. It needs users.write, except
// for a User changing itself with its access token, which may change
// anything but its flags. A caller may change another User only if it
// holds every flag that User holds. A new email must be free (Invalid with
// Fields otherwise).
//
// A User changing its own email or password must give its current
// password (see confirmPassword); only the User itself may change its
// password, which revokes every access token of the User. A change of
// email or password is told by mail (Options.Mailer) to the address the
// User had before it, whoever made it.
func (s *Service) UpdateUser(ctx context.Context, ref UserRef, in UserUpdate) (*User, error) {
	const action = "user.update"
	p, u, err := s.userToChange(ctx, action, ref, true)
	if err != nil {
		return nil, err
	}
	self := p.Kind == PrincipalUser && p.ID == u.ID
	if in.Password != nil && !self {
		return nil, s.recordFailure(p, action, "", Errorf(KindPermissionDenied, "only a user may change its own password; for another, start a password reset"))
	}
	var flags Flags
	if in.Flags != nil {
		if !p.Can(FlagUsersWrite) {
			_, err := s.authorize(ctx, action, "", FlagUsersWrite)
			return nil, err
		}
		if flags, err = in.Flags.normalize(); err == nil {
			err = checkGrant(p, flags)
		}
		if err != nil {
			return nil, s.recordFailure(p, action, "", err)
		}
	}
	fields := map[string]string{}
	var changed []string
	check := func(field string, v *string, msg func(string) string) {
		if v == nil {
			return
		}
		changed = append(changed, field)
		if m := msg(*v); m != "" {
			fields[field] = m
		}
	}
	check("email", in.Email, validEmail)
	check("firstName", in.FirstName, func(v string) string { return validName("firstName", v, true) })
	check("lastName", in.LastName, func(v string) string { return validName("lastName", v, true) })
	check("displayName", in.DisplayName, func(v string) string { return validName("displayName", v, false) })
	if in.Props != nil {
		changed = append(changed, "props")
	}
	if flags != nil {
		changed = append(changed, "flags")
	}
	if in.Password != nil {
		changed = append(changed, "password")
	}
	if err := fieldsError(fields); err != nil {
		return nil, s.recordFailure(p, action, "", err)
	}
	if err := checkProps("props", in.Props); err != nil {
		return nil, s.recordFailure(p, action, "", err)
	}
	var hash string // the new password's, when it changes
	if in.Password != nil {
		if check := CheckPassword(*in.Password); !check.IsValid {
			return nil, s.recordFailure(p, action, "", errMalformedPassword(check))
		}
	}
	if self && (in.Password != nil || in.Email != nil && !strings.EqualFold(*in.Email, u.Email)) {
		if err := s.confirmPassword(ctx, p, action, u, in.CurrentPassword); err != nil {
			return nil, err
		}
	}
	if in.Password != nil {
		var err error
		if hash, err = passhash.Hash(ctx, *in.Password); err != nil {
			return nil, err
		}
	}
	var after func()
	if flags != nil || hash != "" {
		after = s.forgetSessions // the User's tokens act with the new flags, or stop, at once
	}
	mailer := s.opts.Mailer
	now := s.now().UTC()
	var out *User
	var notice *Message
	act := s.newActivity(p, action, "", true, map[string]any{"userId": u.ID, "fields": changed})
	err = s.submit(act, func(tx Txn) error {
		old, err := reachedUser(tx, p, u.ID)
		if err != nil {
			return err
		}
		n := *old
		if hash != "" {
			if n.Password, err = s.sealPassword(tx, n.ID, hash); err != nil {
				return err
			}
			if err := deleteUserSessions(tx, n.ID); err != nil {
				return err
			}
		}
		if in.Email != nil {
			if err := checkUnique(tx, n.ID, "", *in.Email); err != nil {
				return err
			}
			n.Email = *in.Email
		}
		if in.FirstName != nil {
			n.FirstName = *in.FirstName
		}
		if in.LastName != nil {
			n.LastName = *in.LastName
		}
		if in.DisplayName != nil {
			n.DisplayName = *in.DisplayName
		}
		if in.Props != nil {
			n.Props = cloneMap(in.Props)
		}
		if flags != nil {
			n.Flags = flags
		}
		emailChanged := !strings.EqualFold(n.Email, old.Email)
		if (emailChanged || hash != "") && n.ResetDigest != "" {
			// A reset link went to the old address, or predates the new password.
			if err := tx.Delete(join(pfxReset, []byte(n.ResetDigest))); err != nil {
				return err
			}
			n.ResetDigest = ""
		}
		n.UpdatedAt = now
		if err := putUser(tx, &n, old); err != nil {
			return err
		}
		notice = nil
		if mailer != nil && (emailChanged || hash != "") {
			notice = changeNotice(old, n.Email, hash != "", now)
		}
		out, err = n.public(tx)
		return err
	}, after)
	if err != nil {
		return nil, err
	}
	if notice != nil {
		go s.sendMail(context.WithoutCancel(ctx), mailer, *notice, u, "user.update.mail")
	}
	return out, nil
}

// changeNotice is the mail that tells the address a User had (old.Email)
// that its email address (now email) or password changed.
func changeNotice(old *userRecord, email string, password bool, at time.Time) *Message {
	var what []string
	if !strings.EqualFold(email, old.Email) {
		what = append(what, "the email address of the ringkms user "+old.Username+" was changed from "+old.Email+" to "+email+
			"; mail for the user now goes to the new address")
	}
	if password {
		what = append(what, "the password of the ringkms user "+old.Username+" was changed, and every access token of the user revoked")
	}
	return &Message{
		To:      old.Email,
		Subject: "Your ringkms user was changed",
		Body: "Hello " + old.DisplayName + ",\n\n" +
			"On " + at.Format(time.RFC1123) + ", " + strings.Join(what, ", and ") + ".\n\n" +
			"If you did not make this change, tell your ringkms administrator at once: " +
			"someone else may be using your account.\n",
	}
}

// confirmPassword checks the current password that a User gives to change
// its own email or password (UpdateUser): a missing one is Invalid (with
// Fields naming currentPassword), a wrong one PermissionDenied. Attempts
// go through the login throttles of the User and of the client address,
// so that a stolen access token is no way to guess the password: while
// they refuse, the answer is RateLimited, as for Login.
func (s *Service) confirmPassword(ctx context.Context, p *Principal, action string, u *userRecord, pw string) error {
	if pw == "" {
		msg := "currentPassword is required to change your own email or password"
		return s.recordFailure(p, action, "", &Error{Kind: KindInvalid, Message: msg, Fields: map[string]string{"currentPassword": msg}})
	}
	st := s.userState()
	userKey, addr := "u/"+u.ID, s.clientAddr(ctx)
	try, until, err := st.throttles.BeginLogin(ctx, userKey, addr, s.now())
	if err != nil {
		return err
	}
	if try == nil {
		return s.recordFailure(p, action, "", Errorf(KindRateLimited, "too many failed logins: try again after %s", until.UTC().Format(time.RFC3339)))
	}
	ok, _, err := s.checkLogin(ctx, u, pw)
	if err != nil {
		try.Cancel(s.now())
		return err
	}
	try.End(ctx, s.now(), !ok)
	if !ok {
		return s.recordFailure(p, action, "", Errorf(KindPermissionDenied, "the current password is wrong"))
	}
	return nil
}

// DeleteUser deletes a User, its access tokens and its outstanding
// invitation or reset. The API keys it created stay (they belong to the
// Account). It needs users.write, and every flag the User holds.
func (s *Service) DeleteUser(ctx context.Context, ref UserRef) (*DeleteUserResult, error) {
	const action = "user.delete"
	p, u, err := s.userToChange(ctx, action, ref, false)
	if err != nil {
		return nil, err
	}
	act := s.newActivity(p, action, "", true, map[string]any{"userId": u.ID, "accountId": u.AccountID})
	err = s.submit(act, func(tx Txn) error {
		cur, err := reachedUser(tx, p, u.ID)
		if err != nil {
			return err
		}
		dels := append(cur.indexKeys(), join(pfxUser, []byte(cur.ID)))
		if cur.InviteDigest != "" {
			dels = append(dels, join(pfxInvite, []byte(cur.InviteDigest)))
		}
		if cur.ResetDigest != "" {
			dels = append(dels, join(pfxReset, []byte(cur.ResetDigest)))
		}
		for _, k := range dels {
			if err := tx.Delete(k); err != nil {
				return err
			}
		}
		if err := deleteUserSessions(tx, cur.ID); err != nil {
			return err
		}
		return adjustCount(tx, countUsers, -1, 0, "users")
	}, s.forgetSessions)
	if err != nil {
		return nil, err
	}
	return &DeleteUserResult{Message: "user " + u.Username + " deleted"}, nil
}

// ListUsers pages through Users in username order: those of the caller's
// Account, or of every Account with accounts.all. It needs users.read.
func (s *Service) ListUsers(ctx context.Context, req PageRequest) (*List[*User], error) {
	const action = "user.list"
	p, err := s.authorize(ctx, action, "", FlagUsersRead)
	if err != nil {
		return nil, err
	}
	ps := pageScan{Scope: "users/all", Prefix: pfxUserName}
	if !p.Can(FlagAllAccounts) {
		ps = pageScan{Scope: "users/account/" + p.AccountID, Prefix: join(pfxUserAccount, []byte(p.AccountID), sep)}
	}
	return audited(s, ctx, p, action, "", func(tx Txn) (*List[*User], map[string]any, error) {
		out := &List[*User]{Data: []*User{}}
		var cur *User
		var size int
		ps.Match = func(_, v []byte) (bool, error) {
			u, err := getUser(tx, string(v))
			if err == nil {
				cur, err = u.public(tx)
			}
			if err != nil {
				return false, err
			}
			size = u.stored + len(cur.Keys)*(idLen+3) // the keys are not stored with the User
			return true, nil
		}
		ps.Size = func(_, _ []byte) int { return size }
		ps.Emit = func(_, _ []byte) error {
			out.Data = append(out.Data, cur)
			return nil
		}
		var err error
		out.Pagination, err = s.pager.scan(ctx, tx, req, ps)
		return out, map[string]any{"count": out.Pagination.Count}, err
	})
}
