package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"strings"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/client"
)

func activityCommands() *command {
	return &command{name: "activity", summary: "The audit trail: search, show.", subs: []*command{
		{name: "search", auth: true, setup: activitySearch,
			summary: "Search the activity records, oldest first; every filter given must match. A search sees the trail as it was at its first page."},
		{name: "show", args: "ID", minArgs: 1, maxArgs: 1, auth: true, setup: activityShow, summary: "Show an activity record."},
	}}
}

var activityHeader = []string{"SEQ", "TIME", "ACTION", "RING", "KEYID", "VALID", "RESULT"}

func activityRow(a *kms.Activity) []string {
	return []string{cell(a.Seq), activityTime(a.CreatedAt), a.Action, cell(a.Ring), a.KeyID, cell(a.Valid), cell(a.Props["result"])}
}

// activityTime is the time of a record, epoch milliseconds, as RFC 3339
// in UTC with its milliseconds: the trail's filters work to the
// millisecond, so that a TIME given back to -from or -until finds its
// record (to the second, -until would miss it).
func activityTime(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

func activitySearch(c *cli, fs *flag.FlagSet) action {
	pf := addPageFlags(fs)
	var f client.ActivityFilter
	fs.StringVar(&f.Action, "action", "", "the `ACTION`: encrypt, decrypt, keyring.rotate, apikey.create...")
	fs.StringVar(&f.Ring, "ring", "", "the key ring's `NAME`")
	fs.StringVar(&f.KeyID, "keyid", "", "the API key or User that acted (its `ID`)")
	fs.StringVar(&f.AccountID, "account", "", "the Account `ID` the credential acted for")
	fs.StringVar(&f.AccountUID, "account-uid", "", "the Account, by `UID`")
	boolPtrVar(fs, &f.Valid, "valid", "granted (true) or refused (false) operations")
	timeVar(fs, &f.Start, "from", "records at or after")
	timeVar(fs, &f.End, "until", "records at or before")
	fs.Func("prop", "a `NAME=VALUE` that the record's props must hold (VALUE as JSON when it is a number or boolean, else a string); repeatable", func(s string) error {
		name, val, ok := strings.Cut(s, "=")
		if !ok || name == "" {
			return errors.New("want NAME=VALUE")
		}
		if f.Props == nil {
			f.Props = map[string]any{}
		}
		f.Props[name] = scalar(val)
		return nil
	})
	return func(ctx context.Context, args []string) error {
		return list(ctx, c, pf, func(ctx context.Context, p kms.PageRequest) (*kms.List[*kms.Activity], error) {
			return c.kc.SearchActivity(ctx, f, p)
		}, activityHeader, activityRow)
	}
}

// scalar is the value of -prop: a JSON number, boolean or string as
// written, else the text itself.
func scalar(s string) any {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) == nil && !dec.More() {
		switch v.(type) {
		case json.Number, bool, string:
			return v
		}
	}
	return s
}

func activityShow(c *cli, fs *flag.FlagSet) action {
	return func(ctx context.Context, args []string) error {
		return shown(c, func(a *kms.Activity) table {
			return fields("id", a.ID, "seq", a.Seq, "time", activityTime(a.CreatedAt), "action", a.Action, "ring", a.Ring,
				"keyid", a.KeyID, "account", a.AccountID, "valid", a.Valid, "props", a.Props, "prev", a.Prev, "digest", a.Digest)
		})(c.kc.GetActivity(ctx, args[0]))
	}
}
