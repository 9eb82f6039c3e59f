package main

import (
	"bytes"
	"context"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestParseFlagsK8s: the k8s modes load a running kmsd's plugin socket
// (-k8s-socket), which stands for -url and its API key, or a kmsd that
// kmsbench starts; without either, or with the flags of the HTTP calls,
// they are usage errors.
func TestParseFlagsK8s(t *testing.T) {
	abs, err := filepath.Abs("kms.sock")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string
		urls    []string
	}{
		{name: "encrypt on a socket", args: []string{"-mode", "k8s-encrypt", "-k8s-socket", "/run/kms/kms.sock"}, urls: []string{"unix:///run/kms/kms.sock"}},
		{name: "decrypt on a relative socket", args: []string{"-mode", "k8s-decrypt", "-k8s-socket", "kms.sock"}, urls: []string{"unix://" + abs}},
		{name: "the client settings are not read", args: []string{"-mode", "k8s-encrypt", "-k8s-socket", "/s"},
			env: map[string]string{"KMS_ADDR": "http://10.0.0.1:8200", "KMS_CACERT": "/nonexistent"}, urls: []string{"unix:///s"}},
		{name: "started", args: []string{"-mode", "k8s-decrypt", "-start", "-store", "postgres://h/db", "-nodes", "2"}},
		{name: "started against another build", args: []string{"-mode", "k8s-encrypt", "-start", "-against", "/tmp/kmsd"}},

		{name: "encrypt without a socket", args: []string{"-mode", "k8s-encrypt"},
			wantErr: "-mode k8s-encrypt needs -k8s-socket PATH, the KMS plugin socket of a running kmsd (kmsd -k8s-kms-socket), or -start"},
		{name: "decrypt without a socket, KMS_ADDR set", args: []string{"-mode", "k8s-decrypt"}, env: map[string]string{"KMS_ADDR": "http://127.0.0.1:8200", "KMS_API_KEY": "k"},
			wantErr: "-mode k8s-decrypt needs -k8s-socket PATH"},
		{name: "a socket and -start", args: []string{"-mode", "k8s-encrypt", "-start", "-k8s-socket", "/s"}, wantErr: "-k8s-socket and -start exclude each other"},
		{name: "a socket and -url", args: []string{"-mode", "k8s-encrypt", "-k8s-socket", "/s", "-url", "http://127.0.0.1:1"}, wantErr: "-url, -key and -ca-cert go with the HTTP modes"},
		{name: "batches", args: []string{"-mode", "k8s-encrypt", "-start", "-batch", "10"}, wantErr: "-batch go with the HTTP modes"},
		{name: "the baseline", args: []string{"-mode", "k8s-encrypt", "-start", "-baseline"}, wantErr: "-baseline, -tls, -asset, -ring and -batch go with the HTTP modes"},
		{name: "a ring", args: []string{"-mode", "k8s-decrypt", "-k8s-socket", "/s", "-ring", "r"}, wantErr: "sealed with kmsd's -k8s-kms-key"},
		{name: "a socket without a k8s mode", args: []string{"-start", "-k8s-socket", "/s"}, wantErr: "-k8s-socket goes with -mode k8s-encrypt and k8s-decrypt"},
		{name: "a socket of another mode", args: []string{"-mode", "transit-encrypt", "-url", "http://127.0.0.1:1", "-key", "k", "-k8s-socket", "/s"}, wantErr: "-k8s-socket goes with"},
		{name: "a mode the plugin has not", args: []string{"-mode", "k8s-rotate", "-start"}, wantErr: "k8s-encrypt or k8s-decrypt"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parseCase(t, tt.args, tt.env, tt.wantErr)
			if err != nil {
				return
			}
			if !slices.Equal(o.urls, tt.urls) {
				t.Errorf("parseFlags(%q): nodes %q, want %q", tt.args, o.urls, tt.urls)
			}
		})
	}

	// As a command: run answers the usage error and loads nothing.
	checkUsageError(t, []string{"-mode", "k8s-decrypt", "-n", "20"}, "needs -k8s-socket PATH")
}

// TestRunK8sStart: kmsbench starts kmsd with its KMS plugin on a socket
// of its own and loads it with the plugin's Encrypt, or Decrypt of the
// data keys it sealed first (here taking turns with a second kmsd,
// -against): every call counted in the row, none failed, the CPU of
// each kmsd read, and every kmsd stopped.
func TestRunK8sStart(t *testing.T) {
	testSealStarted(t, "k8s", func(t *testing.T, mode string, rows []row, stderr string) {
		for _, r := range rows {
			if !strings.HasPrefix(r.URL, "unix:///") || !strings.Contains(stderr, "its KMS plugin on "+r.URL) {
				t.Errorf("%s: %s loaded at %q, want the socket kmsbench gave it; stderr:\n%s", mode, r.Target, r.URL, stderr)
			}
		}
		if mode == "k8s-decrypt" && strings.Count(stderr, "made 20 sealed data keys to decrypt") != 2 {
			t.Errorf("stderr does not say that each kmsd sealed 20 data keys:\n%s", stderr)
		}
	})
}

// TestRunK8sSocket loads the plugin socket of a running kmsd, found by
// -k8s-socket alone: the row counts every call, none failed, and the
// CPU is that of the kmsd listening on the socket.
func TestRunK8sSocket(t *testing.T) {
	k := runningK8s(t)
	for _, mode := range []string{"k8s-encrypt", "k8s-decrypt"} {
		sum, stderr := runJSON(t, noEnv, "-mode", mode, "-k8s-socket", k.socket, "-c", "3", "-n", "20", "-warmup", "0", "-pool", "10")
		if len(sum.Rows) != 1 {
			t.Fatalf("%s: rows %+v", mode, sum.Rows)
		}
		r := sum.Rows[0]
		if r.Target != "kmsd" || r.URL != "unix://"+k.socket || r.Requests != 20 || r.Errors != 0 || sum.Nodes != 1 {
			t.Errorf("%s row %+v, want 20 calls to unix://%s, none failed", mode, r, k.socket)
		}
		if pid := k.cmd.Process.Pid; r.CPUSeconds == nil || !strings.Contains(stderr, "kmsd (pid "+strconv.Itoa(pid)+") serves unix://"+k.socket) {
			t.Errorf("%s: CPU %v; want that of kmsd (pid %d), the socket's owner; stderr:\n%s", mode, r.CPUSeconds, pid, stderr)
		}
	}
}

// TestK8sDecryptChecksPlaintext: a Decrypt that opens to another key
// than was sealed is a failed call, "mismatch"; one that opens to it,
// a call done.
func TestK8sDecryptChecksPlaintext(t *testing.T) {
	k := runningK8s(t)
	calls, err := dialK8s([]string{"unix://" + k.socket}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer calls.Close()
	sealed, _, err := calls.seal(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	other := sealed
	other.plaintext = bytes.Clone(sealed.plaintext)
	other.plaintext[0] ^= 1
	calls.sealed = [][]sealedKey{{sealed}}
	rng := rand.New(rand.NewPCG(1, 2))
	if out := calls.call(context.Background(), 0, rng); out.failure != "" || !out.answered {
		t.Errorf("Decrypt of the key sealed = %+v, want a call done", out)
	}
	calls.sealed = [][]sealedKey{{other}}
	if out := calls.call(context.Background(), 0, rng); out.failure != "mismatch" || !out.answered {
		t.Errorf("Decrypt checked against another key = %+v, want a failure, mismatch", out)
	}
	broken := sealed
	broken.ciphertext = []byte{0xff}
	calls.sealed = [][]sealedKey{{broken}}
	if out := calls.call(context.Background(), 0, rng); out.failure != "InvalidArgument" || !out.answered {
		t.Errorf("Decrypt of a ciphertext not the plugin's = %+v, want the plugin's InvalidArgument", out)
	}
}

// runningK8s starts a kmsd serving its KMS plugin on a socket, for a
// test to load as a running one, stopped at the test's end.
func runningK8s(t *testing.T) *kmsd {
	t.Helper()
	config := newKmsdConfig(testKmsd(t), "warn", "", false, nil)
	config.k8s = true
	return startRunning(t, config)
}

// TestSummaryTableK8s: the summary of a k8s mode names the plugin's
// socket and the data keys, not a ring, and its errors by gRPC code.
func TestSummaryTableK8s(t *testing.T) {
	o := &options{mode: "k8s-decrypt", concurrency: 8, ring: "kmsbench", pool: 20, warmup: time.Second, urls: []string{"unix:///run/kms.sock"}}
	checkModeTable(t, o, map[string]int64{"Unavailable": 2, "mismatch": 1},
		"mode: k8s-decrypt, kmsd's KMS plugin socket, 32-byte data keys, 20 of them sealed first to decrypt, warm-up 1s per target\n",
		"kmsd    k8s-decrypt            8       100       3      1.0    100",
		"kmsd errors by status: Unavailable: 2, mismatch: 1\n",
	)
}
