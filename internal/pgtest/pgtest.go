// Package pgtest gives tests a real PostgreSQL: a fresh, empty database
// for each test, on a server named by KMS_TEST_POSTGRES_URL or, without
// it, on a throwaway server started from the machine's PostgreSQL
// binaries (initdb, pg_ctl) in a temporary directory, on a free port of
// 127.0.0.1, and removed afterwards.
//
// A package whose tests use it runs them through Main, so that they share
// one server:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
//
// Without PostgreSQL binaries (and no KMS_TEST_POSTGRES_URL), URL skips
// the test with a message saying how to get them; under CI=true it fails
// it instead, so that CI never passes by skipping. As root, the server
// runs as the user "postgres" (or "nobody"), since PostgreSQL refuses to
// run as root.
//
// For failover tests, StartPair starts a primary with a synchronous
// streaming standby for one test, which may kill the primary and promote
// the standby. Proxy puts a proxy (internal/netproxy) in front of a
// database, and QueryMessage gives the bytes of a statement on the wire,
// for such a proxy to cut a connection at.
package pgtest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvURL names the variable that points the tests at an existing server:
// a URL of a database on it whose user may create databases.
const EnvURL = "KMS_TEST_POSTGRES_URL"

// Install is what to do when no PostgreSQL is found.
const Install = "install PostgreSQL (Debian: apt-get install postgresql) or set " + EnvURL + " to a server whose user may create databases"

var (
	mu      sync.Mutex
	shared  bool    // Main is running the tests
	srv     *server // the shared server, once started
	srvErr  error   // why it could not start
	started bool
)

// Main runs the tests of m with one shared server, started by the first
// test that asks for a database, and stops it afterwards. It returns the
// exit code for os.Exit.
func Main(m *testing.M) int {
	mu.Lock()
	shared = true
	mu.Unlock()
	code := m.Run()
	mu.Lock()
	defer mu.Unlock()
	if srv != nil {
		srv.stop()
	}
	return code
}

// URL returns the URL of a new, empty database for t, dropped at the end
// of the test.
func URL(t testing.TB) string {
	t.Helper()
	base := os.Getenv(EnvURL)
	if base == "" {
		s := serverFor(t)
		base = s.url("postgres")
	}
	name := "kmstest_" + strings.ToLower(rand.Text()[:16])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("pgtest: connect to %s: %v", redact(base), err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Logf("pgtest: drop database %s: %v", name, err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Logf("pgtest: drop database %s: %v", name, err)
		}
	})
	return withDatabase(t, base, name)
}

// withDatabase returns base with its database replaced by name.
func withDatabase(t testing.TB, base, name string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(base)
	if err != nil {
		t.Fatalf("pgtest: %s: %v", EnvURL, err)
	}
	u := fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable", cfg.User, net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))), name)
	if cfg.Password != "" {
		u = fmt.Sprintf("postgres://%s:%s@%s/%s?sslmode=disable", cfg.User, cfg.Password, net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))), name)
	}
	if strings.HasPrefix(cfg.Host, "/") {
		u = fmt.Sprintf("postgres:///%s?host=%s&port=%d&user=%s&sslmode=disable", name, cfg.Host, cfg.Port, cfg.User)
		if cfg.Password != "" {
			u += "&password=" + cfg.Password
		}
	}
	return u
}

// serverFor returns the server of the test: the shared one under Main,
// else one for t alone.
func serverFor(t testing.TB) *server {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if shared {
		if !started {
			started = true
			srv, srvErr = start()
		}
		if srvErr != nil {
			unavailable(t, srvErr)
		}
		return srv
	}
	s, err := start()
	if err != nil {
		unavailable(t, err)
	}
	t.Cleanup(s.stop)
	return s
}

// errNoBinaries is why no server could be started when there is nothing
// to start it with.
var errNoBinaries = errors.New("no PostgreSQL binaries (initdb, pg_ctl) on PATH or in /usr/lib/postgresql/*/bin")

func unavailable(t testing.TB, err error) {
	t.Helper()
	if errors.Is(err, errNoBinaries) && os.Getenv("CI") != "true" {
		t.Skipf("pgtest: %v: %s", err, Install)
	}
	t.Fatalf("pgtest: %v (%s)", err, Install)
}

// server is a throwaway PostgreSQL server.
type server struct {
	dir    string // holds data/, the socket and the log
	bin    string // the directory of pg_ctl
	port   int
	cred   *syscall.Credential
	stopMu sync.Once
}

func (s *server) url(db string) string {
	return fmt.Sprintf("postgres://kms@127.0.0.1:%d/%s?sslmode=disable", s.port, db)
}

// binDir finds the directory holding initdb and pg_ctl.
func binDir() (string, error) {
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if _, err := exec.LookPath("initdb"); err == nil {
			if r, err := filepath.EvalSymlinks(p); err == nil {
				return filepath.Dir(r), nil
			}
			return filepath.Dir(p), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", errNoBinaries
}

func version(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// start initialises a cluster in a new temporary directory and starts it.
func start() (*server, error) {
	s, err := newServer()
	if err != nil {
		return nil, err
	}
	if out, err := s.run("initdb", "-D", s.data(), "-U", "kms", "--auth=trust", "-E", "UTF8", "--no-sync"); err != nil {
		s.remove()
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	if err := s.launch(""); err != nil {
		s.remove()
		return nil, err
	}
	return s, nil
}

// newServer makes the temporary directory of a server, owned by the user
// the server will run as, without a cluster in it yet.
func newServer() (*server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "ringkms-pg-")
	if err != nil {
		return nil, err
	}
	s := &server{dir: dir, bin: bin}
	if os.Geteuid() == 0 {
		// PostgreSQL refuses to run as root.
		if s.cred, err = unprivileged(); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		if err := os.Chown(dir, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	return s, nil
}

// launch starts the cluster in s.data() on a free port, with the server
// options extra added to the usual ones (later -c settings win). A port
// taken between choosing and binding it is retried with another.
func (s *server) launch(extra string) error {
	var err error
	for attempt := 0; ; attempt++ {
		if s.port, err = freePort(); err != nil {
			return err
		}
		opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200 %s", s.port, s.dir, extra)
		out, err := s.run("pg_ctl", "-D", s.data(), "-o", opts, "-l", filepath.Join(s.dir, "log"), "-w", "-t", "60", "start")
		if err == nil {
			return nil
		}
		if attempt == 2 {
			log, _ := os.ReadFile(filepath.Join(s.dir, "log"))
			return fmt.Errorf("pg_ctl start: %v\n%s\n%s", err, out, log)
		}
	}
}

func (s *server) data() string { return filepath.Join(s.dir, "data") }

func (s *server) remove() { os.RemoveAll(s.dir) }

// run runs a PostgreSQL program of s.bin as the server's user.
func (s *server) run(prog string, args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(s.bin, prog), args...)
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C", "LANG=C")
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	return cmd.CombinedOutput()
}

func (s *server) stop() {
	s.stopMu.Do(func() {
		s.run("pg_ctl", "-D", s.data(), "-m", "immediate", "-w", "stop")
		s.remove()
	})
}

// unprivileged returns the credential of the user "postgres", or "nobody".
func unprivileged() (*syscall.Credential, error) {
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.Atoi(u.Uid)
		gid, err2 := strconv.Atoi(u.Gid)
		if err1 == nil && err2 == nil {
			return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
		}
	}
	return nil, errors.New("running as root, and no user postgres or nobody to run PostgreSQL as")
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// redact hides a password in a URL for messages.
func redact(u string) string {
	cfg, err := pgx.ParseConfig(u)
	if err != nil || cfg.Password == "" {
		return u
	}
	return strings.ReplaceAll(u, cfg.Password, "*****")
}
