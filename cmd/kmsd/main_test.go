package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/kmsdtest"
	"github.com/ringkms/kms/internal/pgtest"
	"github.com/ringkms/kms/store/badgerstore"
	"github.com/ringkms/kms/store/filetrail"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"
)

func TestMain(m *testing.M) {
	// Tests that call run() serve from this process; do not mlockall it.
	lockMemory = func(*zerolog.Logger) {}
	code := pgtest.Main(m)
	cleanupBinary()
	os.Exit(code)
}

// env is a fake environment for run.
type env map[string]string

func (e env) get(k string) string { return e[k] }

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer = kmsdtest.Buffer

// waitFor polls cond until it holds or timeout passes.
var waitFor = kmsdtest.WaitFor

func newKey() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

var listeningRE = regexp.MustCompile(`kmsd listening on (https?://\S+)`)

// server is a kmsd run() in this process.
type server struct {
	url    string
	stderr *syncBuffer
	stdout *syncBuffer
	cancel context.CancelFunc
	done   chan error
}

// startRun runs kmsd in this process and waits until it listens. The
// server is stopped at the end of the test if stop was not called.
func startRun(t *testing.T, args []string, e env) *server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &server{stderr: &syncBuffer{}, stdout: &syncBuffer{}, cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- run(ctx, args, e.get, s.stdout, s.stderr) }()
	var runErr error
	waitFor(t, 20*time.Second, "kmsd to listen", func() bool {
		select {
		case runErr = <-s.done:
			return true
		default:
		}
		return listeningRE.MatchString(s.stderr.String())
	})
	if !listeningRE.MatchString(s.stderr.String()) {
		cancel()
		t.Fatalf("run = %v before listening; stderr:\n%s", runErr, s.stderr)
	}
	s.url = listeningRE.FindStringSubmatch(s.stderr.String())[1]
	t.Cleanup(func() { s.stop(t) })
	return s
}

// stop cancels the server's context and waits for run to return nil.
func (s *server) stop(t *testing.T) {
	t.Helper()
	if s.cancel == nil {
		return
	}
	s.cancel()
	s.cancel = nil
	select {
	case err := <-s.done:
		if err != nil {
			t.Errorf("run after cancel = %v, want nil; stderr:\n%s", err, s.stderr)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("run did not return after cancel")
	}
}

// call sends a JSON request with a bearer key and decodes the answer.
func call(t testing.TB, client *http.Client, method, url, key string, body any) (int, map[string]any) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, url, err)
	}
	var out map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s %s: %d %q is not JSON: %v", method, url, resp.StatusCode, raw, err)
		}
	}
	return resp.StatusCode, out
}

func TestHelp(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-h"}, env{}.get, &out, io.Discard); err != nil {
		t.Fatalf("run(-h) = %v, want nil", err)
	}
	for _, s := range settings {
		if !strings.Contains(out.String(), "-"+s.flag) || !strings.Contains(out.String(), s.env) {
			t.Errorf("kmsd -h does not list -%s and %s:\n%s", s.flag, s.env, out.String())
		}
	}
	for _, e := range envOnly {
		if !strings.Contains(out.String(), e[0]) {
			t.Errorf("kmsd -h does not list %s", e[0])
		}
	}
	if _, err := parseConfig("verify-audit", []string{"-help"}, env{}.get, io.Discard); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("verify-audit -help = %v, want flag.ErrHelp", err)
	}
}

// runErr runs kmsd with a context that is already canceled, for the cases
// where it must refuse to start.
func runErr(t *testing.T, args []string, e env) (error, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stderr syncBuffer
	err := run(ctx, args, e.get, io.Discard, &stderr)
	return err, stderr.String()
}

func TestRunRefusesWithoutMasterKey(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	err, _ := runErr(t, []string{"-data", data, "-addr", "127.0.0.1:0"}, env{})
	if err == nil {
		t.Fatal("run without a master key = nil, want an error")
	}
	for _, want := range []string{"no master key", "KMS_MASTER_KEY", "head -c 32 /dev/urandom | base64", "-master-key-file", "-dev"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if code := exitCode(err); code == 0 {
		t.Errorf("exit code = 0")
	}
	if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("run without a key created the data directory (%v)", err)
	}
}

func TestRunBadMasterKey(t *testing.T) {
	short := base64.StdEncoding.EncodeToString(make([]byte, 16))
	tests := []struct {
		name, key, want string
	}{
		{"not base64", "this is not base64!", "not base64"},
		{"16 bytes", short, "16 bytes"},
		{"blank", "   ", "0 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err, _ := runErr(t, []string{"-data", t.TempDir(), "-addr", "127.0.0.1:0"}, env{"KMS_MASTER_KEY": tt.key})
			if err == nil || !strings.Contains(err.Error(), "KMS_MASTER_KEY") || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("run = %v, want an error about KMS_MASTER_KEY: %s", err, tt.want)
			}
			if strings.TrimSpace(tt.key) != "" && strings.Contains(err.Error(), tt.key) {
				t.Errorf("error %q repeats the key", err)
			}
		})
	}
}

func TestRunMasterKeyTwoWays(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "mk")
	os.WriteFile(file, []byte(newKey()), 0o600)
	err, _ := runErr(t, []string{"-data", dir, "-master-key-file", file}, env{"KMS_MASTER_KEY": newKey()})
	if err == nil || !strings.Contains(err.Error(), "one way") {
		t.Fatalf("run with KMS_MASTER_KEY and -master-key-file = %v, want an error", err)
	}
}

func TestMasterKeyFile(t *testing.T) {
	key := newKey()
	tests := []struct {
		name     string
		content  string
		mode     os.FileMode
		wantErr  string
		wantWarn bool
	}{
		{"0600", key + "\n", 0o600, "", false},
		{"0400", key, 0o400, "", false},
		{"0640 warns", key, 0o640, "", true},
		{"0644 refused", key, 0o644, "chmod 600", false},
		{"0606 refused", key, 0o606, "other users", false},
		{"bad content", "hello", 0o600, "base64", false},
		{"wrong size", base64.StdEncoding.EncodeToString(make([]byte, 31)), 0o600, "31 bytes", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "master.key")
			if err := os.WriteFile(path, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, tt.mode); err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			log := zerolog.New(&logs)
			k, err := loadMasterKey(&config{masterKeyFile: path}, env{}.get, true, &log)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("loadMasterKey = %v, want an error about %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("loadMasterKey = %v", err)
			}
			if mk, ok := k.(kms.MasterKey); !ok || mk.Base64() != key {
				t.Errorf("loadMasterKey read a different key")
			}
			if got := strings.Contains(logs.String(), `"level":"warn"`); got != tt.wantWarn {
				t.Errorf("warned = %v, want %v; logs: %s", got, tt.wantWarn, logs.String())
			}
			if strings.Contains(logs.String(), key) {
				t.Errorf("the key was logged")
			}
		})
	}
	t.Run("missing", func(t *testing.T) {
		log := zerolog.Nop()
		_, err := loadMasterKey(&config{masterKeyFile: filepath.Join(t.TempDir(), "nope")}, env{}.get, true, &log)
		if err == nil || !strings.Contains(err.Error(), "master key file") {
			t.Errorf("loadMasterKey(missing file) = %v, want an error naming the master key file", err)
		}
	})
}

func TestRunBootstrapKeyTooShort(t *testing.T) {
	err, _ := runErr(t, []string{"-data", t.TempDir(), "-addr", "127.0.0.1:0"},
		env{"KMS_MASTER_KEY": newKey(), "KMS_BOOTSTRAP_API_KEY": "short-secret"})
	if err == nil || !strings.Contains(err.Error(), "at least 32") {
		t.Fatalf("run = %v, want an error about the bootstrap key's length", err)
	}
	if strings.Contains(err.Error(), "short-secret") {
		t.Errorf("error %q repeats the secret", err)
	}
}

func TestRunSMTPNeedsSender(t *testing.T) {
	err, _ := runErr(t, []string{"-data", t.TempDir(), "-addr", "127.0.0.1:0"},
		env{"KMS_MASTER_KEY": newKey(), "KMS_SMTP_ADDR": "mail.example.com:587"})
	if err == nil || !strings.Contains(err.Error(), "KMS_SMTP_FROM") {
		t.Fatalf("run = %v, want an error about KMS_SMTP_FROM", err)
	}
}

var bootstrapRE = regexp.MustCompile(`bootstrap API key \(shown once\): (rk_\S+)`)

func TestRunDevGeneratesThenReusesMasterKey(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	args := []string{"-dev", "-data", data, "-addr", "127.0.0.1:0"}

	// First start: a new key in <data>/master.key, a generated bootstrap key.
	s := startRun(t, args, env{})
	keyFile := filepath.Join(data, "master.key")
	fi, err := os.Stat(keyFile)
	if err != nil {
		t.Fatalf("-dev did not write %s: %v", keyFile, err)
	}
	if mode := fi.Mode().Perm(); mode != 0o600 {
		t.Errorf("%s has mode %o, want 600", keyFile, mode)
	}
	mk1, _ := os.ReadFile(keyFile)
	logs := s.stderr.String()
	if !strings.Contains(logs, "DEV MODE") {
		t.Errorf("no dev mode warning in:\n%s", logs)
	}
	if strings.Contains(logs, strings.TrimSpace(string(mk1))) {
		t.Errorf("the master key was logged")
	}
	m := bootstrapRE.FindStringSubmatch(logs)
	if m == nil {
		t.Fatalf("no bootstrap API key printed:\n%s", logs)
	}
	apiKey := m[1]
	if n := strings.Count(logs, apiKey); n != 1 {
		t.Errorf("the bootstrap key appears %d times on stderr, want once", n)
	}
	if code, body := call(t, nil, "POST", s.url+"/ks/keyrings", apiKey, map[string]any{"name": "kept"}); code != 200 {
		t.Fatalf("create ring = %d %v", code, body)
	}
	s.stop(t)

	// Second start: the same key, the ring still there, no new bootstrap.
	s = startRun(t, args, env{})
	mk2, _ := os.ReadFile(keyFile)
	if !bytes.Equal(mk1, mk2) {
		t.Errorf("-dev replaced master.key on the second start")
	}
	if bootstrapRE.MatchString(s.stderr.String()) {
		t.Errorf("second start printed a bootstrap key again")
	}
	if code, body := call(t, nil, "GET", s.url+"/ks/keyrings/kept", apiKey, nil); code != 200 {
		t.Errorf("GET ring after restart = %d %v", code, body)
	}
	s.stop(t)

	// A store without its master.key is refused, not given a new key.
	os.Remove(keyFile)
	err, _ = runErr(t, args, env{})
	if err == nil || !strings.Contains(err.Error(), "holds a store") {
		t.Errorf("run -dev on a store without master.key = %v, want a refusal", err)
	}
	if _, err := os.Stat(keyFile); err == nil {
		t.Errorf("-dev wrote a new master.key for an existing store")
	}
}

func TestRunBootstrapKeyFromEnvironment(t *testing.T) {
	secret := "test-bootstrap-secret-0123456789abcdef"
	s := startRun(t, []string{"-data", t.TempDir(), "-addr", "127.0.0.1:0"},
		env{"KMS_MASTER_KEY": newKey(), "KMS_BOOTSTRAP_API_KEY": secret})
	if code, body := call(t, nil, "GET", s.url+"/ks/keyrings", secret, nil); code != 200 {
		t.Errorf("GET /ks/keyrings with the bootstrap key = %d %v", code, body)
	}
	logs := s.stderr.String()
	if strings.Contains(logs, secret) || bootstrapRE.MatchString(logs) {
		t.Errorf("a given bootstrap key must be neither printed nor logged:\n%s", logs)
	}
	if !strings.Contains(logs, "bootstrap: created") {
		t.Errorf("bootstrap was not logged:\n%s", logs)
	}
}

// writeCert writes a self-signed certificate for 127.0.0.1 and its key,
// and returns their paths and a pool that trusts the certificate.
func writeCert(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "kmsd test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600)
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

func TestRunTLS(t *testing.T) {
	certFile, keyFile, pool := writeCert(t)
	s := startRun(t, []string{"-data", t.TempDir(), "-addr", "127.0.0.1:0", "-tls-cert", certFile},
		env{"KMS_MASTER_KEY": newKey(), "KMS_TLS_KEY": keyFile})
	if !strings.HasPrefix(s.url, "https://") {
		t.Fatalf("listening on %s, want https", s.url)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	if code, body := call(t, client, "GET", s.url+"/healthz", "", nil); code != 200 {
		t.Errorf("GET /healthz over TLS = %d %v", code, body)
	}
	// Plain HTTP to the TLS port gets no JSON answer.
	if resp, err := http.Get("http" + strings.TrimPrefix(s.url, "https") + "/healthz"); err == nil {
		if resp.StatusCode == 200 {
			t.Errorf("plain HTTP to the TLS port answered 200")
		}
		resp.Body.Close()
	}
}

func TestRunTLSErrors(t *testing.T) {
	certFile, _, _ := writeCert(t)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"cert only", []string{"-tls-cert", certFile}, "-tls-key"},
		{"key only", []string{"-tls-key", certFile}, "-tls-cert"},
		{"missing files", []string{"-tls-cert", certFile, "-tls-key", filepath.Join(t.TempDir(), "nope.pem")}, "TLS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"-data", t.TempDir(), "-addr", "127.0.0.1:0"}, tt.args...)
			err, _ := runErr(t, args, env{"KMS_MASTER_KEY": newKey()})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("run(%q) = %v, want an error about %s", tt.args, err, tt.want)
			}
		})
	}
}

func TestRunMailOutbox(t *testing.T) {
	outbox := filepath.Join(t.TempDir(), "outbox")
	startRun(t, []string{"-data", t.TempDir(), "-addr", "127.0.0.1:0", "-mail-outbox", outbox}, env{"KMS_MASTER_KEY": newKey()})
	fi, err := os.Stat(outbox)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Errorf("-mail-outbox did not create a 0700 directory: %v %v", fi, err)
	}
}

func TestVerifyAuditErrors(t *testing.T) {
	dir := t.TempDir()
	if err, _ := runErr(t, []string{"verify-audit", "-data", filepath.Join(dir, "nope")}, env{"KMS_MASTER_KEY": newKey()}); err == nil {
		t.Errorf("verify-audit on a missing directory = nil, want an error")
	}
	if err, _ := runErr(t, []string{"verify-audit", "-data", dir}, env{"KMS_MASTER_KEY": newKey()}); err == nil || !strings.Contains(err.Error(), "no store") {
		t.Errorf("verify-audit on an empty directory = %v, want an error about no store", err)
	}
}

func TestVerifyAuditInProcess(t *testing.T) {
	data := t.TempDir()
	e := env{"KMS_MASTER_KEY": newKey(), "KMS_BOOTSTRAP_API_KEY": "in-process-bootstrap-secret-0123456789"}
	s := startRun(t, []string{"-data", data, "-addr", "127.0.0.1:0"}, e)
	for i := range 3 {
		if code, body := call(t, nil, "POST", s.url+"/ks/keyrings", e["KMS_BOOTSTRAP_API_KEY"], map[string]any{"name": "r" + string(rune('a'+i))}); code != 200 {
			t.Fatalf("create ring = %d %v", code, body)
		}
	}
	s.stop(t)

	var out bytes.Buffer
	if err := run(context.Background(), []string{"verify-audit", "-data", data}, e.get, &out, io.Discard); err != nil {
		t.Fatalf("verify-audit = %v; output:\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "intact") || !regexp.MustCompile(`records checked: [1-9]`).MatchString(out.String()) {
		t.Errorf("verify-audit printed:\n%s", out.String())
	}
	// With another master key, it cannot open the store.
	err := run(context.Background(), []string{"verify-audit", "-data", data}, env{"KMS_MASTER_KEY": newKey()}.get, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "master key") {
		t.Errorf("verify-audit with another master key = %v, want an error about the master key", err)
	}

	// A byte changed in the first record of the trail's files (past the
	// 16-byte frame header) is a broken chain: exit status 3.
	seg := filepath.Join(data, "trail", "00000000000000000001.trail")
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	b[16+40] ^= 1
	if err := os.WriteFile(seg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	err = run(context.Background(), []string{"verify-audit", "-data", data}, e.get, &out, io.Discard)
	if exitCode(err) != 3 || !strings.Contains(out.String(), "BROKEN") {
		t.Errorf("verify-audit on a damaged trail = %v (exit %d), printed:\n%s; want exit 3 and BROKEN", err, exitCode(err), out.String())
	}
}

// trailDataDir makes a data directory for kmsd with the master key e holds
// and a trail of segments of segmentSize bytes (0: the default), with a
// ring "r" and the records of encrypts encrypt calls on it when encrypts
// is more than 0.
func trailDataDir(t *testing.T, e env, segmentSize int64, encrypts int) string {
	t.Helper()
	data := t.TempDir()
	mk, err := kms.ParseMasterKey(e["KMS_MASTER_KEY"])
	if err != nil {
		t.Fatal(err)
	}
	st, err := badgerstore.OpenWith(badgerstore.DefaultOptions(data), badgerstore.Options{Trail: filetrail.Options{SegmentSize: segmentSize}})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := kms.New(st, kms.Options{MasterKey: mk})
	if err != nil {
		t.Fatal(err)
	}
	boot, err := svc.Bootstrap(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	p, err := svc.Authenticate(context.Background(), boot.Secret)
	if err != nil {
		t.Fatal(err)
	}
	ctx := kms.WithPrincipal(context.Background(), p)
	if encrypts > 0 {
		if _, err := svc.CreateKeyRing(ctx, kms.CreateKeyRingInput{Name: "r"}); err != nil {
			t.Fatal(err)
		}
	}
	for range encrypts {
		if _, err := svc.Encrypt(ctx, kms.EncryptInput{RingName: "r"}); err != nil {
			t.Fatal(err)
		}
	}
	svc.Close()
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return data
}

// frameOffset returns the offset of record seq's frame in a trail segment
// that starts at record first (the frame format of store/filetrail).
func frameOffset(t *testing.T, b []byte, first, seq uint64) int {
	t.Helper()
	off := 0
	for s := first; s < seq; s++ {
		if off+16 > len(b) {
			t.Fatalf("segment ends before record %d", seq)
		}
		off += 16 + int(binary.BigEndian.Uint32(b[off:]))
	}
	return off
}

// TestVerifyAuditNamesDamage: one byte changed in record 4 of a trail of
// many records: verify-audit exits 3 naming record 4, its segment file,
// and the 3 records verified before it; kmsd refuses to start with exit 3,
// saying that the trail is damaged (not that the master key is wrong).
func TestVerifyAuditNamesDamage(t *testing.T) {
	e := env{"KMS_MASTER_KEY": newKey()}
	data := trailDataDir(t, e, 0, 80)
	seg := filepath.Join(data, "trail", "00000000000000000001.trail")
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	b[frameOffset(t, b, 1, 4)+16+40] ^= 1
	if err := os.WriteFile(seg, b, 0o600); err != nil {
		t.Fatal(err)
	}

	var out bytes.Buffer
	err = run(context.Background(), []string{"verify-audit", "-data", data}, e.get, &out, io.Discard)
	t.Logf("verify-audit printed:\n%s", out.String())
	if exitCode(err) != 3 {
		t.Errorf("verify-audit on a damaged record = %v (exit %d), want exit 3", err, exitCode(err))
	}
	for _, want := range []string{"BROKEN", "record 4 ", "00000000000000000001.trail", "records verified before the damage: 3\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("verify-audit printed:\n%s\nwant it to say %q", out.String(), want)
		}
	}

	err, _ = runErr(t, []string{"-data", data, "-addr", "127.0.0.1:0"}, e)
	t.Logf("kmsd: %v", err)
	if exitCode(err) != 3 || err == nil || !strings.Contains(err.Error(), "activity trail is damaged") ||
		!strings.Contains(err.Error(), "verify-audit") || strings.Contains(err.Error(), "master key") {
		t.Errorf("kmsd on a damaged trail = %v (exit %d), want exit 3, the trail damaged and verify-audit named, no word of the master key", err, exitCode(err))
	}
	// The damaged file is left as it was found.
	if got, err := os.ReadFile(seg); err != nil || !bytes.Equal(got, b) {
		t.Errorf("the damaged segment changed after verify-audit and a refused start (err %v)", err)
	}
}

// TestVerifyAuditSealedSegment: a damaged record in a sealed segment
// whose index file is missing is damage too (exit 3, the segment named),
// not a failure to run.
func TestVerifyAuditSealedSegment(t *testing.T) {
	e := env{"KMS_MASTER_KEY": newKey()}
	data := trailDataDir(t, e, 4096, 60)
	segs, err := filepath.Glob(filepath.Join(data, "trail", "*.trail"))
	if err != nil || len(segs) < 3 {
		t.Fatalf("trail segments = %q, %v; want 3 or more", segs, err)
	}
	seg := segs[1]
	if err := os.Remove(strings.TrimSuffix(seg, ".trail") + ".index"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	b[16+40] ^= 1
	if err := os.WriteFile(seg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err = run(context.Background(), []string{"verify-audit", "-data", data}, e.get, &out, io.Discard)
	if exitCode(err) != 3 || !strings.Contains(out.String(), filepath.Base(seg)) || strings.Contains(out.String()+fmt.Sprint(err), "another") {
		t.Errorf("verify-audit on a damaged sealed segment = %v (exit %d), printed:\n%s\nwant exit 3 naming %s", err, exitCode(err), out.String(), filepath.Base(seg))
	}
	err, _ = runErr(t, []string{"-data", data, "-addr", "127.0.0.1:0"}, e)
	if exitCode(err) != 3 || err == nil || !strings.Contains(err.Error(), filepath.Base(seg)) {
		t.Errorf("kmsd on a damaged sealed segment = %v (exit %d), want exit 3 naming the segment", err, exitCode(err))
	}
}

// TestStartWrongMasterKey: only a master key that does not open the store
// is reported as one.
func TestStartWrongMasterKey(t *testing.T) {
	e := env{"KMS_MASTER_KEY": newKey()}
	data := trailDataDir(t, e, 0, 0)
	err, _ := runErr(t, []string{"-data", data, "-addr", "127.0.0.1:0"}, env{"KMS_MASTER_KEY": newKey()})
	if err == nil || !strings.Contains(err.Error(), "master key is not the one this store was created with") {
		t.Errorf("kmsd with another master key = %v, want an error saying so", err)
	}
}

// TestRunPostgres: kmsd on a PostgreSQL store (-store) serves, keeps what
// it acknowledged across a restart, and verify-audit checks its trail
// there.
func TestRunPostgres(t *testing.T) {
	url := pgtest.URL(t)
	e := env{"KMS_MASTER_KEY": newKey(), "KMS_BOOTSTRAP_API_KEY": "postgres-bootstrap-secret-0123456789", "KMS_STORE": url}
	root := e["KMS_BOOTSTRAP_API_KEY"]
	s := startRun(t, []string{"-data", t.TempDir(), "-addr", "127.0.0.1:0"}, e)
	if code, body := call(t, nil, "POST", s.url+"/ks/keyrings", root, map[string]any{"name": "pg"}); code != 200 {
		t.Fatalf("create ring = %d %v", code, body)
	}
	code, enc := call(t, nil, "POST", s.url+"/ks/encrypt", root, map[string]any{"ringname": "pg"})
	if code != 200 {
		t.Fatalf("encrypt = %d %v", code, enc)
	}
	// A second node on the same database serves the same service: it
	// decrypts what the first encrypted, and its encrypt is decrypted by
	// the first.
	s2 := startRun(t, []string{"-data", t.TempDir(), "-addr", "127.0.0.1:0"}, e)
	if code, body := call(t, nil, "POST", s2.url+"/ks/decrypt", root, map[string]any{"hash": enc["hash"], "header": enc["header"]}); code != 200 {
		t.Fatalf("decrypt on a second node = %d %v", code, body)
	}
	code, enc2 := call(t, nil, "POST", s2.url+"/ks/encrypt", root, map[string]any{"ringname": "pg"})
	if code != 200 {
		t.Fatalf("encrypt on a second node = %d %v", code, enc2)
	}
	if code, body := call(t, nil, "POST", s.url+"/ks/decrypt", root, map[string]any{"hash": enc2["hash"], "header": enc2["header"]}); code != 200 {
		t.Fatalf("decrypt on the first node of the second's encrypt = %d %v", code, body)
	}
	s2.stop(t)
	s.stop(t)
	if !strings.Contains(s.stderr.String(), `"store":"PostgreSQL postgres://`) {
		t.Errorf("the listening line does not name the PostgreSQL store:\n%s", s.stderr.String())
	}

	s = startRun(t, []string{"-data", t.TempDir(), "-addr", "127.0.0.1:0", "-store", url}, env{"KMS_MASTER_KEY": e["KMS_MASTER_KEY"]})
	if code, body := call(t, nil, "POST", s.url+"/ks/decrypt", root, map[string]any{"hash": enc["hash"], "header": enc["header"]}); code != 200 {
		t.Fatalf("decrypt after a restart = %d %v", code, body)
	}
	s.stop(t)

	var out bytes.Buffer
	if err := run(context.Background(), []string{"verify-audit", "-store", url}, e.get, &out, io.Discard); err != nil {
		t.Fatalf("verify-audit -store = %v; output:\n%s", err, out.String())
	}
	if !regexp.MustCompile(`records checked: [1-9]`).MatchString(out.String()) {
		t.Errorf("verify-audit -store printed:\n%s", out.String())
	}
}

// TestSubcommandsRefuseAnEmptyDatabase: verify-audit, audit export,
// rotate-signing-key and rekey on a PostgreSQL database that holds no
// kmsd store (a mistyped URL) fail and create nothing there, as they do
// on a data directory without a store.
func TestSubcommandsRefuseAnEmptyDatabase(t *testing.T) {
	url := pgtest.URL(t)
	e := env{"KMS_MASTER_KEY": newKey(), "KMS_NEW_MASTER_KEY": newKey()}
	for _, args := range [][]string{
		{"verify-audit"},
		{"audit", "export"},
		{"rotate-signing-key"},
		{"rekey"},
	} {
		var out bytes.Buffer
		err := run(context.Background(), append(args, "-store", url), e.get, &out, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "no kmsd store") {
			t.Errorf("%s -store on an empty database = %v, want an error saying it holds no kmsd store; output:\n%s", strings.Join(args, " "), err, out.String())
		}
	}
	c, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	var tables int
	if err := c.QueryRow(context.Background(), "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'kms_%'").Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 0 {
		t.Errorf("the refused commands left %d kms_ tables, want none", tables)
	}
}

// TestRekeyBesideTheNodes: kmsd rekey on PostgreSQL runs while the nodes
// serve. A node started with the new key as its next key goes on under it
// without a restart; a node without it stops writing (503, /healthz 503)
// and serves again once restarted with the new key.
func TestRekeyBesideTheNodes(t *testing.T) {
	url := pgtest.URL(t)
	oldKey, newMaster := newKey(), newKey()
	e := env{"KMS_MASTER_KEY": oldKey, "KMS_MASTER_KEY_NEXT": newMaster, "KMS_BOOTSTRAP_API_KEY": "rekey-bootstrap-secret-0123456789", "KMS_STORE": url}
	root := e["KMS_BOOTSTRAP_API_KEY"]
	a := startRun(t, []string{"-data", t.TempDir(), "-addr", "127.0.0.1:0"}, e)
	defer a.stop(t)
	b := startRun(t, []string{"-data", t.TempDir(), "-addr", "127.0.0.1:0"}, env{"KMS_MASTER_KEY": oldKey, "KMS_STORE": url})
	if code, body := call(t, nil, "POST", a.url+"/ks/keyrings", root, map[string]any{"name": "rk"}); code != 200 {
		t.Fatalf("create ring = %d %v", code, body)
	}
	code, enc := call(t, nil, "POST", a.url+"/ks/encrypt", root, map[string]any{"ringname": "rk"})
	if code != 200 {
		t.Fatalf("encrypt = %d %v", code, enc)
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"rekey", "-store", url}, env{"KMS_MASTER_KEY": oldKey, "KMS_NEW_MASTER_KEY": newMaster}.get, &out, io.Discard); err != nil {
		t.Fatalf("rekey beside the nodes = %v; output:\n%s", err, out.String())
	}
	if code, body := call(t, nil, "POST", a.url+"/ks/decrypt", root, map[string]any{"hash": enc["hash"], "header": enc["header"]}); code != 200 {
		t.Errorf("decrypt on the node with the next key, after the rekey = %d %v", code, body)
	}
	if code, body := call(t, nil, "POST", a.url+"/ks/keyrings", root, map[string]any{"name": "after"}); code != 200 {
		t.Errorf("create ring on the node with the next key, after the rekey = %d %v", code, body)
	}
	kmsdtest.WaitFor(t, 10*time.Second, "the node without the new key to answer 503", func() bool {
		code, _ := call(t, nil, "GET", b.url+"/healthz", "", nil)
		return code == 503
	})
	if code, body := call(t, nil, "POST", b.url+"/ks/keyrings", root, map[string]any{"name": "stale"}); code != 503 {
		t.Errorf("create ring on the node without the new key = %d %v, want 503", code, body)
	}
	b.stop(t)
	if err := run(context.Background(), nil, env{"KMS_MASTER_KEY": oldKey, "KMS_STORE": url}.get, io.Discard, io.Discard); err == nil {
		t.Errorf("kmsd with the old key alone started")
	}
	b = startRun(t, []string{"-data", t.TempDir(), "-addr", "127.0.0.1:0"}, env{"KMS_MASTER_KEY": newMaster, "KMS_STORE": url})
	defer b.stop(t)
	if code, body := call(t, nil, "POST", b.url+"/ks/decrypt", root, map[string]any{"hash": enc["hash"], "header": enc["header"]}); code != 200 {
		t.Fatalf("decrypt with the new master key = %d %v", code, body)
	}
}

func TestStoreFlag(t *testing.T) {
	for _, bad := range []string{"mysql://x", "/var/lib/kms", "postgres"} {
		if _, err := parseConfig("", []string{"-store", bad}, env{}.get, io.Discard); err == nil || !strings.Contains(err.Error(), "-store") {
			t.Errorf("-store %q = %v, want an error about -store", bad, err)
		}
	}
	for _, good := range []string{"", "postgres://kms@db/kms", "postgresql://kms@db:5433/kms?sslmode=verify-full"} {
		if _, err := parseConfig("", []string{"-store", good}, env{}.get, io.Discard); err != nil {
			t.Errorf("-store %q = %v, want nil", good, err)
		}
	}
	c := config{store: "postgres://kms:hunter2secret@db:5432/kms"}
	if name := c.storeName(); strings.Contains(name, "hunter2secret") || !strings.Contains(name, "db:5432") {
		t.Errorf("storeName() = %q, want the database without its password", name)
	}
}

// TestMigrate: kmsd migrate copies an embedded store into an empty
// PostgreSQL database; kmsd on it decrypts what was issued before, its
// trail verifies, and a second migrate into the now full database is
// refused, writing nothing.
func TestMigrate(t *testing.T) {
	data := t.TempDir()
	e := env{"KMS_MASTER_KEY": newKey(), "KMS_BOOTSTRAP_API_KEY": "migrate-bootstrap-secret-0123456789abc"}
	root := e["KMS_BOOTSTRAP_API_KEY"]
	s := startRun(t, []string{"-data", data, "-addr", "127.0.0.1:0"}, e)
	if code, body := call(t, nil, "POST", s.url+"/ks/keyrings", root, map[string]any{"name": "moved"}); code != 200 {
		t.Fatalf("create ring = %d %v", code, body)
	}
	var issued []map[string]any
	for range 30 {
		code, enc := call(t, nil, "POST", s.url+"/ks/encrypt", root, map[string]any{"ringname": "moved", "asset": map[string]any{"data": map[string]any{"n": 1}}})
		if code != 200 {
			t.Fatalf("encrypt = %d %v", code, enc)
		}
		issued = append(issued, enc)
	}
	s.stop(t)

	url := pgtest.URL(t)
	var out bytes.Buffer
	if err := run(context.Background(), []string{"migrate", "-from", data, "-to", url}, e.get, &out, io.Discard); err != nil {
		t.Fatalf("migrate = %v; output:\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "activity chain intact") || !regexp.MustCompile(`copied [1-9]\d* keys and [1-9]\d* activity records`).MatchString(out.String()) {
		t.Errorf("migrate printed:\n%s", out.String())
	}
	out.Reset()
	err := run(context.Background(), []string{"migrate", "-from", data, "-to", url}, e.get, &out, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("a second migrate into the same database = %v, want a refusal", err)
	}

	s = startRun(t, []string{"-data", t.TempDir(), "-addr", "127.0.0.1:0", "-store", url}, env{"KMS_MASTER_KEY": e["KMS_MASTER_KEY"]})
	for i, enc := range issued {
		if code, body := call(t, nil, "POST", s.url+"/ks/decrypt", root, map[string]any{"hash": enc["hash"], "header": enc["header"]}); code != 200 {
			t.Fatalf("decrypt of hash %d after migrate = %d %v", i, code, body)
		}
	}
	s.stop(t)
	out.Reset()
	if err := run(context.Background(), []string{"verify-audit", "-store", url}, e.get, &out, io.Discard); err != nil {
		t.Fatalf("verify-audit -store after migrate = %v; output:\n%s", err, out.String())
	}
}

func TestMigrateUsage(t *testing.T) {
	for _, args := range [][]string{{"migrate", "-from", t.TempDir()}, {"migrate", "-to", "/var/lib/kms"}} {
		err := run(context.Background(), args, env{"KMS_MASTER_KEY": newKey()}.get, io.Discard, io.Discard)
		if exitCode(err) != 2 || !strings.Contains(fmt.Sprint(err), "-to") {
			t.Errorf("run(%q) = %v (exit %d), want a usage error about -to", args, err, exitCode(err))
		}
	}
}

// TestRunGarbageCollector: kmsd runs the collector at defaultGCPercent
// and under defaultMemoryLimit unless GOGC and GOMEMLIMIT say otherwise.
// (Not parallel: it sets this process's runtime.)
func TestRunGarbageCollector(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	for _, c := range []struct {
		e         env
		gc        int
		memLimit  int64
		situation string
	}{
		{env{}, defaultGCPercent, defaultMemoryLimit, "neither set"},
		{env{"GOGC": "100", "GOMEMLIMIT": "1GiB"}, 100, math.MaxInt64, "both set"},
	} {
		debug.SetGCPercent(100)
		debug.SetMemoryLimit(math.MaxInt64)
		c.e["KMS_MASTER_KEY"] = newKey()
		s := startRun(t, []string{"-data", t.TempDir(), "-addr", "127.0.0.1:0"}, c.e)
		gc, limit := debug.SetGCPercent(-1), debug.SetMemoryLimit(-1)
		debug.SetGCPercent(gc)
		s.stop(t)
		if gc != c.gc || limit != c.memLimit {
			t.Errorf("%s: GOGC %d, memory limit %d; want %d, %d", c.situation, gc, limit, c.gc, c.memLimit)
		}
	}
}
