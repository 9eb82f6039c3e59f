package main

import (
	"bytes"
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestUsageListsEveryCommand: kmsd -h lists every command of kmsd (the
// subcommands, audit export and version), one line each, and no other.
func TestUsageListsEveryCommand(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-h"}, env{}.get, &out, &out); err != nil {
		t.Fatalf("kmsd -h = %v", err)
	}
	head, _, _ := strings.Cut(out.String(), "\n\n")
	listed := map[string]bool{}
	line := regexp.MustCompile(`(?m)^(?:Usage:)?\s+kmsd ([a-z][a-z-]*(?: export)?)\b`)
	for _, m := range line.FindAllStringSubmatch(head, -1) {
		listed[m[1]] = true
	}
	want := append(slices.Clone(subcommands), "audit export", "version")
	for _, name := range want {
		if !listed[name] {
			t.Errorf("kmsd -h does not list kmsd %s:\n%s", name, head)
		}
	}
	for name := range listed {
		if !slices.Contains(want, name) {
			t.Errorf("kmsd -h lists kmsd %s, which kmsd does not have", name)
		}
	}
	for _, arg := range []string{"version", "-version"} {
		var v bytes.Buffer
		if err := run(context.Background(), []string{arg}, env{}.get, &v, &v); err != nil || !strings.HasPrefix(v.String(), "kmsd ") {
			t.Errorf("kmsd %s = %q, %v; want a line starting with kmsd", arg, v.String(), err)
		}
	}
}
