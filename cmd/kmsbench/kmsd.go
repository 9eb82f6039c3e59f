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

// process is a child process of kmsbench that writes the URL it listens
// on to its output: kmsd, or the baseline server.
type process struct {
	name   string
	cmd    *exec.Cmd
	url    string
	exited chan struct{} // closed when the process has exited
	tail   *tail         // the last lines of its output
}

// startProcess starts cmd, reads its output out (a pipe of cmd) to the end
// while keeping the last lines, and waits up to startTimeout for the line
// that listening matches, whose first group is the URL. When it returns
// an error, the process has exited or been stopped.
func startProcess(ctx context.Context, name string, cmd *exec.Cmd, out io.Reader, listening *regexp.Regexp) (*process, error) {
	p := &process{name: name, cmd: cmd, exited: make(chan struct{}), tail: &tail{}}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	urls := make(chan string, 1)
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		p.tail.read(out, listening, urls)
	}()
	go func() {
		<-drained // Wait must not run before the pipe is read to the end
		cmd.Wait()
		close(p.exited)
	}()

	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	select {
	case p.url = <-urls:
		return p, nil
	case <-p.exited:
		return nil, fmt.Errorf("%s exited before listening (%v); its last lines:\n%s", name, cmd.ProcessState, p.tail)
	case <-timer.C:
		p.terminate()
		return nil, fmt.Errorf("%s did not listen within %v; its last lines:\n%s", name, startTimeout, p.tail)
	case <-ctx.Done():
		p.terminate()
		return nil, ctx.Err()
	}
}

// terminate sends SIGTERM to the process and waits for it to exit, killing
// it after stopTimeout. It returns an error when the process did not exit
// cleanly.
func (p *process) terminate() error {
	select {
	case <-p.exited:
	default:
		p.cmd.Process.Signal(syscall.SIGTERM)
		timer := time.NewTimer(stopTimeout)
		defer timer.Stop()
		select {
		case <-p.exited:
		case <-timer.C:
			p.cmd.Process.Kill()
			<-p.exited
			return fmt.Errorf("%s did not exit within %v of SIGTERM; killed", p.name, stopTimeout)
		}
	}
	if !p.cmd.ProcessState.Success() {
		return fmt.Errorf("%s exited with %v; its last lines:\n%s", p.name, p.cmd.ProcessState, p.tail)
	}
	return nil
}

// kmsd is a kmsd process that kmsbench started.
type kmsd struct {
	*process
	dataDir string
	// socket is the path of its Kubernetes KMS plugin's socket
	// (-k8s-kms-socket), in a directory of its own, sockDir; "" without
	// the plugin.
	socket, sockDir string

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

// kmsdConfig is what every kmsd that kmsbench starts is given.
type kmsdConfig struct {
	bin       string
	logLevel  string    // kmsd's -log-level
	store     string    // kmsd's -store: a PostgreSQL URL, or "" for the embedded store
	masterKey string    // base64, the same for every node
	key       string    // the bootstrap API key, with the flag "*"
	sampleRSS bool      // read kmsd's resident memory every second until stop
	tls       *tlsFiles // with -tls: kmsd's certificate and key
	transit   bool      // serve Vault's transit interface (kmsd -transit)
	k8s       bool      // serve the Kubernetes KMS plugin on a socket (kmsd -k8s-kms-socket)
	aws       bool      // serve AWS KMS's protocol (kmsd -aws-kms)

	signingKey string // with -signing-key-pkcs11: kmsd's, a PKCS#11 URI
	pin        string // KMS_PKCS11_PIN for it, when set
}

// pinEnv is the variable from which kmsd reads a token's PIN when the
// URI has no pin-source.
const pinEnv = "KMS_PKCS11_PIN"

// newKmsdConfig returns the configuration of kmsd processes with a
// random master key and a random bootstrap API key.
func newKmsdConfig(bin, logLevel, store string, sampleRSS bool, tls *tlsFiles) *kmsdConfig {
	return &kmsdConfig{bin: bin, logLevel: logLevel, store: store, sampleRSS: sampleRSS, tls: tls,
		masterKey: randomBase64(32), key: "kmsbench-" + randomBase64(32)}
}

// startKmsd runs c.bin, named name in errors, on 127.0.0.1:0 with a
// fresh data directory (and, with c.k8s, its plugin's socket in a fresh
// directory), and waits until it listens.
func startKmsd(ctx context.Context, name string, c *kmsdConfig) (*kmsd, error) {
	dataDir, err := os.MkdirTemp("", "kmsbench-data-")
	if err != nil {
		return nil, err
	}
	k := &kmsd{dataDir: dataDir}
	args := []string{"-addr", "127.0.0.1:0", "-data", dataDir, "-log-level", c.logLevel}
	if c.k8s {
		if k.sockDir, err = os.MkdirTemp("", "kmsbench-k8s-"); err != nil {
			os.RemoveAll(dataDir)
			return nil, err
		}
		k.socket = filepath.Join(k.sockDir, "kms.sock")
		args = append(args, "-k8s-kms-socket", k.socket)
	}
	if c.tls != nil {
		args = append(args, "-tls-cert", c.tls.cert, "-tls-key", c.tls.key)
	}
	if c.transit {
		args = append(args, "-transit")
	}
	if c.aws {
		args = append(args, "-aws-kms")
	}
	if c.signingKey != "" {
		args = append(args, "-signing-key-pkcs11", c.signingKey)
	}
	cmd := exec.Command(c.bin, args...)
	cmd.Env = append(withoutKMS(os.Environ()),
		"KMS_MASTER_KEY="+c.masterKey,
		"KMS_BOOTSTRAP_API_KEY="+c.key)
	if c.store != "" {
		// kmsd's -store, from the environment: out of the process list.
		cmd.Env = append(cmd.Env, "KMS_STORE="+c.store)
	}
	if c.signingKey != "" && c.pin != "" {
		cmd.Env = append(cmd.Env, pinEnv+"="+c.pin)
	}
	stderr, err := cmd.StderrPipe()
	if err == nil {
		k.process, err = startProcess(ctx, name, cmd, stderr, listeningRE)
	}
	if err != nil {
		k.removeDirs()
		return nil, err
	}
	if c.sampleRSS {
		k.rssStop, k.rssDone = make(chan struct{}), make(chan struct{})
		go k.sampleRSS()
	}
	return k, nil
}

// stop stops kmsd (terminate) and removes its data directory. It may be
// called more than once.
func (k *kmsd) stop() error {
	k.stopOnce.Do(func() {
		if k.rssStop != nil {
			close(k.rssStop)
			<-k.rssDone
		}
		k.stopErr = k.terminate()
		k.removeDirs()
	})
	return k.stopErr
}

// removeDirs removes kmsd's data directory and its socket's.
func (k *kmsd) removeDirs() {
	os.RemoveAll(k.dataDir)
	if k.sockDir != "" {
		os.RemoveAll(k.sockDir)
	}
}

// addr is where kmsbench loads kmsd: the unix:// address of its plugin's
// socket when it serves one, else its URL.
func (k *kmsd) addr() string {
	if k.socket != "" {
		return "unix://" + k.socket
	}
	return k.url
}

// cluster is the kmsd processes that kmsbench started: one, or several
// nodes on one PostgreSQL database, with one master key.
type cluster struct {
	target string // the name of the target it is: kmsd, or postgres and embedded with -embedded, or against with -against
	nodes  []*kmsd
	key    string // the API key, with the flag "*"
	// apart is set when the nodes are services of their own (several on
	// the embedded store): each needs its ring and hashes.
	apart bool
}

// startCluster starts n kmsd of c one after the other, each once the
// one before listens; name is what errors and notes call one (with "node
// i" after it when n > 1). When it returns an error, none runs.
func startCluster(ctx context.Context, c *kmsdConfig, n int, name string, started func(*kmsd)) (*cluster, error) {
	cl := &cluster{target: "kmsd", key: c.key, apart: c.store == "" && n > 1}
	for i := range n {
		name := name
		if n > 1 {
			name = fmt.Sprintf("%s node %d", name, i+1)
		}
		k, err := startKmsd(ctx, name, c)
		if err != nil {
			cl.stop()
			return nil, err
		}
		cl.nodes = append(cl.nodes, k)
		started(k)
	}
	return cl, nil
}

// urls are where kmsbench loads the nodes (kmsd.addr), in order.
func (cl *cluster) urls() []string {
	var urls []string
	for _, k := range cl.nodes {
		urls = append(urls, k.addr())
	}
	return urls
}

// pids are the process IDs of the nodes, in order.
func (cl *cluster) pids() []int {
	var pids []int
	for _, k := range cl.nodes {
		pids = append(pids, k.cmd.Process.Pid)
	}
	return pids
}

// stop stops every node, all at once, and returns their errors. It may
// be called more than once.
func (cl *cluster) stop() error {
	errs := make([]error, len(cl.nodes))
	var wg sync.WaitGroup
	for i, k := range cl.nodes {
		wg.Go(func() { errs[i] = k.stop() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// rss returns the memory samples of each node, named by its address
// (kmsd.addr), as the rows name it.
func (cl *cluster) rss() []nodeRSS {
	var out []nodeRSS
	for _, k := range cl.nodes {
		out = append(out, nodeRSS{Target: cl.target, Node: k.addr(), rssStats: k.rss})
	}
	return out
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

// read reads r to the end, keeping its last lines, and sends the first
// group of the first line listeningRE matches (the URL) to listening.
func (t *tail) read(r io.Reader, listeningRE *regexp.Regexp, listening chan<- string) {
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
