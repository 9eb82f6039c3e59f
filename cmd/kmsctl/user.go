package main

import (
	"context"
	"flag"

	"github.com/ringkms/kms"
)

func userCommands() *command {
	return &command{name: "user", summary: "Users, who sign in with a password: invite, list, show, accept-invite, forgot-password, reset-password.", subs: []*command{
		{name: "invite", args: "USERNAME", minArgs: 1, maxArgs: 1, auth: true, required: []string{"email", "first-name", "last-name"}, setup: userInvite,
			summary: "Invite a User: the service mails the link that sets its password, and answers it too."},
		{name: "list", auth: true, setup: userList, summary: "List the Users."},
		{name: "show", args: "USERNAME", minArgs: 1, maxArgs: 1, auth: true, setup: userShow,
			summary: "Show a User, by username (or email address with -by-email, ID with -by-id)."},
		{name: "accept-invite", setup: userAcceptInvite,
			summary: "Accept an invitation: set the invited User's password and sign it in, as kmsctl login does. " +
				"The invitation link (or its token) and then the password are read from the terminal without echo, or as the first two lines of standard input; no credential is needed."},
		{name: "forgot-password", args: "EMAIL", minArgs: 1, maxArgs: 1, setup: userForgotPassword,
			summary: "Ask the service to mail a password reset link to a User's address (the answer is the same whether the address is known or not); no credential is needed."},
		{name: "reset-password", setup: userResetPassword,
			summary: "Set a new password with the link of a password reset mail; the User's access tokens are revoked. " +
				"The reset link (or its token) and then the password are read from the terminal without echo, or as the first two lines of standard input; no credential is needed."},
	}}
}

var userHeader = []string{"USERNAME", "EMAIL", "STATUS", "ACCOUNT", "FLAGS", "ID"}

func userRow(u *kms.User) []string {
	return []string{u.Username, u.Email, u.Status, u.AccountID, cell(u.Flags), u.ID}
}

func userFields(u *kms.User) table {
	return fields("username", u.Username, "id", u.ID, "email", u.Email, "first name", u.FirstName, "last name", u.LastName,
		"display name", u.DisplayName, "status", u.Status, "account", u.AccountID, "flags", u.Flags, "keys", u.Keys,
		"props", u.Props, "created", u.CreatedAt, "updated", u.UpdatedAt)
}

func userInvite(c *cli, fs *flag.FlagSet) action {
	var in kms.InviteInput
	fs.StringVar(&in.Email, "email", "", "the User's email `ADDRESS` (required)")
	fs.StringVar(&in.FirstName, "first-name", "", "the User's first `NAME` (required)")
	fs.StringVar(&in.LastName, "last-name", "", "the User's last `NAME` (required)")
	fs.StringVar(&in.DisplayName, "display-name", "", "the User's display `NAME`")
	fs.StringVar(&in.AccountID, "account", "", "the User's Account `ID` (default the caller's)")
	permVar(fs, &in.Flags)
	objectVar(fs, &in.Props, "props", "the User's props, a JSON `OBJECT`")
	return func(ctx context.Context, args []string) error {
		in.Username = args[0]
		res, err := c.kc.Invite(ctx, in)
		return shown(c, func(r *kms.InviteResult) table {
			return fields("invited", in.Username, "email", in.Email, "link", r.LoginURL)
		})(res, inFlags(err, inviteWords...))
	}
}

func userList(c *cli, fs *flag.FlagSet) action {
	pf := addPageFlags(fs)
	return func(ctx context.Context, args []string) error {
		return list(ctx, c, pf, c.kc.ListUsers, userHeader, userRow)
	}
}

func userShow(c *cli, fs *flag.FlagSet) action {
	var ref kms.UserRef
	fs.BoolVar(&ref.ByEmail, "by-email", false, "the argument is the User's email address")
	fs.BoolVar(&ref.ByID, "by-id", false, "the argument is the User's ID")
	return func(ctx context.Context, args []string) error {
		ref.Value = args[0]
		return shown(c, userFields)(c.kc.GetUser(ctx, ref))
	}
}
