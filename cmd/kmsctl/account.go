package main

import (
	"context"
	"flag"

	"github.com/ringkms/kms"
)

func accountCommands() *command {
	return &command{name: "account", summary: "Accounts, the tenants: create, list, show, update, delete.", subs: []*command{
		{name: "create", args: "UID", minArgs: 1, maxArgs: 1, auth: true, setup: accountCreate, summary: "Create an Account with a unique UID."},
		{name: "list", auth: true, setup: accountList, summary: "List the Accounts."},
		{name: "show", args: "ID", minArgs: 1, maxArgs: 1, auth: true, setup: accountShow, summary: "Show an Account, by ID (or UID with -by-uid)."},
		{name: "update", args: "ID", minArgs: 1, maxArgs: 1, auth: true, setup: accountUpdate,
			summary: "Change an Account's UID, notes or props (the members not given stay as they are)."},
		{name: "delete", args: "ID", minArgs: 1, maxArgs: 1, auth: true, setup: accountDelete,
			summary: "Delete an Account that has no API keys or Users left."},
	}}
}

var accountHeader = []string{"ID", "UID", "NOTES", "CREATED"}

func accountRow(a *kms.Account) []string {
	return []string{a.ID, a.UID, cell(a.Notes), cell(a.CreatedAt)}
}

func accountFields(a *kms.Account) table {
	return fields("id", a.ID, "uid", a.UID, "notes", a.Notes, "props", a.Props, "created", a.CreatedAt, "updated", a.UpdatedAt)
}

// accountRefFlag declares -by-uid and returns how to name an Account by
// the command's argument.
func accountRefFlag(fs *flag.FlagSet) func(string) kms.AccountRef {
	byUID := fs.Bool("by-uid", false, "the argument is the Account's UID, not its ID")
	return func(v string) kms.AccountRef { return kms.AccountRef{Value: v, ByUID: *byUID} }
}

func accountCreate(c *cli, fs *flag.FlagSet) action {
	var in kms.AccountInput
	fs.StringVar(&in.Notes, "notes", "", "notes on the Account")
	objectVar(fs, &in.Props, "props", "the Account's props, a JSON `OBJECT`")
	return func(ctx context.Context, args []string) error {
		in.UID = args[0]
		return shown(c, accountFields)(c.kc.CreateAccount(ctx, in))
	}
}

func accountList(c *cli, fs *flag.FlagSet) action {
	pf := addPageFlags(fs)
	return func(ctx context.Context, args []string) error {
		return list(ctx, c, pf, c.kc.ListAccounts, accountHeader, accountRow)
	}
}

func accountShow(c *cli, fs *flag.FlagSet) action {
	ref := accountRefFlag(fs)
	return func(ctx context.Context, args []string) error {
		return shown(c, accountFields)(c.kc.GetAccount(ctx, ref(args[0])))
	}
}

func accountUpdate(c *cli, fs *flag.FlagSet) action {
	ref := accountRefFlag(fs)
	var in kms.AccountUpdate
	uid := fs.String("uid", "", "the new `UID`")
	notes := fs.String("notes", "", "the new notes")
	objectVar(fs, &in.Props, "props", "the new props, a JSON `OBJECT` (replaces them)")
	return func(ctx context.Context, args []string) error {
		if isSet(fs, "uid") {
			in.UID = uid
		}
		if isSet(fs, "notes") {
			in.Notes = notes
		}
		return shown(c, accountFields)(c.kc.UpdateAccount(ctx, ref(args[0]), in))
	}
}

func accountDelete(c *cli, fs *flag.FlagSet) action {
	ref := accountRefFlag(fs)
	return func(ctx context.Context, args []string) error {
		return shown(c, accountFields)(c.kc.DeleteAccount(ctx, ref(args[0])))
	}
}
