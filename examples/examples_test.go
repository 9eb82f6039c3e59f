package examples_test

// The examples are programs: each is built and run here, against its own
// temporary data, and must exit 0 and print what it promises; then run
// again on the same data, as -data DIR lets a user do. This is how CI
// keeps them working. Skipped with -short.

import (
	"bytes"
	"context"
	"github.com/ringkms/kms/internal/kmsdtest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

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
	goBin := goTool()
	kmsdtest.TrackSources() // the examples are built here, from the whole module
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			bin := filepath.Join(dir, tc.name)
			build := exec.Command(goBin, "build", "-o", bin, "./"+tc.name)
			if out, err := build.CombinedOutput(); err != nil {
				t.Fatalf("go build ./examples/%s: %v\n%s", tc.name, err, out)
			}

			data := filepath.Join(dir, "data")
			for run, extra := range [][]string{tc.first, tc.again} {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
				defer cancel()
				cmd := exec.CommandContext(ctx, bin, tc.args(data)...)
				// On timeout, SIGTERM first: examples/client then stops its kmsd.
				cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
				cmd.WaitDelay = 30 * time.Second
				cmd.Env = exampleEnv(goBin)
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

// exampleEnv is this environment without KMS_* variables, with goBin's
// directory first on PATH (examples/client -start runs go build).
func exampleEnv(goBin string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KMS_") && !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	return append(env, "PATH="+filepath.Dir(goBin)+string(os.PathListSeparator)+os.Getenv("PATH"))
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
