package main

// End-to-end tests: build the real kmsd once, run it as a child process
// on 127.0.0.1:0 in a temporary data directory, and talk HTTP to it.
// They are skipped with -short only.

import (
	"bufio"
	"bytes"
	"crypto/hpke"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ringkms/kms/internal/kmsdtest"
)

var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

// kmsdBinary builds kmsd once per test binary (with -race when the tests
// run with it) and returns its path.
func kmsdBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: builds and runs kmsd; skipped with -short")
	}
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "kmsd-e2e-")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "kmsd")
		args := []string{"build", "-o", binPath}
		if raceEnabled {
			args = append(args, "-race")
		}
		cmd := exec.Command(kmsdtest.GoTool(), append(args, ".")...)
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

func cleanupBinary() {
	if binDir != "" {
		os.RemoveAll(binDir)
	}
}

// proc is a running kmsd.
type proc = kmsdtest.Proc

// childEnv is this process's environment without KMS_* variables, plus e.
func childEnv(e env) []string {
	var kv []string
	for k, v := range e {
		kv = append(kv, k+"="+v)
	}
	return kmsdtest.Env(kv...)
}

// startKmsd starts kmsd on data and waits until it listens. It is killed
// at the end of the test if it still runs.
func startKmsd(t *testing.T, data string, e env, args ...string) *proc {
	t.Helper()
	bin := kmsdBinary(t)
	return kmsdtest.Start(t, bin, childEnv(e), 60*time.Second, append([]string{"-data", data, "-addr", "127.0.0.1:0"}, args...)...)
}

const e2eBootstrap = "e2e-bootstrap-api-key-0123456789abcdefghij"

func e2eEnv() env {
	return env{"KMS_MASTER_KEY": newKey(), "KMS_BOOTSTRAP_API_KEY": e2eBootstrap}
}

func TestE2EHealthz(t *testing.T) {
	p := startKmsd(t, t.TempDir(), e2eEnv())
	if code, body := call(t, nil, "GET", p.URL+"/healthz", "", nil); code != 200 {
		t.Errorf("GET /healthz = %d %v", code, body)
	}
	if code, _ := call(t, nil, "GET", p.URL+"/ks/keyrings", "rk_wrong", nil); code != 401 {
		t.Errorf("GET /ks/keyrings with a wrong key = %d, want 401", code)
	}
	p.Stop(t)
}

// ack is one acknowledged write.
type ack struct {
	op     string // ring, rotate, encrypt
	ring   string // the ring created (ring)
	keyID  string // the key made (rotate) or handed out (encrypt)
	hash   string // (encrypt)
	header string // (encrypt)
}

func TestE2ECrashDurability(t *testing.T) {
	data := t.TempDir()
	e := e2eEnv()
	p := startKmsd(t, data, e)
	if code, body := call(t, nil, "GET", p.URL+"/healthz", "", nil); code != 200 {
		t.Fatalf("GET /healthz = %d %v", code, body)
	}
	if code, body := call(t, nil, "POST", p.URL+"/ks/keyrings", e2eBootstrap, map[string]any{"name": "crash"}); code != 200 {
		t.Fatalf("create ring crash = %d %v", code, body)
	}

	// Four clients write concurrently; kmsd is killed as soon as 50
	// writes are acknowledged, while others are in flight.
	const want = 50
	client := &http.Client{Timeout: 30 * time.Second}
	var (
		mu     sync.Mutex
		acks   []ack
		next   atomic.Int64
		killed atomic.Bool
		enough = make(chan struct{})
		once   sync.Once
		wg     sync.WaitGroup
	)
	for range 4 {
		wg.Go(func() {
			for !killed.Load() {
				i := next.Add(1)
				var a ack
				var status int
				var raw []byte
				var err error
				switch i % 5 {
				case 0:
					a = ack{op: "ring", ring: fmt.Sprintf("crash-%d", i)}
					status, raw, err = kmsdtest.Do(client, "POST", p.URL+"/ks/keyrings", e2eBootstrap, map[string]any{"name": a.ring})
				case 1:
					a = ack{op: "rotate"}
					status, raw, err = kmsdtest.Do(client, "POST", p.URL+"/ks/rotate", e2eBootstrap, map[string]any{"ringname": "crash", "algo": "aes256"})
				default:
					a = ack{op: "encrypt"}
					status, raw, err = kmsdtest.Do(client, "POST", p.URL+"/ks/encrypt", e2eBootstrap, map[string]any{"ringname": "crash"})
				}
				if err != nil {
					if !killed.Load() {
						t.Errorf("write %d before the kill: %v", i, err)
					}
					return
				}
				if status != 200 {
					t.Errorf("write %d (%s) = %d %s", i, a.op, status, raw)
					return
				}
				var res struct {
					Key    struct{ ID string } `json:"key"`
					Hash   string              `json:"hash"`
					Header string              `json:"header"`
				}
				if err := json.Unmarshal(raw, &res); err != nil || res.Key.ID == "" {
					t.Errorf("write %d (%s): incomplete answer %q: %v", i, a.op, raw, err)
					return
				}
				a.keyID, a.hash, a.header = res.Key.ID, res.Hash, res.Header
				if a.op == "encrypt" && (a.hash == "" || a.header == "") {
					t.Errorf("write %d: encrypt answer without hash or header: %s", i, raw)
					return
				}
				mu.Lock()
				acks = append(acks, a)
				if len(acks) >= want {
					once.Do(func() { close(enough) })
				}
				mu.Unlock()
			}
		})
	}
	select {
	case <-enough:
	case <-time.After(60 * time.Second):
		t.Fatalf("fewer than %d writes acknowledged in 60s", want)
	}
	killed.Store(true)
	p.Signal(t, syscall.SIGKILL)
	if code := p.Wait(t, 10*time.Second); code != -1 {
		t.Fatalf("kmsd exited %d, want killed by SIGKILL", code)
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	mu.Lock()
	got := append([]ack(nil), acks...)
	mu.Unlock()
	t.Logf("%d writes acknowledged before SIGKILL", len(got))

	// Every acknowledged write survived.
	p = startKmsd(t, data, e)
	counts := map[string]int{}
	for _, a := range got {
		counts[a.op]++
		switch a.op {
		case "ring":
			if code, body := call(t, nil, "GET", p.URL+"/ks/keyrings/"+a.ring, e2eBootstrap, nil); code != 200 {
				t.Errorf("after the crash, GET ring %s = %d %v", a.ring, code, body)
			}
		case "rotate":
			if code, body := call(t, nil, "GET", p.URL+"/ks/keyrings/crash/keys/"+a.keyID, e2eBootstrap, nil); code != 200 {
				t.Errorf("after the crash, GET rotated key %s = %d %v", a.keyID, code, body)
			}
		case "encrypt":
			code, body := call(t, nil, "GET", p.URL+"/ks/hash/"+a.hash, e2eBootstrap, nil)
			if code != 200 || body["keyId"] != a.keyID {
				t.Errorf("after the crash, GET hash = %d %v, want 200 with keyId %s", code, body, a.keyID)
			}
			code, body = call(t, nil, "POST", p.URL+"/ks/decrypt", e2eBootstrap, map[string]any{"hash": a.hash, "header": a.header})
			if code != 200 {
				t.Errorf("after the crash, decrypt = %d %v", code, body)
			} else if k, _ := body["key"].(map[string]any); k["id"] != a.keyID {
				t.Errorf("after the crash, decrypt gave key %v, want %s", k["id"], a.keyID)
			}
		}
	}
	t.Logf("checked: %v", counts)
	p.Stop(t)

	// The audit chain is intact.
	cmd := exec.Command(kmsdBinary(t), "verify-audit", "-data", data)
	cmd.Env = childEnv(env{"KMS_MASTER_KEY": e["KMS_MASTER_KEY"]})
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kmsd verify-audit: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "intact") {
		t.Errorf("kmsd verify-audit printed:\n%s", out)
	}
}

// unwrapKey opens keyData of an hpke-xwing ring with the ring's private
// key (the 32-byte X-Wing seed), using only the standard library, as
// docs/FORMAT.md describes.
func unwrapKey(t *testing.T, seed []byte, ringID string, key map[string]any) []byte {
	t.Helper()
	keyID, _ := key["id"].(string)
	kd, _ := key["keyData"].(map[string]any)
	encrypted, _ := kd["encrypted"].(map[string]any)
	wrapped, _ := encrypted["key"].(map[string]any)
	if wrapped["encoding"] != "hpke-xwing" {
		t.Fatalf("keyData.encrypted.key.encoding = %v, want hpke-xwing", wrapped["encoding"])
	}
	enc, err := base64.StdEncoding.DecodeString(kd["iv"].(string))
	if err != nil {
		t.Fatalf("keyData.iv: %v", err)
	}
	ct, err := base64.StdEncoding.DecodeString(wrapped["value"].(string))
	if err != nil {
		t.Fatalf("keyData.encrypted.key.value: %v", err)
	}
	priv, err := hpke.MLKEM768X25519().NewPrivateKey(seed)
	if err != nil {
		t.Fatalf("NewPrivateKey(privateKey) = %v", err)
	}
	info := []byte("ringkms/keydata/v1/" + ringID + "/" + keyID)
	r, err := hpke.NewRecipient(enc, priv, hpke.HKDFSHA256(), hpke.AES256GCM(), info)
	if err != nil {
		t.Fatalf("hpke.NewRecipient = %v", err)
	}
	k, err := r.Open(nil, ct)
	if err != nil {
		t.Fatalf("Open(keyData) = %v", err)
	}
	if len(k) != 32 {
		t.Fatalf("unwrapped key has %d bytes, want 32", len(k))
	}
	return k
}

func TestE2ESecretsAtRest(t *testing.T) {
	data := t.TempDir()
	e := e2eEnv()
	p := startKmsd(t, data, e)

	code, body := call(t, nil, "POST", p.URL+"/ks/keyrings", e2eBootstrap, map[string]any{"name": "secrets"})
	if code != 200 {
		t.Fatalf("create ring = %d %v", code, body)
	}
	privB64, _ := body["privateKey"].(string)
	seed, err := base64.StdEncoding.DecodeString(privB64)
	if err != nil || len(seed) != 32 {
		t.Fatalf("privateKey %q is not base64 of 32 bytes (%v)", privB64, err)
	}
	ringID := body["ring"].(map[string]any)["id"].(string)

	code, body = call(t, nil, "POST", p.URL+"/ks/encrypt", e2eBootstrap, map[string]any{"ringname": "secrets"})
	if code != 200 {
		t.Fatalf("encrypt = %d %v", code, body)
	}
	aesKey := unwrapKey(t, seed, ringID, body["key"].(map[string]any))
	// Decrypt hands out the same key.
	code, dec := call(t, nil, "POST", p.URL+"/ks/decrypt", e2eBootstrap, map[string]any{"hash": body["hash"], "header": body["header"]})
	if code != 200 {
		t.Fatalf("decrypt = %d %v", code, dec)
	}
	if k := unwrapKey(t, seed, ringID, dec["key"].(map[string]any)); !bytes.Equal(k, aesKey) {
		t.Errorf("decrypt unwraps to another key than encrypt")
	}
	p.Stop(t)

	mk, _ := base64.StdEncoding.DecodeString(e["KMS_MASTER_KEY"])
	secrets := map[string][]byte{
		"private key seed":            seed,
		"private key, base64":         []byte(privB64),
		"private key, base64url":      []byte(base64.RawURLEncoding.EncodeToString(seed)),
		"AES key":                     aesKey,
		"AES key, base64":             []byte(base64.StdEncoding.EncodeToString(aesKey)),
		"AES key, base64url":          []byte(base64.RawURLEncoding.EncodeToString(aesKey)),
		"AES key, hex":                []byte(hex.EncodeToString(aesKey)),
		"bootstrap API key":           []byte(e2eBootstrap),
		"master key":                  mk,
		"master key, base64":          []byte(e["KMS_MASTER_KEY"]),
		"private key seed, first 16B": seed[:16],
		"AES key, first 16B":          aesKey[:16],
	}
	kmsdtest.NoSecretsIn(t, data, secrets)
	logs := p.Stdout.String() + p.Stderr.String()
	for _, name := range []string{"bootstrap API key", "master key, base64", "private key, base64", "AES key, base64", "AES key, hex"} {
		if strings.Contains(logs, string(secrets[name])) {
			t.Errorf("the logs hold the %s", name)
		}
	}
}

func TestE2EGracefulShutdown(t *testing.T) {
	p := startKmsd(t, t.TempDir(), e2eEnv())
	if code, body := call(t, nil, "POST", p.URL+"/ks/keyrings", e2eBootstrap, map[string]any{"name": "inflight"}); code != 200 {
		t.Fatalf("create ring = %d %v", code, body)
	}
	host := strings.TrimPrefix(p.URL, "http://")

	// One request is surely in flight: its handler is reading the body
	// (the server has sent 100 Continue) when SIGTERM arrives, and the
	// rest of the body comes only after the server began shutting down.
	conn, err := net.Dial("tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(60 * time.Second))
	reqBody := `{"ringname":"inflight"}`
	fmt.Fprintf(conn, "POST /ks/encrypt HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\n"+
		"Content-Length: %d\r\nExpect: 100-continue\r\n\r\n", host, e2eBootstrap, len(reqBody))
	br := bufio.NewReader(conn)
	line, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100") {
		t.Fatalf("want 100 Continue, got %q (%v)", line, err)
	}
	if blank, _ := br.ReadString('\n'); blank != "\r\n" {
		t.Fatalf("100 Continue followed by %q", blank)
	}

	// A burst of concurrent requests around the SIGTERM.
	var (
		answered  atomic.Int64
		signalled atomic.Bool
		wg        sync.WaitGroup
	)
	for range 16 {
		wg.Go(func() {
			client := &http.Client{Timeout: 30 * time.Second}
			for {
				status, raw, err := kmsdtest.Do(client, "POST", p.URL+"/ks/encrypt", e2eBootstrap, map[string]any{"ringname": "inflight"})
				if err != nil {
					if !signalled.Load() {
						t.Errorf("request before SIGTERM: %v", err)
					}
					if raw != nil {
						t.Errorf("an answer was cut short: %d %q: %v", status, raw, err)
					}
					return
				}
				var res struct{ Hash, Header string }
				if status != 200 || json.Unmarshal(raw, &res) != nil || res.Hash == "" || res.Header == "" {
					t.Errorf("incomplete answer: %d %q", status, raw)
					return
				}
				answered.Add(1)
			}
		})
	}
	waitFor(t, 30*time.Second, "requests to be answered", func() bool { return answered.Load() >= 50 })
	signalled.Store(true)
	sigAt := time.Now()
	p.Signal(t, syscall.SIGTERM)
	waitFor(t, 10*time.Second, "kmsd to begin shutting down", func() bool {
		return strings.Contains(p.Stderr.String(), "shutting down")
	})
	// New connections are refused once the listener is closed.
	waitFor(t, 10*time.Second, "the listener to close", func() bool {
		c, err := net.DialTimeout("tcp", host, time.Second)
		if err != nil {
			return true
		}
		c.Close()
		return false
	})

	// The request in flight completes.
	if _, err := io.WriteString(conn, reqBody); err != nil {
		t.Fatalf("send the rest of the body: %v", err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("in-flight request: %v", err)
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	var res struct{ Hash, Header string }
	if err != nil || resp.StatusCode != 200 || json.Unmarshal(raw, &res) != nil || res.Hash == "" {
		t.Errorf("in-flight request = %d %q (%v), want a complete 200", resp.StatusCode, raw, err)
	}

	wg.Wait()
	if code := p.Wait(t, 15*time.Second); code != 0 {
		t.Errorf("kmsd exited %d after SIGTERM, want 0; stderr:\n%s", code, p.Stderr)
	}
	t.Logf("%d requests answered; exit %v after SIGTERM", answered.Load(), time.Since(sigAt).Round(time.Millisecond))
	if !strings.Contains(p.Stderr.String(), `"stopped"`) {
		t.Errorf("no \"stopped\" log line")
	}
}
