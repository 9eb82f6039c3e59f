package kms

// What a User's fields may hold: UserInput, and the checks of UserInput
// and UserUpdate.

import (
	"maps"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// validUsername checks a username's form.
func validUsername(name string) string {
	if name == "" {
		return "username is required"
	}
	if len(name) > maxUsernameLen {
		return "username must have at most 64 characters"
	}
	for _, c := range []byte(name) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' || c == '@') {
			return "username may only have letters, digits, '.', '_', '-' and '@'"
		}
	}
	return ""
}

// validEmail checks an email address's form: local@domain, at most 254
// characters, in ASCII; a local part of at most 64 characters of letters,
// digits and !#$%&'*+/=?^_`{|}~.- without a leading, trailing or double dot;
// a domain of at least two dot-separated labels of letters, digits and
// hyphens (not at either end of a label). Quoted local parts, address
// literals and non-ASCII addresses are refused (give a domain in punycode).
func validEmail(addr string) string {
	if addr == "" {
		return "email is required"
	}
	bad := "email is not a valid address"
	if len(addr) > maxEmailLen {
		return "email must have at most 254 characters"
	}
	local, domain, ok := strings.Cut(addr, "@")
	if !ok || local == "" || len(local) > 64 || strings.Contains(domain, "@") {
		return bad
	}
	if local[0] == '.' || local[len(local)-1] == '.' || strings.Contains(local, "..") {
		return bad
	}
	for _, c := range []byte(local) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+/=?^_`{|}~.-", c) >= 0) {
			return bad
		}
	}
	labels := strings.Split(domain, ".")
	if len(labels) < 2 {
		return bad
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return bad
		}
		for _, c := range []byte(l) {
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return bad
			}
		}
	}
	return ""
}

// validName checks a first, last or display name.
func validName(field, v string, required bool) string {
	if v == "" {
		if required {
			return field + " is required"
		}
		return ""
	}
	if !utf8.ValidString(v) || utf8.RuneCountInString(v) > maxNameLen {
		return field + " must be valid text of at most 200 characters"
	}
	for _, r := range v {
		if unicode.IsControl(r) {
			return field + " must not contain control characters"
		}
	}
	return ""
}

// fieldsError is an Invalid error that names each field at fault.
func fieldsError(fields map[string]string) error {
	if len(fields) == 0 {
		return nil
	}
	names := slices.Sorted(maps.Keys(fields))
	msgs := make([]string, len(names))
	for i, n := range names {
		msgs[i] = fields[n]
	}
	return &Error{Kind: KindInvalid, Message: strings.Join(msgs, "; "), Fields: fields}
}

func (in *UserInput) validate() error {
	fields := map[string]string{}
	add := func(field, msg string) {
		if msg != "" {
			fields[field] = msg
		}
	}
	add("username", validUsername(in.Username))
	add("email", validEmail(in.Email))
	add("firstName", validName("firstName", in.FirstName, true))
	add("lastName", validName("lastName", in.LastName, true))
	add("displayName", validName("displayName", in.DisplayName, false))
	return fieldsError(fields)
}

// Limits of a User's fields.
const (
	maxUsernameLen = 64
	maxEmailLen    = 254
	maxNameLen     = 200
)

// UserInput creates a User (CreateUser) or invites one (Invite).
type UserInput struct {
	Username    string         `json:"username"`  // required
	Email       string         `json:"email"`     // required
	FirstName   string         `json:"firstName"` // required
	LastName    string         `json:"lastName"`  // required
	DisplayName string         `json:"displayName"`
	Props       map[string]any `json:"props"`
	// Flags are the User's permissions; the caller may grant only flags
	// it holds itself.
	Flags Flags `json:"flags"`
	// AccountID is the Account of the User: empty means the caller's.
	// Another Account needs accounts.all.
	AccountID string `json:"accountId"`
}
