package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// readDoc returns a document of the repository's docs/.
func readDoc(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestOperationsCommandList: the list of commands at the top of
// docs/OPERATIONS.md names every command kmsd has, and no other.
func TestOperationsCommandList(t *testing.T) {
	doc := readDoc(t, "OPERATIONS.md")
	_, rest, _ := strings.Cut(doc, "```\n")
	block, _, _ := strings.Cut(rest, "```")
	listed := map[string]bool{}
	for _, line := range strings.Split(block, "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "kmsd" || strings.HasPrefix(f[1], "-") || strings.HasPrefix(f[1], "[") {
			continue
		}
		name := f[1]
		if name == "audit" && len(f) > 2 {
			name = "audit " + f[2]
		}
		listed[name] = true
	}
	want := append(slices.Clone(subcommands), "audit export", "version")
	for _, name := range want {
		if !listed[name] {
			t.Errorf("docs/OPERATIONS.md's command list lacks kmsd %s", name)
		}
	}
	for name := range listed {
		if !slices.Contains(want, name) {
			t.Errorf("docs/OPERATIONS.md lists kmsd %s, which kmsd does not have", name)
		}
	}
}

// TestDocSectionReferences: every "section N" that points into
// docs/OPERATIONS.md names one of its sections.
func TestDocSectionReferences(t *testing.T) {
	ops := readDoc(t, "OPERATIONS.md")
	sections := map[int]bool{}
	for _, m := range regexp.MustCompile(`(?m)^## (\d+)\. `).FindAllStringSubmatch(ops, -1) {
		n, _ := strconv.Atoi(m[1])
		sections[n] = true
	}
	if len(sections) < 10 {
		t.Fatalf("docs/OPERATIONS.md has %d numbered sections; has its shape changed?", len(sections))
	}
	check := func(doc, text string, refs *regexp.Regexp) {
		for _, m := range refs.FindAllStringSubmatch(text, -1) {
			n, _ := strconv.Atoi(m[len(m)-1])
			if !sections[n] {
				t.Errorf("%s refers to section %d of docs/OPERATIONS.md, which has none", doc, n)
			}
		}
	}
	check("docs/OPERATIONS.md", ops, regexp.MustCompile(`[^.]section (\d+)`))
	entries, err := os.ReadDir(filepath.Join("..", "..", "docs"))
	if err != nil {
		t.Fatal(err)
	}
	toOps := regexp.MustCompile(`OPERATIONS\.md,?\s+section\s+(\d+)`)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".md") && e.Name() != "OPERATIONS.md" {
			check("docs/"+e.Name(), readDoc(t, e.Name()), toOps)
		}
	}
}

// TestDocsStandAlone: no document of the repository points to a SPEC.md,
// which is not in it.
func TestDocsStandAlone(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	files = append(files, filepath.Join("..", "..", "README.md"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "SPEC.md") {
			t.Errorf("%s refers to SPEC.md, which is not in the repository", filepath.Base(f))
		}
	}
}

// TestDocSnippetsHaveTheMasterKey: every example of kmsd restore and
// verify-audit run with kmsd stopped gives the master key, as they need.
func TestDocSnippetsHaveTheMasterKey(t *testing.T) {
	ops := readDoc(t, "OPERATIONS.md")
	for _, m := range regexp.MustCompile("(?s)```[a-z]*\n(.*?)```").FindAllStringSubmatch(ops, -1) {
		for _, line := range strings.Split(m[1], "\n") {
			if !regexp.MustCompile(`kmsd (restore|verify-audit) -`).MatchString(line) || strings.Contains(line, "# kmsd running") || strings.Contains(line, "[flags]") {
				continue
			}
			if !strings.Contains(line, "KMS_MASTER_KEY") && !strings.Contains(line, "-master-key-file") && !strings.Contains(line, "-dev") {
				t.Errorf("docs/OPERATIONS.md: %q does not give the master key", strings.TrimSpace(line))
			}
		}
	}
}

// TestSystemdUnitStopsOnConfigErrors: the sample systemd unit of
// docs/OPERATIONS.md does not restart kmsd after exit status 2 (a wrong
// PIN among the configuration errors: each restart would spend one of a
// token's PIN tries) nor 3 (a damaged trail), and says why; a usage error
// is what exits 2 (a wrong PIN: TestMasterKeyTokenErrors).
func TestSystemdUnitStopsOnConfigErrors(t *testing.T) {
	ops := readDoc(t, "OPERATIONS.md")
	_, section, _ := strings.Cut(ops, "## 11. A systemd unit")
	m := regexp.MustCompile("(?s)```ini\n(.*?)```").FindStringSubmatch(section)
	if m == nil {
		t.Fatal("docs/OPERATIONS.md section 11 has no ```ini block")
	}
	unit := m[1]
	settings := map[string]string{}
	var comments strings.Builder
	for _, line := range strings.Split(unit, "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "#") {
			comments.WriteString(line + "\n")
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok {
			settings[k] = v
		}
	}
	if r := settings["Restart"]; r == "" || r == "no" {
		t.Fatalf("the unit does not restart kmsd (Restart=%q): then this test checks nothing", r)
	}
	prevent := strings.Fields(settings["RestartPreventExitStatus"])
	for _, code := range []int{exitCode(usagef("a wrong PIN")), exitCode(exitError{3, nil})} {
		if !slices.Contains(prevent, strconv.Itoa(code)) {
			t.Errorf("the unit restarts kmsd after exit status %d: RestartPreventExitStatus=%s", code, settings["RestartPreventExitStatus"])
		}
	}
	if !strings.Contains(comments.String(), "PIN") {
		t.Errorf("the unit does not say why it does not restart after exit status 2 (a token's PIN tries):\n%s", comments.String())
	}
}
