package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/ringkms/kms"
)

func apikeyCommands() *command {
	return &command{name: "apikey", summary: "API keys: create, list, show, update, revoke.", subs: []*command{
		{name: "create", auth: true, setup: apikeyCreate,
			summary: "Create an API key of an Account (-account or -account-uid) with permission flags (-flag, -flags; docs/PERMISSIONS.md). Its secret is printed this once."},
		{name: "list", auth: true, setup: apikeyList, summary: "List the API keys (of one Account with -account), without their secrets."},
		{name: "show", args: "ID", minArgs: 1, maxArgs: 1, auth: true, setup: apikeyShow, summary: "Show an API key."},
		{name: "update", args: "ID", minArgs: 1, maxArgs: 1, auth: true, setup: apikeyUpdate,
			summary: "Change an API key: its flags and props (-op merge, replace or delete the members given), -active, or its Account."},
		{name: "revoke", args: "ID", minArgs: 1, maxArgs: 1, auth: true, setup: apikeyRevoke,
			summary: "Delete an API key: it stops authenticating at once."},
	}}
}

var apikeyHeader = []string{"KEYID", "ACTIVE", "ACCOUNT", "FLAGS", "CREATED"}

func apikeyRow(k *kms.APIKey) []string {
	return []string{k.KeyID, cell(k.Active), k.AccountID, cell(k.Flags), cell(k.CreatedAt)}
}

func apikeyFields(k *kms.APIKey, more ...any) table {
	return fields(append([]any{"keyid", k.KeyID, "active", k.Active, "account", k.AccountID, "flags", k.Flags,
		"props", k.Props, "owner", k.OwnerID, "created", k.CreatedAt, "updated", k.UpdatedAt}, more...)...)
}

func apikeyCreate(c *cli, fs *flag.FlagSet) action {
	var in kms.APIKeyInput
	fs.StringVar(&in.AccountID, "account", "", "the Account's `ID`")
	uid := fs.String("account-uid", "", "the Account's `UID`, instead of -account")
	permVar(fs, &in.Flags)
	objectVar(fs, &in.Props, "props", "the key's props, a JSON `OBJECT`")
	return func(ctx context.Context, args []string) error {
		if (in.AccountID == "") == (*uid == "") {
			return usagef("kmsctl apikey create", "give the Account: -account ID or -account-uid UID")
		}
		if *uid != "" {
			in.AccountID, in.AccountByUID = *uid, true
		}
		if in.Flags == nil {
			in.Flags = kms.Flags{}
		}
		k, err := c.kc.CreateAPIKey(ctx, in)
		if err != nil {
			return err
		}
		if err := c.show(k, apikeyFields(k, "secret", k.Key)); err != nil {
			return err
		}
		if !c.json {
			fmt.Fprintln(c.stderr, "The secret is shown this once: the service keeps only its digest.")
		}
		return nil
	}
}

func apikeyList(c *cli, fs *flag.FlagSet) action {
	pf := addPageFlags(fs)
	account := fs.String("account", "", "only the keys of the Account `ID`")
	return func(ctx context.Context, args []string) error {
		get := c.kc.ListAPIKeys
		if *account != "" {
			get = func(ctx context.Context, p kms.PageRequest) (*kms.List[*kms.APIKey], error) {
				return c.kc.ListAccountAPIKeys(ctx, kms.AccountRef{Value: *account}, p)
			}
		}
		return list(ctx, c, pf, get, apikeyHeader, apikeyRow)
	}
}

func apikeyShow(c *cli, fs *flag.FlagSet) action {
	return func(ctx context.Context, args []string) error {
		return shown(c, func(k *kms.APIKey) table { return apikeyFields(k) })(c.kc.GetAPIKey(ctx, args[0]))
	}
}

func apikeyUpdate(c *cli, fs *flag.FlagSet) action {
	in := kms.APIKeyUpdate{}
	fs.StringVar(&in.Op, "op", kms.UpdateMerge, "what -flag, -flags and -props do: merge (set the members given), replace (they become all of them) or delete (remove the members named)")
	boolPtrVar(fs, &in.Active, "active", "activate or deactivate the key")
	permVar(fs, &in.Flags)
	objectVar(fs, &in.Props, "props", "props, a JSON `OBJECT`")
	account := fs.String("move-to-account", "", "move the key to the Account `ID` (needs accounts.all)")
	return func(ctx context.Context, args []string) error {
		in.Ref = kms.APIKeyRef{Value: args[0]}
		if *account != "" {
			in.References = &kms.APIKeyRefs{AccountID: *account}
		}
		return shown(c, func(r *kms.APIKeyUpdateResult) table {
			return fields("keyid", r.KeyID, "op", r.Op, "active", r.Active, "account", r.References.AccountID, "flags", r.Flags, "props", r.Props)
		})(c.kc.UpdateAPIKey(ctx, in))
	}
}

func apikeyRevoke(c *cli, fs *flag.FlagSet) action {
	return func(ctx context.Context, args []string) error {
		return shown(c, func(r *kms.DeleteAPIKeyResult) table {
			return fields("revoked", r.APIKey)
		})(c.kc.DeleteAPIKey(ctx, kms.APIKeyRef{Value: args[0]}))
	}
}
