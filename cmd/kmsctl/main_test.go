package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/httpapi"
	"github.com/ringkms/kms/kmstest"
)

// env is a fake environment for run.
type env map[string]string

func (e env) get(k string) string { return e[k] }

// result is what one run of kmsctl gave.
type result struct {
	code           int
	stdout, stderr string
}

// kmsctl runs kmsctl in this process with args, the environment e and
// stdin.
func kmsctl(t testing.TB, e env, stdin string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, e.get, strings.NewReader(stdin), &out, &errb)
	return result{code, out.String(), errb.String()}
}

// want fails the test unless r has the exit status code.
func (r result) want(t testing.TB, code int, what string) result {
	t.Helper()
	if r.code != code {
		t.Fatalf("%s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", what, r.code, code, r.stdout, r.stderr)
	}
	return r
}

// server is a Service on an in-memory store behind the real HTTP handler.
type server struct {
	*kmstest.Env
	env env // KMS_ADDR, KMS_API_KEY (the root key), KMSCTL_CONFIG_DIR
}

func newServer(t testing.TB, opts kms.Options) *server {
	t.Helper()
	k := kmstest.New(t, kmstest.MemoryStore(t), opts)
	_, url := kmstest.Serve(t, httpapi.New(k.Service, httpapi.Options{}), "")
	return &server{Env: k, env: env{"KMS_ADDR": url, "KMS_API_KEY": k.RootKey, "KMSCTL_CONFIG_DIR": t.TempDir()}}
}

// without returns a copy of e without the variables named.
func (e env) without(names ...string) env {
	out := env{}
	for k, v := range e {
		out[k] = v
	}
	for _, n := range names {
		delete(out, n)
	}
	return out
}

// with returns a copy of e with the pairs (name, value...) set.
func (e env) with(pairs ...string) env {
	out := e.without()
	for i := 0; i+1 < len(pairs); i += 2 {
		out[pairs[i]] = pairs[i+1]
	}
	return out
}

func TestUsageErrors(t *testing.T) {
	// A credential and an address that is never called: usage errors
	// come before any request.
	e := env{"KMS_API_KEY": "rk_unused", "KMS_ADDR": "http://127.0.0.1:1", "KMSCTL_CONFIG_DIR": t.TempDir()}
	tests := []struct {
		name string
		args []string
		want string // in stderr
	}{
		{"no command", nil, "missing command"},
		{"unknown group", []string{"rings"}, `unknown command "rings"`},
		{"unknown command", []string{"ring", "make"}, `unknown command "make"`},
		{"group without command", []string{"key"}, "missing command"},
		{"unknown flag", []string{"ring", "list", "-verbose"}, "-verbose"},
		{"unknown common flag", []string{"-address", "x", "status"}, "-address"},
		{"missing argument", []string{"ring", "show"}, "missing argument: want NAME"},
		{"extra argument", []string{"ring", "show", "a", "b"}, `unexpected argument "b"`},
		{"missing -ring", []string{"key", "list"}, "-ring is required"},
		{"missing -ring of encrypt", []string{"encrypt", "-in", "x"}, "-ring is required"},
		{"delete without -yes", []string{"ring", "delete", "payments"}, "-yes is required"},
		{"props not an object", []string{"ring", "create", "-props", "[1]", "r"}, "want a JSON object"},
		{"props not JSON", []string{"account", "create", "-props", "{", "acme"}, "want a JSON object"},
		{"bad -valid", []string{"activity", "search", "-valid", "maybe"}, "want true or false"},
		{"bad -from", []string{"activity", "search", "-from", "yesterday"}, "is not a time"},
		{"bad -flag", []string{"apikey", "create", "-account", "a", "-flag", "x=maybe"}, "NAME=true|false"},
		{"apikey without Account", []string{"apikey", "create", "-flag", "accounts.read"}, "-account ID or -account-uid UID"},
		{"invite without names", []string{"user", "invite", "-email", "a@example.com", "ada"}, "-first-name is required"},
		{"login without address", []string{"login"}, "give an email address or -user NAME"},
		{"login twice named", []string{"login", "-email", "a@example.com", "b@example.com"}, "not both"},
		{"decrypt without private key", []string{"decrypt", "-in", "x"}, "private key is needed"},
		{"private key and input both stdin", []string{"decrypt", "-private-key", "-", "-in", "-"}, "standard input cannot be read for both"},
		{"public key and -private-key-out", []string{"ring", "create", "-public-key-file", "/dev/null", "-private-key-out", "k", "r"}, "-private-key-out"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := kmsctl(t, e, "", tt.args...).want(t, 2, strings.Join(tt.args, " "))
			if !strings.Contains(r.stderr, tt.want) || !strings.Contains(r.stderr, "-h' for usage") {
				t.Errorf("stderr = %q, want %q and the pointer to -h", r.stderr, tt.want)
			}
			if r.stdout != "" {
				t.Errorf("stdout = %q, want nothing", r.stdout)
			}
		})
	}
}

// leaves calls f with the path and FlagSet of every command of the tree
// under cmd (its flags declared as dispatch declares them).
func leaves(cmd *command, path string, f func(path string, cmd *command, fs *flag.FlagSet)) {
	for _, sub := range cmd.subs {
		p := path + " " + sub.name
		if sub.subs != nil {
			leaves(sub, p, f)
			continue
		}
		c := &cli{getenv: env{}.get}
		fs := flag.NewFlagSet(p, flag.ContinueOnError)
		c.commonFlags(fs)
		sub.setup(c, fs)
		f(p, sub, fs)
	}
}

func TestHelp(t *testing.T) {
	e := env{"KMSCTL_CONFIG_DIR": t.TempDir()}
	check := func(t *testing.T, args ...string) {
		t.Helper()
		r := kmsctl(t, e, "", args...).want(t, 0, strings.Join(args, " "))
		if !strings.HasPrefix(r.stdout, "usage: kmsctl") || r.stderr != "" {
			t.Errorf("%v: stdout %q, stderr %q; want the usage on stdout", args, r.stdout, r.stderr)
		}
	}
	check(t, "-h")
	check(t, "help")
	for _, g := range root().subs {
		if g.subs != nil {
			check(t, g.name, "-h")
		}
	}
	leaves(root(), "kmsctl", func(path string, cmd *command, fs *flag.FlagSet) {
		args := append(strings.Fields(path)[1:], "-h")
		check(t, args...)
		if cmd.summary == "" {
			t.Errorf("%s has no summary", path)
		}
	})
}

// TestNoSecretInArgv: no flag takes a secret itself (an API key, a
// private key, a password, a token), only the name of a file that holds
// it; the process list shows argv.
func TestNoSecretInArgv(t *testing.T) {
	fileFlags := map[string]bool{"api-key-file": true, "private-key": true, "private-key-out": true, "public-key-file": true}
	leaves(root(), "kmsctl", func(path string, cmd *command, fs *flag.FlagSet) {
		fs.VisitAll(func(f *flag.Flag) {
			n := strings.ToLower(f.Name)
			secretish := strings.HasSuffix(n, "key") || strings.Contains(n, "password") ||
				strings.Contains(n, "secret") || strings.Contains(n, "token")
			if secretish && !fileFlags[f.Name] {
				t.Errorf("%s -%s looks like a flag that takes a secret", path, f.Name)
			}
			if fileFlags[f.Name] && !strings.Contains(f.Usage, "FILE") {
				t.Errorf("%s -%s: usage %q does not say it takes a FILE", path, f.Name, f.Usage)
			}
		})
	})
	e := env{"KMS_ADDR": "http://127.0.0.1:1", "KMSCTL_CONFIG_DIR": t.TempDir()}
	for _, args := range [][]string{
		{"-api-key", "rk_secret", "ring", "list"},
		{"ring", "list", "-token", "rkt_secret"},
		{"login", "-password", "hunter2", "a@example.com"},
	} {
		r := kmsctl(t, e, "", args...).want(t, 2, strings.Join(args, " "))
		if strings.Contains(r.stderr, "secret") || strings.Contains(r.stderr, "hunter2") {
			t.Errorf("%v: stderr %q repeats the secret", args, r.stderr)
		}
	}
}

func TestParseInterleaved(t *testing.T) {
	tests := []struct {
		args     []string
		ring     string
		rotate   bool
		wantArgs []string
	}{
		{[]string{"-ring", "a", "ID"}, "a", false, []string{"ID"}},
		{[]string{"ID", "-ring", "a"}, "a", false, []string{"ID"}},
		{[]string{"ID", "-rotate", "-ring", "a", "ID2"}, "a", true, []string{"ID", "ID2"}},
		{[]string{"-ring", "a", "--", "-rotate"}, "a", false, []string{"-rotate"}},
		{nil, "", false, nil},
	}
	for _, tt := range tests {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		ring := fs.String("ring", "", "")
		rotate := fs.Bool("rotate", false, "")
		got, err := parseInterleaved(fs, tt.args)
		if err != nil || *ring != tt.ring || *rotate != tt.rotate || strings.Join(got, " ") != strings.Join(tt.wantArgs, " ") {
			t.Errorf("parseInterleaved(%q) = %q, %v (ring %q, rotate %v); want %q (ring %q, rotate %v)", tt.args, got, err, *ring, *rotate, tt.wantArgs, tt.ring, tt.rotate)
		}
	}
}

func TestParseTime(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Time
	}{
		{"2026-04-30T10:00:00Z", time.Date(2026, 4, 30, 10, 0, 0, 0, time.UTC)},
		{"2026-04-30", time.Date(2026, 4, 30, 0, 0, 0, 0, time.UTC)},
		{"90m", now.Add(-90 * time.Minute)},
		{"1777636800000", time.UnixMilli(1777636800000)},
	}
	for _, tt := range tests {
		if got, err := parseTime(tt.in, now); err != nil || !got.Equal(tt.want) {
			t.Errorf("parseTime(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "yesterday", "-5m", "2026-13-01"} {
		if _, err := parseTime(bad, now); err == nil {
			t.Errorf("parseTime(%q) = nil error", bad)
		}
	}
}

func TestDescribe(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"service error", kms.Errorf(kms.KindDisabled, "key k of ring r is disabled"), "key k of ring r is disabled (disabled)"},
		{"fields", &kms.Error{Kind: kms.KindInvalid, Message: "invalid user", Fields: map[string]string{"username": "taken", "email": "taken too"}},
			"invalid user (invalid)\n  email: taken too\n  username: taken"},
		{"wrapped", wrap(kms.Errorf(kms.KindNotFound, "ring x not found")), "ring show: ring x not found (not_found)"},
		{"internal keeps its cause", &kms.Error{Kind: kms.KindInternal, Message: "GET /healthz failed", Err: io.ErrUnexpectedEOF}, "GET /healthz failed: unexpected EOF (internal)"},
		{"other", io.ErrUnexpectedEOF, "unexpected EOF"},
		{"interrupt", &kms.Error{Kind: kms.KindInternal, Message: "POST /ks/encrypt failed", Err: context.Canceled}, "interrupted"},
	}
	for _, tt := range tests {
		if got := describe(tt.err); got != tt.want {
			t.Errorf("%s: describe() = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func wrap(err error) error { return &wrapped{err} }

type wrapped struct{ err error }

func (w *wrapped) Error() string { return "ring show: " + w.err.Error() }
func (w *wrapped) Unwrap() error { return w.err }

func TestCell(t *testing.T) {
	ts := time.Date(2026, 5, 1, 12, 0, 0, 0, time.FixedZone("x", 3600))
	n := uint64(7)
	tests := []struct {
		in   any
		want string
	}{
		{"", "-"},
		{"a", "a"},
		{ts, "2026-05-01T11:00:00Z"},
		{time.Time{}, "-"},
		{(*time.Time)(nil), "-"},
		{&n, "7"},
		{(*uint64)(nil), "-"},
		{kms.Flags{"b": true, "a": false}, "a=false,b"},
		{kms.Flags{}, "-"},
		{map[string]any{}, "-"},
		{map[string]any{"k": 1}, `{"k":1}`},
		{[]string{"x", "y"}, "x,y"},
		{true, "true"},
		{nil, "-"},
	}
	for _, tt := range tests {
		if got := cell(tt.in); got != tt.want {
			t.Errorf("cell(%#v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// writeFile writes a file of the test's temporary directory.
func writeFile(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// plainFile writes size random bytes to dir/plain, and returns them, the
// file's path and dir/plain.rkms, the path to seal it to.
func plainFile(t testing.TB, dir string, size int) (plain []byte, in, sealed string) {
	t.Helper()
	plain = make([]byte, size)
	rand.Read(plain)
	return plain, writeFile(t, dir, "plain", plain), filepath.Join(dir, "plain.rkms")
}

func TestProgress(t *testing.T) {
	const size = 10 << 20
	var bar bytes.Buffer
	p := &progress{ctx: context.Background(), r: bytes.NewReader(make([]byte, size)), w: &bar, label: "encrypt", total: size}
	if n, err := io.Copy(io.Discard, p); n != size || err != nil {
		t.Fatalf("io.Copy through progress = %d, %v", n, err)
	}
	p.finish()
	if !strings.HasSuffix(bar.String(), "\rencrypt [==============================] 100% 10.0 / 10.0 MiB\n") {
		t.Errorf("the bar ends %q", bar.String()[max(0, bar.Len()-80):])
	}
	// No bar but on a terminal: a test's stderr is none.
	c := &cli{stderr: &bar}
	if p := c.progress(context.Background(), nil, size, "x"); p.w != nil {
		t.Error("a bar on a writer that is not a terminal")
	}
	// An interrupt stops the copy.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p = &progress{ctx: ctx, r: bytes.NewReader(make([]byte, 10))}
	if _, err := io.Copy(io.Discard, p); !errors.Is(err, context.Canceled) {
		t.Errorf("io.Copy after the interrupt = %v, want context.Canceled", err)
	}
}

// TestUnreachableIsUnavailable: a service that cannot be reached, or that
// answers 503, is reported as unavailable (try again, or elsewhere), not
// as an internal error of the service.
func TestUnreachableIsUnavailable(t *testing.T) {
	gone := httptest.NewServer(http.NotFoundHandler())
	addr := gone.URL
	gone.Close()
	busy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprint(w, `{"message":"service unavailable: try again","code":"unavailable"}`)
	}))
	defer busy.Close()
	for name, url := range map[string]string{"refused connection": addr, "503": busy.URL} {
		t.Run(name, func(t *testing.T) {
			e := env{"KMS_ADDR": url, "KMS_API_KEY": "rk_0123456789abcdef0123456789abcdef", "KMSCTL_CONFIG_DIR": t.TempDir()}
			r := kmsctl(t, e, "", "ring", "list").want(t, 1, "ring list")
			if !strings.Contains(r.stderr, "(unavailable)") {
				t.Errorf("stderr = %q, want the kind unavailable", r.stderr)
			}
		})
	}
}
