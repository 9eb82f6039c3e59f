package pgstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/netproxy"
	"github.com/ringkms/kms/internal/pgtest"
)

// cutProxy starts a netproxy in front of a fresh database and returns
// it, the database's URL through the proxy, and its direct URL.
func cutProxy(t *testing.T) (*netproxy.Proxy, string, string) {
	t.Helper()
	direct := pgtest.URL(t)
	p, through := pgtest.Proxy(t, direct)
	return p, through, direct
}

// TestCommitCut: a connection cut just after the COMMIT of an Update or
// an AppendIn was sent (the server commits, its answer is lost) is
// settled through the commit's marker: the call returns nil and the
// writes are there. Cut just before, the call returns an error of kind
// Unavailable saying nothing was written, and nothing is there.
func TestCommitCut(t *testing.T) {
	for _, tc := range []struct {
		name   string
		where  netproxy.Cut
		append bool
	}{
		{"Update/after", netproxy.CutAfter, false},
		{"Update/before", netproxy.CutBefore, false},
		{"AppendIn/after", netproxy.CutAfter, true},
		{"AppendIn/before", netproxy.CutBefore, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, through, direct := cutProxy(t)
			s := openStore(t, through, Options{})
			ctx := t.Context()
			// A first transaction, so that the second finds its
			// statements prepared, as under load.
			if err := s.Update(ctx, func(tx kms.Txn) error { return tx.Set([]byte("warm"), []byte("up")) }); err != nil {
				t.Fatalf("Update = %v", err)
			}
			key, val, rec := []byte("k"), []byte("v"), []byte("record 1")
			cut := p.CutOn(pgtest.PreparedMessage(sqlCommit), tc.where)
			start := time.Now()
			var err error
			if tc.append {
				err = s.trail.AppendIn(ctx, func(tx kms.Txn) (uint64, [][]byte, error) {
					if _, err := tx.Get([]byte("warm")); err != nil {
						return 0, nil, err
					}
					return 1, [][]byte{rec}, tx.Set(key, val)
				})
			} else {
				err = s.Update(ctx, func(tx kms.Txn) error { return tx.Set(key, val) })
			}
			select {
			case <-cut:
			case <-time.After(10 * time.Second):
				t.Fatalf("the proxy never saw the COMMIT (call returned %v)", err)
			}
			t.Logf("answered in %v: %v", time.Since(start), err)

			c := sqlConn(t, direct)
			var got []byte
			rerr := c.QueryRow(context.Background(), "SELECT value FROM kms_kv WHERE key = $1", key).Scan(&got)
			found := rerr == nil
			if rerr != nil && !errors.Is(rerr, pgx.ErrNoRows) {
				t.Fatalf("read the key: %v", rerr)
			}
			var recs int
			if err := c.QueryRow(context.Background(), "SELECT count(*) FROM kms_trail").Scan(&recs); err != nil {
				t.Fatalf("count the trail: %v", err)
			}
			if tc.where == netproxy.CutAfter {
				if err != nil {
					t.Errorf("call cut after its COMMIT = %v, want nil (it committed)", err)
				}
				if !found || !bytes.Equal(got, val) {
					t.Errorf("after a commit answered nil, the key holds %q (found %v), want %q", got, found, val)
				}
				if tc.append && recs != 1 {
					t.Errorf("the trail holds %d records after an AppendIn answered nil, want 1", recs)
				}
				if tc.append && s.trail.Len() != 1 {
					t.Errorf("Len() = %d after the AppendIn, want 1", s.trail.Len())
				}
			} else {
				if kms.ErrorKind(err) != kms.KindUnavailable || !strings.Contains(kms.ErrorMessage(err), "nothing was written") {
					t.Errorf("call cut before its COMMIT = %v, want kind Unavailable saying nothing was written", err)
				}
				if found {
					t.Errorf("the key was written by a call that answered %v", err)
				}
				if recs != 0 {
					t.Errorf("the trail holds %d records after an AppendIn that failed, want 0", recs)
				}
			}
			// The Store works on: the next transaction commits.
			if err := s.Update(ctx, func(tx kms.Txn) error { return tx.Set([]byte("next"), nil) }); err != nil {
				t.Errorf("Update after the cut = %v, want nil", err)
			}
		})
	}
}

// TestCommitMarkersSwept: each transaction that writes leaves a marker,
// and markers older than markerAge are deleted by a later commit's sweep.
func TestCommitMarkersSwept(t *testing.T) {
	dbURL := pgtest.URL(t)
	s := openStore(t, dbURL, Options{})
	ctx := t.Context()
	c := sqlConn(t, dbURL)
	count := func() int {
		var n int
		if err := c.QueryRow(ctx, "SELECT count(*) FROM kms_commits").Scan(&n); err != nil {
			t.Fatalf("count markers: %v", err)
		}
		return n
	}
	if err := s.Update(ctx, func(tx kms.Txn) error { return tx.Set([]byte("a"), nil) }); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(ctx, func(tx kms.Txn) error { _, err := tx.Get([]byte("a")); return err }); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 1 {
		t.Fatalf("%d markers after one writing and one reading Update, want 1", n)
	}
	exec(t, c, fmt.Sprintf("UPDATE kms_commits SET at = at - interval '%d seconds'", int(2*markerAge/time.Second)))
	s.sweep.next.Store(0)
	if err := s.Update(ctx, func(tx kms.Txn) error { return tx.Set([]byte("b"), nil) }); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for count() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d markers 5 s after a sweep of the old one, want 1", count())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// outage is how long the tests below keep the database out of reach: well
// past the round-trip bound they open their Store with.
const (
	settleTimeout = time.Second
	outage        = 4 * settleTimeout
)

// updateAsync runs an Update that sets key in the background; its error
// arrives on the channel.
func updateAsync(s *Store, key []byte) <-chan error {
	done := make(chan error, 1)
	go func() {
		done <- s.Update(context.Background(), func(tx kms.Txn) error { return tx.Set(key, []byte("v")) })
	}()
	return done
}

// stillWaiting fails the test if the call has returned.
func stillWaiting(t *testing.T, done <-chan error, what string) {
	t.Helper()
	select {
	case err := <-done:
		t.Fatalf("the call returned %s: %v; want it to wait until its outcome is known", what, err)
	default:
	}
}

// answer waits for the call's error.
func answer(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("the call has not returned 30 s after the database came back")
		return nil
	}
}

// openWarm opens a Store on url with the tests' round-trip bound and makes
// a first write, so that the store's tables exist before any cut.
func openWarm(t *testing.T, url string) *Store {
	t.Helper()
	s, err := Open(t.Context(), url, Options{QueryTimeout: settleTimeout})
	if err != nil {
		t.Fatalf("Open = %v", err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Update(t.Context(), func(tx kms.Txn) error { return tx.Set([]byte("warm"), []byte("up")) }); err != nil {
		t.Fatalf("Update = %v", err)
	}
	return s
}

// updateCutAtCommit runs an Update that sets key, with the proxy cutting
// the connection after its COMMIT and refusing new ones, keeps the
// database out of reach for the outage, and checks that the call is still
// waiting then; its error arrives on the channel.
func updateCutAtCommit(t *testing.T, p *netproxy.Proxy, s *Store, key []byte, what string) <-chan error {
	t.Helper()
	cut := p.CutOnThen(pgtest.PreparedMessage(sqlCommit), netproxy.CutAfter, netproxy.Refuse)
	done := updateAsync(s, key)
	select {
	case <-cut:
	case <-time.After(30 * time.Second):
		t.Fatal("the proxy never saw the COMMIT")
	}
	time.Sleep(outage)
	stillWaiting(t, done, what)
	return done
}

// agrees fails the test if the call's answer err disagrees with whether
// the database (named db in the messages) holds its write.
func agrees(t *testing.T, err error, found bool, db string) {
	t.Helper()
	t.Logf("answer %v; the key is on %s: %v", err, db, found)
	switch {
	case err == nil && !found:
		t.Fatalf("the call answered nil, and %s does not hold its write", db)
	case err != nil && found:
		t.Fatalf("the call answered %v, and %s holds its write", err, db)
	}
}

// hasKey reports whether the database at url holds key.
func hasKey(t *testing.T, url string, key []byte) bool {
	t.Helper()
	return readKey(t, url, key, false)
}

// replayed reports whether the standby at url holds key: false too while
// it has yet to replay the creation of the store's table.
func replayed(t *testing.T, url string, key []byte) bool {
	t.Helper()
	return readKey(t, url, key, true)
}

// readKey reports whether the database at url holds key; with noTable, a
// store's table that does not exist yet reads as no key.
func readKey(t *testing.T, url string, key []byte, noTable bool) bool {
	t.Helper()
	var v []byte
	err := sqlConn(t, url).QueryRow(context.Background(), "SELECT value FROM kms_kv WHERE key = $1", key).Scan(&v)
	var pgErr *pgconn.PgError
	if noTable && errors.As(err, &pgErr) && pgErr.Code == "42P01" { // undefined_table
		return false
	}
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		t.Fatalf("read the key: %v", err)
	}
	return err == nil
}

// TestCommitSettledAcrossOutage: a commit cut after its COMMIT was sent,
// with the database then out of reach for several round-trip bounds (as
// during a failover), is settled once the database is back: the call
// waits meanwhile, and its answer agrees with what the database holds; it
// never answers that the outcome is unknown. Closing the Store during the
// outage ends the wait with an error that says the outcome is unknown.
func TestCommitSettledAcrossOutage(t *testing.T) {
	for _, closeIt := range []bool{false, true} {
		name := "database back"
		if closeIt {
			name = "store closed"
		}
		t.Run(name, func(t *testing.T) {
			p, through, direct := cutProxy(t)
			s := openWarm(t, through)
			// The database goes out of reach with the cut, before the
			// settling can look anything up.
			key := []byte("k")
			done := updateCutAtCommit(t, p, s, key, "while the database was out of reach")
			if closeIt {
				s.Close()
				err := answer(t, done)
				if kms.ErrorKind(err) != kms.KindUnavailable || !strings.Contains(kms.ErrorMessage(err), "before the store was closed") {
					t.Fatalf("the call after Close = %v, want kind Unavailable saying the outcome could not be found out before the store was closed", err)
				}
				return
			}
			p.SetMode(netproxy.Pass)
			err := answer(t, done)
			agrees(t, err, hasKey(t, direct, key), "the database")
			if err != nil && !strings.Contains(kms.ErrorMessage(err), "nothing was written") {
				t.Fatalf("the call answered %v, want nil or an error saying nothing was written", err)
			}
		})
	}
}

// TestCommitSettledAfterStandby: a commit waiting for a synchronous
// standby that is gone (here: the primary waits for a standby name that no
// standby streams under) is not answered as done when its connection is
// lost and the old session is terminated, which leaves the transaction
// committed on the primary alone: the call waits until a synchronous
// standby confirms a later commit, and then answers nil.
func TestCommitSettledAfterStandby(t *testing.T) {
	pair := pgtest.StartPair(t)
	s := openWarm(t, pair.PrimaryURL())
	pair.SyncStandbys("no_such_standby")
	done := updateAsync(s, []byte("k"))
	time.Sleep(outage)
	stillWaiting(t, done, "while no synchronous standby could confirm its commit")
	pair.SyncStandbys(pgtest.StandbyName)
	if err := answer(t, done); err != nil {
		t.Fatalf("the call once the standby confirms = %v, want nil", err)
	}
	if !hasKey(t, pair.PrimaryURL(), []byte("k")) {
		t.Fatal("the call answered nil, and the database does not hold its write")
	}
}

// TestCommitSettledOnPrimary: a commit cut after its COMMIT was sent is
// settled on a server that takes writes, never on a standby. A node whose
// URL names a standby too (without target_session_attrs=read-write, or
// behind a name or a pooler that may lead elsewhere for a moment) may
// find itself on the standby when it reconnects to settle: the standby
// lists none of the primary's sessions, and need not have replayed the
// commit yet (a synchronous standby flushes a commit before the primary
// answers; it may replay it later). Here the standby's replay is paused,
// and the primary is out of reach until the settling has had every chance
// to look on the standby: the call still waits, and then answers that its
// write was made.
func TestCommitSettledOnPrimary(t *testing.T) {
	pair := pgtest.StartPair(t)
	p, multi := pair.ProxyPrimary()
	// The primary through the proxy, then the standby; no
	// target_session_attrs: a new connection takes the first that
	// answers.
	through := strings.Replace(multi, "&target_session_attrs=read-write", "", 1)
	s := openWarm(t, through)
	// The standby has the store's tables and the first write; from now
	// on it replays nothing.
	deadline := time.Now().Add(30 * time.Second)
	for !replayed(t, pair.StandbyURL(), []byte("warm")) {
		if time.Now().After(deadline) {
			t.Fatal("the standby has not replayed the first write in 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	exec(t, sqlConn(t, pair.StandbyURL()), "SELECT pg_wal_replay_pause()")

	key := []byte("k")
	done := updateCutAtCommit(t, p, s, key, "while the primary was out of reach and only the standby answered")
	p.SetMode(netproxy.Pass)
	err := answer(t, done)
	found := hasKey(t, pair.PrimaryURL(), key)
	agrees(t, err, found, "the primary")
	if !found {
		t.Fatal("the primary does not hold a write whose COMMIT reached it; the test shows nothing")
	}
}
