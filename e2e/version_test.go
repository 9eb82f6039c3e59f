package e2e

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestVersion: kmsd version, kmsd -version, kmsctl version and kmsctl
// -version print the program, its module version and the revision it was
// built from.
func TestVersion(t *testing.T) {
	needKmsd(t)
	if revision == "" && os.Getenv("CI") == "true" {
		t.Fatal("no git revision for the build: CI runs in a git clone")
	}
	for _, c := range []struct {
		bin  string
		args []string
		name string
	}{
		{kmsdPath, []string{"version"}, "kmsd"},
		{kmsdPath, []string{"-version"}, "kmsd"},
		{kmsctlPath, []string{"version"}, "kmsctl"},
		{kmsctlPath, []string{"-version"}, "kmsctl"},
	} {
		out, err := exec.Command(c.bin, c.args...).Output()
		line := strings.TrimSpace(string(out))
		if err != nil || !strings.HasPrefix(line, c.name+" ") || strings.Count(line, "\n") != 0 {
			t.Errorf("%s %v = %q, %v; want one line starting %q", c.name, c.args, line, err, c.name+" ")
		}
		if revision != "" && !strings.Contains(line, revision) {
			t.Errorf("%s %v = %q, want the revision %s", c.name, c.args, line, revision)
		}
	}
}
