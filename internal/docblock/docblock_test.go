package docblock

import (
	"strings"
	"testing"
)

// TestBlocks: a fenced block by its info string, and a section up to the
// next heading of its level, of the project's own documents.
func TestBlocks(t *testing.T) {
	if block := Fenced(t, "docs/PERMISSIONS.md", "text actions"); !strings.Contains(block, "apikey.create") || strings.Contains(block, "```") {
		t.Errorf("Fenced(text actions) = %q", block)
	}
	s := Section(t, "docs/PERMISSIONS.md", "## Transit (Vault's interface)")
	if !strings.Contains(s, "/v1/transit/keys/{name}") || strings.Contains(s, "\n## ") {
		t.Errorf("Section(Transit) = %q", s)
	}
}
