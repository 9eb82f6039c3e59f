// Command client talks to a running kmsd with package client: it creates a
// key ring, encrypts and decrypts, creates an Account and an API key that
// may only encrypt, shows that key refused a rotation (403), and prints the
// ring's audit trail.
//
//	KMS_ADDR=http://127.0.0.1:8200 KMS_API_KEY=rk_... go run ./examples/client
//	go run ./examples/client -start   # builds and starts its own kmsd
//
// Without -start, it reads the settings that kmsctl and every other client
// read, with client.FromEnv: KMS_ADDR, the service's URL; KMS_API_KEY, or
// KMS_API_KEY_FILE naming a file that holds it (a key with the flag "*",
// such as the bootstrap key); and KMS_CACERT, a PEM file of the CA
// certificates to trust when a private CA signed kmsd's certificate.
//
// With -start, it builds kmsd from the source of github.com/ringkms/kms
// that the go command finds from the current directory (a checkout of
// ringkms, or a module of your own that requires it: its replacement, or
// its copy in the module cache), runs it on a free port of 127.0.0.1 with
// a temporary data directory (or -data DIR, kept), a random master key and
// a random bootstrap API key, and stops it with SIGTERM at the end. The
// keys are kept beside the data, so that -start -data DIR can run again on
// the same directory.
//
//	go run ./examples/client -start -data DIR
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/client"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		os.Exit(1)
	}
}

func run() error {
	start := flag.Bool("start", false, "build and start a kmsd of its own, with a temporary data directory, instead of calling the one of KMS_ADDR")
	data := flag.String("data", "", "with -start: kmsd's data directory (default: a new temporary directory, removed at the end)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if *start {
		k, err := startKmsd(ctx, *data)
		if err != nil {
			return err
		}
		defer k.stop()
		c, err := client.New(k.url, client.WithAPIKey(k.apiKey))
		if err != nil {
			return err
		}
		return demo(ctx, c)
	}
	if os.Getenv(client.EnvAddr) == "" || os.Getenv(client.EnvAPIKey) == "" && os.Getenv(client.EnvAPIKeyFile) == "" {
		return errors.New("set KMS_ADDR and KMS_API_KEY (or KMS_API_KEY_FILE; and KMS_CACERT for a private CA), or give -start")
	}
	c, err := client.FromEnv()
	if err != nil {
		return err
	}
	return demo(ctx, c)
}

// demo is the tour of the API.
func demo(ctx context.Context, c *client.Client) error {
	if err := c.Healthz(ctx); err != nil {
		return err
	}
	fmt.Println("kmsd at", c.BaseURL(), "is healthy")

	// Names with a random suffix, so the tour can run again on one server.
	suffix := randomHex(3)
	ringName := "invoices-" + suffix

	// A ring; its private key comes back this once (keep it to unwrap
	// keys: see examples/inprocess).
	ring, err := c.CreateKeyRing(ctx, kms.CreateKeyRingInput{Name: ringName})
	if err != nil {
		return err
	}
	fmt.Printf("created key ring %s (private key: %d base64 characters, not kept by kmsd)\n", ring.Ring.Name, len(ring.PrivateKey))

	// Encrypt and decrypt: the hash and header are what the application
	// stores next to its ciphertext.
	enc, err := c.Encrypt(ctx, kms.EncryptInput{RingName: ringName})
	if err != nil {
		return err
	}
	dec, err := c.Decrypt(ctx, kms.DecryptInput{Hash: enc.Hash, Header: enc.Header})
	if err != nil {
		return err
	}
	fmt.Printf("encrypt gave key %s and the call's share of its data key (the ring's data keys are %s); decrypt gave it back: %v\n",
		enc.Key.ID, ring.Ring.DataKeys, dec.Key.ID == enc.Key.ID && enc.KeyShare != "" && dec.KeyShare == enc.KeyShare)

	// An Account and an API key for it that may only encrypt with the ring.
	acct, err := c.CreateAccount(ctx, kms.AccountInput{UID: "example-" + suffix, Notes: "made by examples/client"})
	if err != nil {
		return err
	}
	limited, err := c.CreateAPIKey(ctx, kms.APIKeyInput{AccountID: acct.ID, Flags: kms.Flags{kms.RingFlag(ringName, kms.OpEncrypt): true}})
	if err != nil {
		return err
	}
	fmt.Printf("created Account %s and API key %s with flags %v\n", acct.UID, limited.KeyID, limited.Flags)

	// The limited key encrypts, but may not rotate: a 403, which arrives
	// as a kms.Error of kind PermissionDenied.
	lc := c.WithBearer(limited.Key)
	if _, err := lc.Encrypt(ctx, kms.EncryptInput{RingName: ringName}); err != nil {
		return err
	}
	fmt.Println("the limited key encrypted")
	_, err = lc.Rotate(ctx, kms.RotateInput{RingName: ringName})
	if !errors.Is(err, kms.ErrPermissionDenied) {
		return fmt.Errorf("rotate with the limited key = %v, want permission denied", err)
	}
	fmt.Println("the limited key may not rotate (403):", kms.ErrorMessage(err))

	// The audit trail of the ring: every operation, granted or denied.
	acts, err := c.SearchActivity(ctx, client.ActivityFilter{Ring: ringName}, kms.PageRequest{Limit: 20})
	switch {
	case errors.Is(err, kms.ErrNotFound):
		// A kmsd from before the activity search (POST /auth/search/activity).
		fmt.Println("activity: this kmsd has no activity search")
	case err != nil:
		return err
	default:
		fmt.Printf("activity of %s (%d records):\n", ringName, acts.Pagination.Count)
		for _, a := range acts.Data {
			fmt.Printf("  %s  %-16s granted=%-5v by %s\n", time.UnixMilli(a.CreatedAt).UTC().Format(time.RFC3339), a.Action, a.Valid, a.KeyID)
		}
	}

	// Tidy up: the API key first (a ring named by an active key's flags
	// cannot be deleted), then the Account and the ring.
	if _, err := c.DeleteAPIKey(ctx, kms.APIKeyRef{Value: limited.KeyID}); err != nil {
		return err
	}
	if _, err := c.DeleteAccount(ctx, kms.AccountRef{Value: acct.ID}); err != nil {
		return err
	}
	if _, err := c.DeleteKeyRing(ctx, kms.RingRef{Name: ringName}); err != nil {
		return err
	}
	fmt.Println("deleted the API key, the Account and the ring")
	return nil
}

// kmsd is a kmsd started by this program.
type kmsd struct {
	cmd     *exec.Cmd
	url     string
	apiKey  string
	exited  chan struct{}
	logTail *tail
	cleanup []func()
}

var listening = regexp.MustCompile(`kmsd listening on (https?://\S+)`)

// startKmsd builds kmsd and starts it on 127.0.0.1:0 and waits until it
// listens. Its master key and bootstrap API key are kept beside the data
// (master.key and root.key, mode 0600), so that a kmsd started again on
// the same data directory opens it and accepts the same key. For an
// example only: a real deployment keeps its master key apart from the data.
func startKmsd(ctx context.Context, data string) (_ *kmsd, err error) {
	k := &kmsd{exited: make(chan struct{}), logTail: &tail{}}
	defer func() {
		if err != nil {
			k.stop()
		}
	}()
	tmp, err := os.MkdirTemp("", "ringkms-example-")
	if err != nil {
		return nil, err
	}
	k.cleanup = append(k.cleanup, func() { os.RemoveAll(tmp) })
	if data == "" {
		data = filepath.Join(tmp, "data")
	}

	bin := filepath.Join(tmp, "kmsd")
	if err := buildKmsd(ctx, bin); err != nil {
		return nil, err
	}

	masterKey, err := keptSecret(data, "master.key", func() string { return kms.GenerateMasterKey().Base64() })
	if err != nil {
		return nil, err
	}
	if k.apiKey, err = keptSecret(data, "root.key", func() string { return "rk_" + rand.Text() + rand.Text() }); err != nil {
		return nil, err
	}
	k.cmd = exec.Command(bin, "-addr", "127.0.0.1:0", "-data", data)
	k.cmd.Env = append(withoutKMS(os.Environ()),
		"KMS_MASTER_KEY="+masterKey,
		"KMS_BOOTSTRAP_API_KEY="+k.apiKey)
	stderr, err := k.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := k.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		k.cmd.Wait()
		close(k.exited)
	}()

	// Read kmsd's stderr: the line that says where it listens, then keep
	// the last lines for an error message.
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			k.logTail.add(line)
			if m := listening.FindStringSubmatch(line); m != nil {
				found <- m[1]
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	select {
	case k.url = <-found:
	case <-k.exited:
		return nil, fmt.Errorf("kmsd exited before listening: %v\n%s", k.cmd.ProcessState, k.logTail)
	case <-time.After(60 * time.Second):
		return nil, fmt.Errorf("kmsd did not listen within 60s\n%s", k.logTail)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	fmt.Println("started kmsd, pid", k.cmd.Process.Pid)
	return k, nil
}

// stop sends kmsd SIGTERM, waits for its graceful shutdown (killing it
// after 15s), and removes the temporary files.
func (k *kmsd) stop() {
	if k.cmd != nil && k.cmd.Process != nil {
		k.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-k.exited:
			fmt.Println("stopped kmsd:", k.cmd.ProcessState)
		case <-time.After(15 * time.Second):
			k.cmd.Process.Kill()
			<-k.exited
			fmt.Println("killed kmsd: it did not stop within 15s")
		}
	}
	for _, f := range k.cleanup {
		f()
	}
}

// kmsModule is the module that holds kmsd.
const kmsModule = "github.com/ringkms/kms"

// buildKmsd builds kmsd into bin, in the directory of the source of
// kmsModule that the go command uses from here: a checkout of ringkms, or
// the module a module of the user's requires (its replacement, or its
// copy in the module cache), whose go.mod and go.sum have everything
// kmsd needs, where the user's module has only what its own imports need.
func buildKmsd(ctx context.Context, bin string) error {
	list := exec.CommandContext(ctx, goTool(), "list", "-m", "-f", "{{.Dir}}", kmsModule)
	var stderr strings.Builder
	list.Stderr = &stderr
	out, err := list.Output()
	dir := strings.TrimSpace(string(out))
	if err != nil || dir == "" {
		return fmt.Errorf("find the source of kmsd: go list -m %s: %v %s\n"+
			"Run this in the directory of a module that requires %s (go get %s), or in a checkout of ringkms",
			kmsModule, err, strings.TrimSpace(stderr.String()), kmsModule, kmsModule)
	}
	fmt.Printf("building kmsd (go build ./cmd/kmsd in %s)...\n", dir)
	build := exec.CommandContext(ctx, goTool(), "build", "-o", bin, "./cmd/kmsd")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/kmsd in %s: %v\n%s", dir, err, out)
	}
	return nil
}

// goTool is the go command: the one on PATH, else the one of the Go
// installation this program was built with.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

// withoutKMS returns env without KMS_* variables, so kmsd gets only the
// ones set here.
func withoutKMS(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "KMS_") {
			out = append(out, kv)
		}
	}
	return out
}

// keptSecret returns the text of dir/name, or, when there is no such file
// yet, the text of gen, which it first writes there (mode 0600).
func keptSecret(dir, name string, gen func() string) (string, error) {
	path := filepath.Join(dir, name)
	b, err := os.ReadFile(path)
	if err == nil {
		return strings.TrimSpace(string(b)), nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	text := gen()
	return text, os.WriteFile(path, []byte(text+"\n"), 0o600)
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// tail keeps the last lines of a log, for an error message.
type tail struct {
	mu    sync.Mutex
	lines []string
}

func (t *tail) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, line)
	if len(t.lines) > 20 {
		t.lines = t.lines[1:]
	}
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, "\n")
}
