package harness

import (
	"os/exec"
	"strings"
	"testing"
)

// TestSOPS: the binary is sops at the pinned version.
func TestSOPS(t *testing.T) {
	out, err := exec.Command(SOPS(t), "--version", "--disable-version-check").CombinedOutput()
	if err != nil {
		t.Fatalf("sops --version: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), strings.TrimPrefix(SOPSVersion, "v")) {
		t.Fatalf("sops --version printed %q, want %s", out, SOPSVersion)
	}
}
