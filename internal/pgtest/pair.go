package pgtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"
)

// StandbyName is the application_name the standby streams under, and the
// one the primary waits for in synchronous_standby_names.
const StandbyName = "kmstest_standby"

// Pair is a primary with one synchronous streaming standby, started for
// one test and removed at its end. A commit on the primary returns only
// once the standby has flushed it, so whatever a test committed survives
// KillPrimary and Promote.
//
// The pair is always started from the machine's binaries, even when
// KMS_TEST_POSTGRES_URL names a server: tests kill and promote its
// servers, so they cannot be shared.
type Pair struct {
	t        testing.TB
	db       string
	primary  *server
	standby  *server
	promoted bool
}

// StartPair starts a fresh primary, creates a database for the test on
// it, makes a standby of it with pg_basebackup -R and waits until the
// standby streams synchronously. Without PostgreSQL binaries it skips the
// test, or fails it under CI=true, as URL does.
func StartPair(t testing.TB) *Pair {
	t.Helper()
	p := &Pair{t: t, db: "kmstest_" + strings.ToLower(rand.Text()[:16])}

	primary, err := newServer()
	if err != nil {
		unavailable(t, err)
	}
	p.primary = primary
	t.Cleanup(primary.stop)
	if out, err := primary.run("initdb", "-D", primary.data(), "-U", "kms", "--auth=trust", "-E", "UTF8", "--no-sync"); err != nil {
		t.Fatalf("pgtest: initdb: %v\n%s", err, out)
	}
	// initdb --auth=trust already allows replication from 127.0.0.1; say
	// so here rather than depend on the sample file.
	hba, err := os.OpenFile(filepath.Join(primary.data(), "pg_hba.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	_, err = hba.WriteString("host replication all 127.0.0.1/32 trust\n")
	if cerr := hba.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("pgtest: pg_hba.conf: %v", err)
	}
	// The primary waits for the standby only once there is one (below):
	// until then, every commit would hang.
	if err := primary.launch("-c wal_level=replica -c max_wal_senders=4 -c synchronous_commit=on"); err != nil {
		t.Fatalf("pgtest: primary: %v", err)
	}
	p.exec(primary.url("postgres"), "CREATE DATABASE "+p.db)

	standby, err := newServer()
	if err != nil {
		t.Fatalf("pgtest: standby: %v", err)
	}
	p.standby = standby
	t.Cleanup(standby.stop)
	conninfo := fmt.Sprintf("host=127.0.0.1 port=%d user=kms application_name=%s", primary.port, StandbyName)
	if out, err := standby.run("pg_basebackup", "-D", standby.data(), "-d", conninfo, "-R", "-X", "stream", "-c", "fast", "--no-sync"); err != nil {
		t.Fatalf("pgtest: pg_basebackup: %v\n%s", err, out)
	}
	// On the command line, which outranks the configuration files
	// pg_basebackup copied: once promoted, the standby must not wait for
	// a standby of its own, or every commit would hang.
	if err := standby.launch("-c hot_standby=on -c synchronous_standby_names=''"); err != nil {
		t.Fatalf("pgtest: standby: %v", err)
	}
	p.exec(primary.url("postgres"), "ALTER SYSTEM SET synchronous_standby_names = '"+StandbyName+"'")
	p.exec(primary.url("postgres"), "SELECT pg_reload_conf()")
	p.waitSync()
	return p
}

// PrimaryURL is the URL of the test's database on the primary.
func (p *Pair) PrimaryURL() string { return p.primary.url(p.db) }

// StandbyURL is the URL of the test's database on the standby: read-only
// until Promote.
func (p *Pair) StandbyURL() string { return p.standby.url(p.db) }

// MultiURL names both servers, primary first, and asks for the one that
// takes writes (target_session_attrs=read-write): before a failover it
// reaches the primary, after KillPrimary and Promote the standby.
func (p *Pair) MultiURL() string {
	return fmt.Sprintf("postgres://kms@127.0.0.1:%d,127.0.0.1:%d/%s?sslmode=disable&target_session_attrs=read-write&connect_timeout=5",
		p.primary.port, p.standby.port, p.db)
}

// PrimaryAddr and StandbyAddr are the host:port of each server, for a
// proxy to stand in front of.
func (p *Pair) PrimaryAddr() string { return fmt.Sprintf("127.0.0.1:%d", p.primary.port) }

// StandbyAddr: see PrimaryAddr.
func (p *Pair) StandbyAddr() string { return fmt.Sprintf("127.0.0.1:%d", p.standby.port) }

// KillPrimary SIGKILLs the primary's postmaster and every process it
// started, as a crash of its machine would: open connections break at
// once and nothing is flushed or handed over. It returns once the
// postmaster is gone.
func (p *Pair) KillPrimary() {
	p.t.Helper()
	pid := postmasterPID(p.t, p.primary)
	children := childrenOf(pid)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		p.t.Fatalf("pgtest: kill primary %d: %v", pid, err)
	}
	for _, c := range children {
		syscall.Kill(c, syscall.SIGKILL)
	}
	deadline := time.Now().Add(30 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			p.t.Fatalf("pgtest: primary %d still alive after SIGKILL", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Promote makes the standby a primary and returns once it takes writes.
func (p *Pair) Promote() {
	p.t.Helper()
	if out, err := p.standby.run("pg_ctl", "-D", p.standby.data(), "-w", "-t", "60", "promote"); err != nil {
		p.t.Fatalf("pgtest: promote: %v\n%s", err, out)
	}
	p.promoted = true
	deadline := time.Now().Add(60 * time.Second)
	for {
		var recovering bool
		err := p.query(p.StandbyURL(), "SELECT pg_is_in_recovery()", &recovering)
		if err == nil && !recovering {
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("pgtest: standby still in recovery a minute after promotion (last error: %v)", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// SyncStandbys sets the primary's synchronous_standby_names to names and
// returns once the primary runs with it: "" makes the standby an
// asynchronous one; a name no standby streams under makes every commit on
// the primary wait, as it does when the synchronous standby is gone;
// StandbyName is how the pair starts.
func (p *Pair) SyncStandbys(names string) {
	p.t.Helper()
	url := p.primary.url("postgres")
	p.exec(url, "ALTER SYSTEM SET synchronous_standby_names = '"+strings.ReplaceAll(names, "'", "''")+"'")
	p.exec(url, "SELECT pg_reload_conf()")
	deadline := time.Now().Add(30 * time.Second)
	for {
		var got string
		err := p.query(url, "SHOW synchronous_standby_names", &got)
		if err == nil && got == names {
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("pgtest: synchronous_standby_names is %q, not %q, 30 s after the reload (error %v)", got, names, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitSync waits until the primary reports the standby as synchronous.
func (p *Pair) waitSync() {
	p.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var state string
		err := p.query(p.primary.url("postgres"), "SELECT sync_state FROM pg_stat_replication WHERE application_name = '"+StandbyName+"'", &state)
		if err == nil && state == "sync" {
			return
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(p.standby.dir, "log"))
			p.t.Fatalf("pgtest: standby not synchronous after a minute (state %q, error %v)\n%s", state, err, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (p *Pair) exec(url, sql string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		p.t.Fatalf("pgtest: connect: %v", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sql); err != nil {
		p.t.Fatalf("pgtest: %s: %v", sql, err)
	}
}

func (p *Pair) query(url, sql string, dst any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.QueryRow(ctx, sql).Scan(dst)
}

// postmasterPID reads the first line of postmaster.pid.
func postmasterPID(t testing.TB, s *server) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.data(), "postmaster.pid"))
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || pid <= 0 {
		t.Fatalf("pgtest: postmaster.pid: %q", line)
	}
	return pid
}

// childrenOf lists the processes whose parent is pid, from /proc; where
// there is no /proc it finds none, and the children die on their own
// once they notice the postmaster is gone.
func childrenOf(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The fields after the command, which is in parentheses and may
		// hold spaces: state, ppid, ...
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out
}

// QueryMessage is the PostgreSQL simple-protocol Query message carrying
// sql, as a client sends it: 'Q', the length, the text and a NUL. pgx
// sends a statement without arguments this way, so QueryMessage("commit")
// is what tx.Commit writes, for a proxy to watch for.
func QueryMessage(sql string) []byte {
	b := make([]byte, 0, 1+4+len(sql)+1)
	b = append(b, 'Q')
	b = binary.BigEndian.AppendUint32(b, uint32(4+len(sql)+1))
	b = append(b, sql...)
	return append(b, 0)
}

// PreparedMessage is what pgx sends to run sql from its statement cache,
// with no arguments: Bind of the prepared statement it names after the
// SHA-256 of the text ("stmtcache_" and 24 bytes of it in hex), Describe
// of the portal and Execute. A store that sends its COMMIT in a batch
// with other statements runs it this way, so PreparedMessage("COMMIT") is
// what a proxy watches for to cut a connection at a commit. (Should pgx
// name its statements otherwise, a test that waits for these bytes
// fails, saying the proxy never saw them.)
func PreparedMessage(sql string) []byte {
	b, err := (&pgproto3.Bind{PreparedStatement: statementName(sql)}).Encode(nil)
	if err == nil {
		b, err = (&pgproto3.Describe{ObjectType: 'P'}).Encode(b)
	}
	if err == nil {
		b, err = (&pgproto3.Execute{}).Encode(b)
	}
	if err != nil {
		panic("pgtest: encode a prepared statement's messages: " + err.Error()) // fixed messages always encode
	}
	return b
}

// BoundStatement is what the Bind that pgx sends to run sql from its
// statement cache holds whatever its arguments: the empty name of the
// portal, then the prepared statement's. It marks the run of a statement
// with arguments, where PreparedMessage, which carries none, cannot. (The
// Parse that prepares the statement has its name after the message's
// length, whose last byte is zero for one length of the text in 256.)
func BoundStatement(sql string) []byte {
	return []byte("\x00" + statementName(sql) + "\x00")
}

// statementName is the name under which pgx prepares sql in its
// statement cache.
func statementName(sql string) string {
	d := sha256.Sum256([]byte(sql))
	return "stmtcache_" + hex.EncodeToString(d[:24])
}
