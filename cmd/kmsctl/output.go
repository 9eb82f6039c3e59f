package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ringkms/kms"
)

// table is what a command prints for people: a header (none for the
// fields of one object) and rows of cells.
type table struct {
	header []string
	rows   [][]string
}

// fields is the table of one object: a row per name and value, in the
// order given (name, value, name, value...).
func fields(pairs ...any) table {
	t := table{}
	for i := 0; i+1 < len(pairs); i += 2 {
		t.rows = append(t.rows, []string{pairs[i].(string) + ":", cell(pairs[i+1])})
	}
	return t
}

// write aligns the table's columns on w.
func (t table) write(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if t.header != nil {
		fmt.Fprintln(tw, strings.Join(t.header, "\t"))
	}
	for _, r := range t.rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// show prints a result on stdout: v as JSON with -json, else t.
func (c *cli) show(v any, t table) error { return c.showOn(c.stdout, v, t) }

// showOn prints a result on w: v as JSON with -json (as the service
// answered it), else t. It is the one writer of kmsctl's results.
func (c *cli) showOn(w io.Writer, v any, t table) error {
	if c.json {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	return t.write(w)
}

// cell is the text of a value in a table: "-" for nothing, times in UTC
// RFC 3339, flags by name, other maps and slices as compact JSON.
func cell(v any) string {
	switch v := v.(type) {
	case nil:
		return "-"
	case string:
		if v == "" {
			return "-"
		}
		return v
	case time.Time:
		if v.IsZero() {
			return "-"
		}
		return v.UTC().Format(time.RFC3339)
	case *time.Time:
		if v == nil {
			return "-"
		}
		return cell(*v)
	case *uint64:
		if v == nil {
			return "-"
		}
		return strconv.FormatUint(*v, 10)
	case kms.Flags:
		return flagList(v)
	case []string:
		return cell(strings.Join(v, ","))
	case fmt.Stringer:
		return v.String()
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Map, reflect.Slice:
		if rv.Len() == 0 {
			return "-"
		}
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Sprint(v)
		}
		return string(b)
	}
	return fmt.Sprint(v)
}

// flagList is flags in name order, comma-separated: a flag set to false
// (which grants nothing) reads name=false.
func flagList(f kms.Flags) string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(f)) {
		if f[name] {
			out = append(out, name)
		} else {
			out = append(out, name+"=false")
		}
	}
	return cell(strings.Join(out, ","))
}

// pageFlags are the flags of a list: -limit, -all, -cursor.
type pageFlags struct {
	limit  int
	all    bool
	cursor string
}

// addPageFlags declares the flags of a list on fs.
func addPageFlags(fs *flag.FlagSet) *pageFlags {
	pf := &pageFlags{}
	fs.IntVar(&pf.limit, "limit", 0, "at most `N` items a page (default the service's, 100)")
	fs.BoolVar(&pf.all, "all", false, "every page, not only the first")
	fs.StringVar(&pf.cursor, "cursor", "", "start at this `CURSOR`, the nextCursor of an earlier page")
	return pf
}

// list prints a list: one page, or with -all every page from the cursor
// on. With -json it prints the service's list object ({data,
// pagination}; with -all, every item and the last page's pagination);
// otherwise a table of row(item) under header, and on stderr the cursor
// of the next page when there is one.
func list[T any](ctx context.Context, c *cli, pf *pageFlags, get func(context.Context, kms.PageRequest) (*kms.List[T], error), header []string, row func(T) []string) error {
	if pf.limit < 0 {
		return fmt.Errorf("-limit %d: want 1 or more", pf.limit)
	}
	req := kms.PageRequest{Cursor: pf.cursor, Limit: pf.limit}
	all := &kms.List[T]{Data: []T{}}
	for {
		page, err := get(ctx, req)
		if err != nil {
			return err
		}
		all.Data = append(all.Data, page.Data...)
		all.Pagination = page.Pagination
		if !pf.all || !page.Pagination.HasMore {
			break
		}
		req.Cursor = page.Pagination.NextCursor
	}
	all.Pagination.Count = len(all.Data)
	t := table{header: header}
	for _, it := range all.Data {
		t.rows = append(t.rows, row(it))
	}
	if err := c.show(all, t); err != nil {
		return err
	}
	if !c.json && all.Pagination.HasMore {
		fmt.Fprintf(c.stderr, "more: -cursor %s (or -all)\n", all.Pagination.NextCursor)
	}
	return nil
}

// shown returns a function that prints the result of a call with the
// table t makes of it, or returns the call's error:
//
//	return shown(c, accountFields)(c.kc.GetAccount(ctx, ref))
func shown[T any](c *cli, t func(T) table) func(T, error) error {
	return func(v T, err error) error {
		if err != nil {
			return err
		}
		return c.show(v, t(v))
	}
}
