package examples_test

// The examples are programs: each is built and run here, against its own
// temporary data, and must exit 0 and print what it promises. This is how
// CI keeps them working. Skipped with -short.

import (
	"bytes"
	"context"
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
		name string
		args func(data string) []string
		want []string // lines (or parts of lines) of the output
	}{
		{"inprocess", func(data string) []string { return []string{"-data", data} },
			[]string{`decrypt: key `, `asset valid: true`, `decrypted: "Q3 revenue: up 12%"`}},
		{"mounted", func(data string) []string { return []string{"-data", data} },
			[]string{"GET /hello: hello from the application", "GET /kms/healthz: ok", "GET /kms/ks/keyrings: 1 ring(s)", "shut down"}},
		{"client", func(data string) []string { return []string{"-start", "-data", data} },
			[]string{"decrypt gave it back: true", "the limited key may not rotate (403)", "stopped kmsd: exit status 0"}},
	}
	goBin := goTool()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			bin := filepath.Join(dir, tc.name)
			build := exec.Command(goBin, "build", "-o", bin, "./"+tc.name)
			if out, err := build.CombinedOutput(); err != nil {
				t.Fatalf("go build ./examples/%s: %v\n%s", tc.name, err, out)
			}

			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, tc.args(filepath.Join(dir, "data"))...)
			// On timeout, SIGTERM first: examples/client then stops its kmsd.
			cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
			cmd.WaitDelay = 30 * time.Second
			cmd.Env = exampleEnv(goBin)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil {
				t.Fatalf("%s: %v (context: %v)\nstdout:\n%s\nstderr:\n%s", tc.name, err, ctx.Err(), &stdout, &stderr)
			}
			out := stdout.String()
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("%s: output has no %q\nstdout:\n%s\nstderr:\n%s", tc.name, w, out, &stderr)
				}
			}
			t.Logf("%s:\n%s", tc.name, out)
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
