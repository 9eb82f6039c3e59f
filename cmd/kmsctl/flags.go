package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ringkms/kms"
)

// Flags whose values are more than a string or a number: each binds a
// field of the request it fills, and a bad value is a usage error when
// the flags are parsed.

// objectVar declares a flag whose value is a JSON object, stored in *m.
// Numbers keep their digits (json.Number).
func objectVar(fs *flag.FlagSet, m *map[string]any, name, usage string) {
	fs.Func(name, usage, func(s string) error {
		v, err := parseObject([]byte(s))
		if err != nil {
			return err
		}
		*m = v
		return nil
	})
}

// parseObject parses a JSON object, numbers as json.Number.
func parseObject(b []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, errors.New("want a JSON object, such as {\"name\": \"value\"}")
	}
	if dec.More() {
		return nil, errors.New("want one JSON object")
	}
	return m, nil
}

// listVar declares a flag that may be given many times, each value
// appended to *l.
func listVar(fs *flag.FlagSet, l *[]string, name, usage string) {
	fs.Func(name, usage+"; repeatable", func(s string) error {
		*l = append(*l, s)
		return nil
	})
}

// boolPtrVar declares a flag whose value is true or false, stored in *b;
// *b stays nil when the flag is not given.
func boolPtrVar(fs *flag.FlagSet, b **bool, name, usage string) {
	fs.Func(name, usage+" (true or false)", func(s string) error {
		v, err := strconv.ParseBool(s)
		if err != nil {
			return errors.New("want true or false")
		}
		*b = &v
		return nil
	})
}

// timeVar declares a flag whose value is a time, stored in *ms as epoch
// milliseconds: RFC 3339 (2026-05-01T12:00:00Z), a date (2026-05-01,
// midnight UTC), a duration before now (24h), or epoch milliseconds.
func timeVar(fs *flag.FlagSet, ms **int64, name, usage string) {
	fs.Func(name, usage+": `TIME` as RFC 3339, a date, a duration ago (24h) or epoch milliseconds", func(s string) error {
		t, err := parseTime(s, time.Now())
		if err != nil {
			return err
		}
		v := t.UnixMilli()
		*ms = &v
		return nil
	})
}

// parseTime parses the value of a time flag, relative to now for a
// duration.
func parseTime(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.UnixMilli(n), nil
	}
	return time.Time{}, fmt.Errorf("%q is not a time: want RFC 3339, YYYY-MM-DD, a duration ago such as 24h, or epoch milliseconds", s)
}

// permVar declares -flag (repeatable) and -flags (a JSON object), which
// set permission flags in *f, in the order given; *f stays nil when
// neither is given.
func permVar(fs *flag.FlagSet, f *kms.Flags) {
	set := func(name string, v bool) {
		if *f == nil {
			*f = kms.Flags{}
		}
		(*f)[name] = v
	}
	fs.Func("flag", "grant the permission flag `NAME` (keyring.payments.encrypt); NAME=false sets it to false; repeatable", func(s string) error {
		name, val, hasVal := strings.Cut(s, "=")
		v := true
		if hasVal {
			var err error
			if v, err = strconv.ParseBool(val); err != nil {
				return fmt.Errorf("%q: want NAME or NAME=true|false", s)
			}
		}
		if name == "" {
			return errors.New("want a flag name")
		}
		set(name, v)
		return nil
	})
	fs.Func("flags", "the permission flags as a JSON `OBJECT`, {\"keyring.payments.encrypt\": true}", func(s string) error {
		var m map[string]bool
		if err := json.Unmarshal([]byte(s), &m); err != nil || m == nil {
			return errors.New("want a JSON object of flag names to true or false")
		}
		for name, v := range m {
			set(name, v)
		}
		return nil
	})
}

// isSet reports whether the flag name was given on the command line.
func isSet(fs *flag.FlagSet, name string) bool {
	found := false
	fs.Visit(func(f *flag.Flag) { found = found || f.Name == name })
	return found
}
