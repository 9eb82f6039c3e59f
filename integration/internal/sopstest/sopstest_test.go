package sopstest

import (
	"os/exec"
	"strings"
	"testing"
)

// TestBinary: the binary is sops at the pinned version.
func TestBinary(t *testing.T) {
	out, err := exec.Command(Binary(t), "--version", "--disable-version-check").CombinedOutput()
	if err != nil {
		t.Fatalf("sops --version: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), strings.TrimPrefix(Version, "v")) {
		t.Fatalf("sops --version printed %q, want %s", out, Version)
	}
}
