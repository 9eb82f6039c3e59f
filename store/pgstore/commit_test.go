package pgstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/netproxy"
	"github.com/ringkms/kms/internal/pgtest"
)

// cutProxy starts a netproxy in front of a fresh database and returns
// it, the database's URL through the proxy, and its direct URL.
func cutProxy(t *testing.T) (*netproxy.Proxy, string, string) {
	t.Helper()
	direct := pgtest.URL(t)
	cfg, err := pgx.ParseConfig(direct)
	if err != nil {
		t.Fatalf("ParseConfig: %v", err)
	}
	if strings.HasPrefix(cfg.Host, "/") {
		t.Skipf("database on a Unix socket; a TCP proxy needs a TCP server")
	}
	p, err := netproxy.New(cfg.Host + ":" + strconv.Itoa(int(cfg.Port)))
	if err != nil {
		t.Fatalf("netproxy.New: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	u, err := url.Parse(direct)
	if err != nil {
		t.Fatalf("url.Parse: %v", err)
	}
	u.Host = p.Addr()
	return p, u.String(), direct
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
