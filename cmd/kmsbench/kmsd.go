package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	// startTimeout bounds the wait for kmsd's listening line.
	startTimeout = 60 * time.Second
	// stopTimeout bounds the wait for kmsd to exit after SIGTERM (its
	// own shutdown takes at most 10 s plus closing the store); then it
	// is killed.
	stopTimeout = 30 * time.Second
	// tailLines is how many of kmsd's last stderr lines an error shows.
	tailLines = 20
)

var listeningRE = regexp.MustCompile(`^kmsd listening on (https?://\S+)`)

// buildKmsd builds ./cmd/kmsd of the module in the current directory
// into dir and returns the binary's path.
func buildKmsd(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "kmsd")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/ringkms/kms/cmd/kmsd")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build kmsd (run kmsbench inside the ringkms module, or give -kmsd PATH): %v\n%s", err, out)
	}
	return bin, nil
}

// kmsd is a kmsd process that kmsbench started.
type kmsd struct {
	cmd     *exec.Cmd
	url     string
	key     string // the bootstrap API key, with the flag "*"
	dataDir string
	exited  chan struct{} // closed when the process has exited
	tail    *tail

	rssStop chan struct{}
	rssDone chan struct{}
	rss     rssStats

	stopOnce sync.Once
	stopErr  error
}

// rssStats are the resident memory samples of kmsd, from
// /proc/PID/status.
type rssStats struct {
	PeakBytes int64 `json:"peakBytes"` // the highest VmRSS sampled, or VmHWM if higher
	LastBytes int64 `json:"lastBytes"` // the last VmRSS sampled
	Samples   int   `json:"samples"`
}

// startKmsd runs bin on 127.0.0.1:0 with a fresh data directory, a random
// master key and a random bootstrap API key, and waits until it listens.
// With sampleRSS, it reads kmsd's resident memory every second until stop.
// logLevel is kmsd's -log-level.
func startKmsd(ctx context.Context, bin, logLevel string, sampleRSS bool) (*kmsd, error) {
	dataDir, err := os.MkdirTemp("", "kmsbench-data-")
	if err != nil {
		return nil, err
	}
	k := &kmsd{
		dataDir: dataDir,
		key:     "kmsbench-" + randomBase64(32),
		exited:  make(chan struct{}),
		tail:    &tail{},
	}
	k.cmd = exec.Command(bin, "-addr", "127.0.0.1:0", "-data", dataDir, "-log-level", logLevel)
	k.cmd.Env = append(withoutKMS(os.Environ()),
		"KMS_MASTER_KEY="+randomBase64(32),
		"KMS_BOOTSTRAP_API_KEY="+k.key)
	stderr, err := k.cmd.StderrPipe()
	if err != nil {
		os.RemoveAll(dataDir)
		return nil, err
	}
	if err := k.cmd.Start(); err != nil {
		os.RemoveAll(dataDir)
		return nil, fmt.Errorf("start kmsd: %w", err)
	}
	listening := make(chan string, 1)
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		k.tail.read(stderr, listening)
	}()
	go func() {
		<-drained // Wait must not run before the pipe is read to the end
		k.cmd.Wait()
		close(k.exited)
	}()

	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	select {
	case k.url = <-listening:
	case <-k.exited:
		os.RemoveAll(dataDir)
		return nil, fmt.Errorf("kmsd exited before listening (%v); its last lines:\n%s", k.cmd.ProcessState, k.tail)
	case <-timer.C:
		k.stop()
		return nil, fmt.Errorf("kmsd did not listen within %v; its last lines:\n%s", startTimeout, k.tail)
	case <-ctx.Done():
		k.stop()
		return nil, ctx.Err()
	}
	if sampleRSS {
		k.rssStop, k.rssDone = make(chan struct{}), make(chan struct{})
		go k.sampleRSS()
	}
	return k, nil
}

// stop sends SIGTERM to kmsd, waits for it to exit (killing it after
// stopTimeout), and removes its data directory. It returns an error when
// kmsd did not exit cleanly. It may be called more than once.
func (k *kmsd) stop() error {
	k.stopOnce.Do(func() { k.stopErr = k.doStop() })
	return k.stopErr
}

func (k *kmsd) doStop() error {
	if k.rssStop != nil {
		close(k.rssStop)
		<-k.rssDone
	}
	var err error
	select {
	case <-k.exited:
	default:
		k.cmd.Process.Signal(syscall.SIGTERM)
		timer := time.NewTimer(stopTimeout)
		defer timer.Stop()
		select {
		case <-k.exited:
		case <-timer.C:
			k.cmd.Process.Kill()
			<-k.exited
			err = fmt.Errorf("kmsd did not exit within %v of SIGTERM; killed", stopTimeout)
		}
	}
	if err == nil && !k.cmd.ProcessState.Success() {
		err = fmt.Errorf("kmsd exited with %v; its last lines:\n%s", k.cmd.ProcessState, k.tail)
	}
	os.RemoveAll(k.dataDir)
	return err
}

// sampleRSS reads kmsd's VmRSS (and VmHWM, the kernel's own peak) every
// second until rssStop is closed, and once more then.
func (k *kmsd) sampleRSS() {
	defer close(k.rssDone)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	path := "/proc/" + strconv.Itoa(k.cmd.Process.Pid) + "/status"
	sample := func() {
		rss, hwm, err := readRSS(path)
		if err != nil {
			return // exited, or no /proc
		}
		k.rss.Samples++
		k.rss.LastBytes = rss
		k.rss.PeakBytes = max(k.rss.PeakBytes, rss, hwm)
	}
	sample()
	for {
		select {
		case <-tick.C:
			sample()
		case <-k.rssStop:
			sample()
			return
		}
	}
}

// readRSS returns VmRSS and VmHWM, in bytes, from a /proc/PID/status file.
func readRSS(path string) (rss, hwm int64, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, err
	}
	found := false
	for line := range strings.Lines(string(b)) {
		name, v, ok := strings.Cut(line, ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %s: %v", path, name, err)
		}
		if name == "VmRSS" {
			rss, found = kb<<10, true
		} else {
			hwm = kb << 10
		}
	}
	if !found {
		return 0, 0, errors.New(path + ": no VmRSS")
	}
	return rss, hwm, nil
}

// withoutKMS returns env without KMS_* variables, so that kmsd gets only
// the settings kmsbench gives it.
func withoutKMS(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "KMS_") {
			out = append(out, kv)
		}
	}
	return out
}

func randomBase64(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// tail keeps the last lines kmsd wrote to stderr.
type tail struct {
	mu    sync.Mutex
	lines []string
}

// read reads r to the end, keeping its last lines and sending the URL of
// the listening line to listening (once).
func (t *tail) read(r io.Reader, listening chan<- string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	sent := false
	for sc.Scan() {
		line := sc.Text()
		if !sent {
			if m := listeningRE.FindStringSubmatch(line); m != nil {
				listening <- m[1]
				sent = true
			}
		}
		t.mu.Lock()
		t.lines = append(t.lines, line)
		if len(t.lines) > tailLines {
			t.lines = t.lines[len(t.lines)-tailLines:]
		}
		t.mu.Unlock()
	}
	io.Copy(io.Discard, r) // after an overlong line: keep kmsd from blocking
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return "  " + strings.Join(t.lines, "\n  ")
}
