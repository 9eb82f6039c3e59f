// Package docblock reads the project's documents for the tests that keep
// them and the code in step: a document whole, a fenced block by its info
// string, a section by its heading. Paths are from the module's root
// (docs/FORMAT.md), wherever the test runs.
package docblock

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Read returns the document at path, failing the test when it cannot.
func Read(t testing.TB, path string) string {
	t.Helper()
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Fenced returns the text of the fenced block of the document at path
// whose info string is info ("json format-example", "text actions"),
// failing the test when there is none.
func Fenced(t testing.TB, path, info string) string {
	t.Helper()
	_, rest, ok := strings.Cut(Read(t, path), "```"+info+"\n")
	block, _, closed := strings.Cut(rest, "```")
	if !ok || !closed {
		t.Fatalf("%s has no %s block", path, info)
	}
	return block
}

// Section returns the text of the document at path from the line
// heading ("## Transit (Vault's interface)") up to the next heading of
// its level or a higher one, failing the test when there is none.
func Section(t testing.TB, path, heading string) string {
	t.Helper()
	_, rest, ok := strings.Cut(Read(t, path), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("%s has no section %q", path, heading)
	}
	level := heading[:strings.IndexByte(heading+" ", ' ')]
	for i := 0; i < len(rest); {
		line, _, _ := strings.Cut(rest[i:], "\n")
		if marks := line[:strings.IndexByte(line+" ", ' ')]; strings.Trim(marks, "#") == "" && marks != "" && len(marks) <= len(level) {
			return rest[:i]
		}
		i += len(line) + 1
	}
	return rest
}

// moduleRoot is the folder of the go.mod above the working directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", os.ErrNotExist
		}
		dir = parent
	}
}
