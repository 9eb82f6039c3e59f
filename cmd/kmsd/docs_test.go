package main

import (
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ringkms/kms/internal/docblock"
)

// readDoc returns a document of the repository's docs/.
func readDoc(t *testing.T, name string) string {
	t.Helper()
	return docblock.Read(t, "docs/"+name)
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

// TestDocsStandAlone: nothing a user reads cites SPEC.md, which is not in
// the repository: not a document (docs/, the README), not the OpenAPI
// document (docs/openapi.json and httpapi/openapi.json), not a comment or
// message of the Go code (godoc included). The project's documents are
// the reference.
func TestDocsStandAlone(t *testing.T) {
	spec := regexp.MustCompile(`\bSPEC\b`)
	eachRepoLine(t, func(rel string) bool {
		// This test names what it looks for.
		return rel != filepath.Join("cmd", "kmsd", "docs_test.go") &&
			(strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, ".md") || strings.HasSuffix(rel, ".json"))
	}, func(rel string, n int, line string) {
		if spec.MatchString(line) {
			t.Errorf("%s:%d cites SPEC, which is not in the repository: %s", rel, n, strings.TrimSpace(line))
		}
	})
}

// eachRepoLine calls line with every line (numbered from 1) of every file
// of the repository, outside .git, data and testdata, whose path relative
// to the repository's root want accepts.
func eachRepoLine(t *testing.T, want func(rel string) bool, line func(rel string, n int, text string)) {
	t.Helper()
	root := filepath.Join("..", "..")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); name == ".git" || name == "data" || name == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil || !want(rel) {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, text := range strings.Split(string(b), "\n") {
			line(rel, i+1, text)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
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

// opsDoc is the headings of docs/OPERATIONS.md: the title of each
// numbered section, and the section every title (of a section or of a
// heading within one), in lower case, belongs to.
type opsDoc struct {
	titles map[int]string
	within map[string]int
}

func readOpsDoc(t *testing.T) opsDoc {
	t.Helper()
	titles, within := map[int]string{}, map[string]int{}
	numbered := regexp.MustCompile(`^## (\d+)\. (.+)$`)
	sub := regexp.MustCompile(`^###+ (.+)$`)
	n := 0
	for _, line := range strings.Split(readDoc(t, "OPERATIONS.md"), "\n") {
		if m := numbered.FindStringSubmatch(line); m != nil {
			n, _ = strconv.Atoi(m[1])
			titles[n] = m[2]
			within[strings.ToLower(m[2])] = n
		} else if m := sub.FindStringSubmatch(line); m != nil && n > 0 {
			within[strings.ToLower(m[1])] = n
		}
	}
	return opsDoc{titles, within}
}

var (
	opsSectionRef = regexp.MustCompile(`OPERATIONS\.md,?\s+section\s+(\d+)(?:,\s+"([^"]+)")?`)
	opsTitleRef   = regexp.MustCompile(`OPERATIONS\.md,\s+(?:"([^"]+)"|([A-Za-z][^),.;"]*))`)
)

// refs returns what text points at in docs/OPERATIONS.md ("section 13",
// "section 2, "Rotating the master key"", "The master key"...) that the
// document lacks, and how many references it found.
func (d opsDoc) refs(text string) (missing []string, found int) {
	titles, within := d.titles, d.within
	text = strings.ReplaceAll(text, `\"`, `"`) // inside a Go string
	for _, m := range opsSectionRef.FindAllStringSubmatch(text, -1) {
		found++
		n, _ := strconv.Atoi(m[1])
		if titles[n] == "" {
			missing = append(missing, m[0])
		} else if m[2] != "" && within[strings.ToLower(m[2])] != n {
			missing = append(missing, m[0])
		}
	}
	for _, m := range opsTitleRef.FindAllStringSubmatch(text, -1) {
		title := strings.TrimSpace(m[1] + m[2])
		if strings.HasPrefix(title, "section ") {
			continue // the form above
		}
		found++
		if _, ok := within[strings.ToLower(title)]; !ok {
			missing = append(missing, m[0])
		}
	}
	return missing, found
}

// TestSourceSectionReferences: every section of docs/OPERATIONS.md that
// the Go code names, by number or by title, in a message or a comment, is
// one the document has.
func TestSourceSectionReferences(t *testing.T) {
	ops := readOpsDoc(t)
	eachRepoLine(t, func(rel string) bool {
		return strings.HasSuffix(rel, ".go") && !strings.HasSuffix(rel, "_test.go")
	}, func(rel string, n int, line string) {
		if missing, _ := ops.refs(line); len(missing) > 0 {
			t.Errorf("%s:%d names %q, which docs/OPERATIONS.md does not have", rel, n, missing)
		}
	})
}

// TestPostgresBackupRefusal: kmsd backup and kmsd restore on a PostgreSQL
// store refuse, naming the section of docs/OPERATIONS.md that says how to
// back such a store up; the document has it.
func TestPostgresBackupRefusal(t *testing.T) {
	ops := readOpsDoc(t)
	for _, cmd := range [][]string{{"backup"}, {"restore", "-i", "backup.rkb"}} {
		args := append(cmd, "-store", "postgres://kms@127.0.0.1:1/kms", "-data", t.TempDir())
		err := run(context.Background(), args, env{"KMS_MASTER_KEY": newKey()}.get, io.Discard, io.Discard)
		if err == nil {
			t.Fatalf("kmsd %v succeeded", args)
		}
		missing, found := ops.refs(err.Error())
		if found == 0 || len(missing) > 0 {
			t.Errorf("kmsd %s -store postgres://... = %q: names %d sections of docs/OPERATIONS.md, of which the document lacks %q", cmd[0], err, found, missing)
		}
	}
}

// TestDeactivateNamesKmsctl: where a document or a message of kmsd tells
// how to deactivate an API key over HTTP ("active": false), it names the
// kmsctl command that does it too.
func TestDeactivateNamesKmsctl(t *testing.T) {
	const want = "kmsctl apikey update -active false"
	deactivate := regexp.MustCompile(`\\?"active\\?":\s*false`)
	space := regexp.MustCompile(`\s+`)
	root := filepath.Join("..", "..")
	files, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	gos, _ := filepath.Glob("*.go")
	files = append(append(files, filepath.Join(root, "README.md")), gos...)
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// The unit of text: a paragraph of a document, a declaration
		// (up to a blank line) of Go.
		for _, block := range strings.Split(string(b), "\n\n") {
			if !deactivate.MatchString(block) {
				continue
			}
			checked++
			flat := space.ReplaceAllString(strings.ReplaceAll(block, `\n"+`, " "), " ")
			if !strings.Contains(flat, want) {
				t.Errorf("%s tells how to deactivate an API key over HTTP without naming %s:\n%s", f, want, block)
			}
		}
	}
	if checked < 3 {
		t.Errorf("found %d places that deactivate a key over HTTP; has their wording changed?", checked)
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
