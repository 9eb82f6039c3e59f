package main

import (
	"strings"
	"testing"
)

// TestVersionFlag: kmsctl -version and --version print what kmsctl
// version prints, as kmsd -version does for kmsd, and kmsctl -h lists the
// command.
func TestVersionFlag(t *testing.T) {
	e := env{"KMSCTL_CONFIG_DIR": t.TempDir()}
	want := kmsctl(t, e, "", "version").want(t, 0, "version").stdout
	if !strings.HasPrefix(want, "kmsctl ") || strings.Count(want, "\n") != 1 {
		t.Fatalf("kmsctl version printed %q, want one line starting with kmsctl", want)
	}
	for _, arg := range []string{"-version", "--version"} {
		r := kmsctl(t, e, "", arg).want(t, 0, "kmsctl "+arg)
		if r.stdout != want || r.stderr != "" {
			t.Errorf("kmsctl %s printed %q, stderr %q; want %q", arg, r.stdout, r.stderr, want)
		}
	}
	if help := kmsctl(t, e, "", "-h").want(t, 0, "kmsctl -h").stdout; !strings.Contains(help, "\n  version ") {
		t.Errorf("kmsctl -h does not list version:\n%s", help)
	}
}
