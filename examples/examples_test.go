package examples_test

// The examples are programs a user copies: each main.go, alone in a module
// of the user's own that requires github.com/ringkms/kms, must build and
// run. So each is copied here, alone, into a fresh module (its go.mod
// points at this checkout with a replace directive, and nothing is
// downloaded: GOPROXY=off), built there, and run against its own temporary
// data, where it must exit 0 and print what it promises; then run again on
// the same data, as -data DIR lets a user do. This is how CI keeps them
// working. Skipped with -short, but for the check of their imports.

import (
	"bytes"
	"context"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ringkms/kms/internal/kmsdtest"
)

// modulePath is the path of the module the examples belong to.
const modulePath = "github.com/ringkms/kms"

func TestExamples(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the example programs; skipped with -short")
	}
	cases := []struct {
		name  string
		args  func(data string) []string
		want  []string // lines (or parts of lines) of the output of each run
		first []string // ... of the first run only
		again []string // ... of the second run, on the first one's data
	}{
		{"inprocess", func(data string) []string { return []string{"-data", data} },
			[]string{`decrypt: key `, `asset valid: true`, `decrypted: "Q3 revenue: up 12%"`},
			[]string{"acting as app:inprocess-example"}, []string{"acting as app:inprocess-example"}},
		{"envelope", func(data string) []string { return []string{"-data", data} },
			[]string{"opened: asset valid: true; identical: true", "tampered copy refused: ", "other associated data refused: "},
			[]string{`created ring "files"`}, []string{`ring "files" exists`}},
		{"mounted", func(data string) []string { return []string{"-data", data} },
			[]string{"GET /hello: hello from the application", "GET /kms/healthz: ok", "shut down"},
			[]string{"GET /kms/ks/keyrings: 1 ring(s)"}, []string{"GET /kms/ks/keyrings: 2 ring(s)"}},
		{"client", func(data string) []string { return []string{"-start", "-data", data} },
			[]string{"decrypt gave it back: true", "the limited key may not rotate (403)", "stopped kmsd: exit status 0"}, nil, nil},
	}
	var names []string
	for _, tc := range cases {
		names = append(names, tc.name)
	}
	slices.Sort(names)
	if dirs := exampleDirs(t); !slices.Equal(dirs, names) {
		t.Fatalf("examples/ holds %v, the cases are %v: give every example a case (and no case without its example)", dirs, names)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	goBin := goTool()
	env := exampleEnv(goBin)
	kmsdtest.TrackSources() // the examples are built here, from the whole module
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			mod := userModule(t, root, tc.name)
			bin := filepath.Join(dir, tc.name)
			build := exec.Command(goBin, "build", "-o", bin, ".")
			build.Dir, build.Env = mod, env
			if out, err := build.CombinedOutput(); err != nil {
				t.Fatalf("go build of examples/%s/main.go alone in a module of its own: %v\n%s", tc.name, err, out)
			}
			tidySum(t, mod, bin, env)

			data := filepath.Join(dir, "data")
			for run, extra := range [][]string{tc.first, tc.again} {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
				defer cancel()
				cmd := exec.CommandContext(ctx, bin, tc.args(data)...)
				// On timeout, SIGTERM first: examples/client then stops its kmsd.
				cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
				cmd.WaitDelay = 30 * time.Second
				// In the user's module: examples/client -start builds kmsd there.
				cmd.Dir, cmd.Env = mod, env
				var stdout, stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				if err := cmd.Run(); err != nil {
					t.Fatalf("%s, run %d on %s: %v (context: %v)\nstdout:\n%s\nstderr:\n%s", tc.name, run+1, data, err, ctx.Err(), &stdout, &stderr)
				}
				out := stdout.String()
				for _, w := range append(tc.want, extra...) {
					if !strings.Contains(out, w) {
						t.Errorf("%s, run %d: output has no %q\nstdout:\n%s\nstderr:\n%s", tc.name, run+1, w, out, &stderr)
					}
				}
				t.Logf("%s, run %d:\n%s", tc.name, run+1, out)
			}
		})
	}
}

// TestClientStartOutsideAModule: examples/client -start run where the go
// command finds no source of kmsd (outside any module) says what to do.
func TestClientStartOutsideAModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs examples/client; skipped with -short")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	env := exampleEnv(goTool())
	mod := userModule(t, root, "client")
	bin := filepath.Join(t.TempDir(), "client")
	build := exec.Command(goTool(), "build", "-o", bin, ".")
	build.Dir, build.Env = mod, env
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build of examples/client: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "-start")
	cmd.Dir, cmd.Env = t.TempDir(), env
	out, err := cmd.CombinedOutput()
	want := "Run this in the directory of a module that requires github.com/ringkms/kms (go get github.com/ringkms/kms), or in a checkout of ringkms"
	if err == nil || !strings.Contains(string(out), want) {
		t.Errorf("client -start outside a module = %v:\n%s\nwant an error that says %q", err, out, want)
	}
}

// TestExampleImports checks, without building anything, that no example
// imports a package a user's module could not: one of the examples' own
// (examples/internal/..., a helper beside them) or an internal package of
// ringkms. TestExamples builds them to be sure; this says why at once.
func TestExampleImports(t *testing.T) {
	for _, name := range exampleDirs(t) {
		path := filepath.Join(name, "main.go")
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, spec := range f.Imports {
			imp, _ := strconv.Unquote(spec.Path.Value)
			if !strings.HasPrefix(imp, modulePath+"/") {
				continue
			}
			if strings.HasPrefix(imp, modulePath+"/examples") || slices.Contains(strings.Split(imp, "/"), "internal") {
				t.Errorf("examples/%s imports %s: a user who copies main.go cannot import it; inline what it needs", path, imp)
			}
		}
	}
}

// TestExampleSettings checks that the examples read the client settings
// under the names every client reads (package client's FromEnv, kmsctl,
// kmsbench), so that one shell set up for kmsctl runs them too: no name
// of their own for the service's URL or the API key.
func TestExampleSettings(t *testing.T) {
	shared := map[string]bool{"KMS_ADDR": true, "KMS_API_KEY": true, "KMS_API_KEY_FILE": true, "KMS_CACERT": true,
		// kmsd's, for the kmsd that examples/client -start runs
		"KMS_MASTER_KEY": true, "KMS_BOOTSTRAP_API_KEY": true}
	kmsName := regexp.MustCompile(`\bKMS[A-Z]*_[A-Z_]+\b`)
	for _, name := range exampleDirs(t) {
		src, err := os.ReadFile(filepath.Join(name, "main.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range kmsName.FindAllString(string(src), -1) {
			if !shared[v] {
				t.Errorf("examples/%s/main.go names %s: read the shared settings (KMS_ADDR, KMS_API_KEY or KMS_API_KEY_FILE, KMS_CACERT) with client.FromEnv", name, v)
			}
		}
	}
	if src, err := os.ReadFile(filepath.Join("client", "main.go")); err != nil || !strings.Contains(string(src), "client.FromEnv(") {
		t.Errorf("examples/client/main.go does not call client.FromEnv (%v)", err)
	}
}

// exampleDirs are the names of the directories of examples/ that hold a
// main.go, sorted.
func exampleDirs(t testing.TB) []string {
	t.Helper()
	mains, err := filepath.Glob(filepath.Join("*", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, m := range mains {
		dirs = append(dirs, filepath.Dir(m))
	}
	slices.Sort(dirs)
	return dirs
}

// userModule makes a module as a user of ringkms would have it, with the
// main.go of examples/name alone in it, and returns its directory. Its
// go.mod requires github.com/ringkms/kms, replaced by the checkout at
// root, and the checkout's own requirements, as go get would add them
// (so the module graph loads from the module cache with no lookup); its
// go.sum is the checkout's, which tidySum trims, once the example is
// built, to what go mod tidy would keep.
func userModule(t testing.TB, root, name string) string {
	t.Helper()
	dir := t.TempDir()
	main, err := os.ReadFile(filepath.Join(root, "examples", name, "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	goMod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goSum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	mod := moduleLine.ReplaceAllLiteralString(string(goMod), "module example.com/"+name)
	mod += "\nrequire " + modulePath + " v0.0.0\n\nreplace " + modulePath + " => " + root + "\n"
	for file, data := range map[string][]byte{"main.go": main, "go.mod": []byte(mod), "go.sum": goSum} {
		if err := os.WriteFile(filepath.Join(dir, file), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

var moduleLine = regexp.MustCompile(`(?m)^module .*$`)

// tidySum leaves in the go.sum of the user's module at dir what go mod
// tidy would: the go.mod hashes of the module graph, and the hashes of
// the modules whose packages the program bin (built there) links, and no
// others, so that what the program builds at run time cannot lean on
// hashes that only ringkms's own go.sum has.
func tidySum(t testing.TB, dir, bin string, env []string) {
	t.Helper()
	cmd := exec.Command(goTool(), "version", "-m", bin)
	cmd.Env = env
	info, err := cmd.Output()
	if err != nil {
		t.Fatalf("go version -m %s: %v", bin, err)
	}
	linked := map[string]bool{}
	for _, line := range strings.Split(string(info), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "dep" {
			linked[f[1]+" "+f[2]] = true
		}
	}
	path := filepath.Join(dir, "go.sum")
	sum, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var keep []string
	for _, line := range strings.Split(strings.TrimSpace(string(sum)), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && (strings.HasSuffix(f[1], "/go.mod") || linked[f[0]+" "+f[1]]) {
			keep = append(keep, line)
		}
	}
	if err := os.WriteFile(path, []byte(strings.Join(keep, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// exampleEnv is this environment without KMS_* variables, with goBin's
// directory first on PATH (examples/client -start runs go build), and the
// go command kept to the module cache: GOPROXY=off, no workspace, and
// -mod=mod, so that it may complete a user module's go.mod from it.
func exampleEnv(goBin string) []string {
	var env []string
	goflags := []string{"-mod=mod"}
	for _, kv := range os.Environ() {
		name, value, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(name, "KMS_"), name == "PATH", name == "GOPROXY", name == "GOWORK":
		case name == "GOFLAGS":
			for _, f := range strings.Fields(value) {
				if !strings.HasPrefix(f, "-mod=") {
					goflags = append(goflags, f)
				}
			}
		default:
			env = append(env, kv)
		}
	}
	return append(env, "PATH="+filepath.Dir(goBin)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"GOPROXY=off", "GOWORK=off", "GOFLAGS="+strings.Join(goflags, " "))
}

// goTool is the go command of the Go that runs the tests.
func goTool() string {
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); runtime.GOROOT() != "" {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return "go"
}
