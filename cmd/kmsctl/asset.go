package main

import (
	"context"
	"flag"

	"github.com/ringkms/kms"
)

func assetCommands() *command {
	return &command{name: "asset", summary: "Assets, the records that encrypt calls create: show, search, lineage.", subs: []*command{
		{name: "show", args: "ID", minArgs: 1, maxArgs: 1, auth: true, setup: assetShow, summary: "Show an Asset."},
		{name: "search", auth: true, setup: assetSearch, summary: "Search the Assets, oldest first; every filter given must match."},
		{name: "lineage", args: "ID", minArgs: 1, maxArgs: 1, auth: true, setup: assetLineage,
			summary: "Show an Asset's ancestors and descendants, nearest first."},
	}}
}

var assetHeader = []string{"ID", "CREATED", "RING ID", "APIKEY", "PARENTS", "DATA"}

func assetRow(a *kms.Asset) []string {
	return []string{a.ID, cell(a.CreatedAt), a.KeyRingID, a.APIKeyID, cell(a.Parents), cell(a.Data)}
}

func assetFields(a *kms.Asset) table {
	return fields("id", a.ID, "created", a.CreatedAt, "updated", a.UpdatedAt, "ring id", a.KeyRingID, "apikey", a.APIKeyID,
		"account", a.AccountID, "parents", a.Parents, "data", a.Data)
}

func assetShow(c *cli, fs *flag.FlagSet) action {
	return func(ctx context.Context, args []string) error {
		return shown(c, assetFields)(c.kc.GetAsset(ctx, args[0]))
	}
}

func assetSearch(c *cli, fs *flag.FlagSet) action {
	pf := addPageFlags(fs)
	var f kms.AssetFilter
	fs.StringVar(&f.KeyRingID, "ring-id", "", "created through the key ring `ID`")
	fs.StringVar(&f.KeyID, "key-id", "", "created or updated by encrypt calls that handed out the key `ID`")
	fs.StringVar(&f.APIKeyID, "apikey-id", "", "created by the API key `ID`")
	fs.StringVar(&f.AccountID, "account", "", "of the Account `ID`")
	listVar(fs, &f.Parents, "parent", "with the parent Asset `ID`")
	timeVar(fs, &f.Start, "from", "created at or after")
	timeVar(fs, &f.End, "until", "created at or before")
	objectVar(fs, &f.Data, "data", "whose data has these members, a JSON `OBJECT`")
	return func(ctx context.Context, args []string) error {
		return list(ctx, c, pf, func(ctx context.Context, p kms.PageRequest) (*kms.List[*kms.Asset], error) {
			return c.kc.SearchAssets(ctx, f, p)
		}, assetHeader, assetRow)
	}
}

func assetLineage(c *cli, fs *flag.FlagSet) action {
	depth := fs.Int("depth", 0, "how many generations each way, 1 to 16 (default 3)")
	return func(ctx context.Context, args []string) error {
		return shown(c, func(l *kms.Lineage) table {
			t := table{header: []string{"SIDE", "DEPTH", "ID", "PARENTS"}}
			for _, side := range []struct {
				name  string
				nodes []*kms.LineageNode
			}{{"ancestor", l.Ancestors}, {"descendant", l.Descendants}} {
				for _, n := range side.nodes {
					t.rows = append(t.rows, []string{side.name, cell(n.Depth), n.ID, cell(n.Parents)})
				}
			}
			return t
		})(c.kc.GetLineage(ctx, args[0], *depth))
	}
}
