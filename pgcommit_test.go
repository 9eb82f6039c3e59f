package kms_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/netproxy"
	"github.com/ringkms/kms/internal/pgtest"
)

// TestEncryptCommitCut: an encrypt whose batch's connection is cut just
// after its COMMIT went out is answered as the database holds it (done
// with its record in the trail, or Unavailable with none); cut just
// before the COMMIT, it is answered Unavailable (503) and no record was
// written.
func TestEncryptCommitCut(t *testing.T) {
	for _, tc := range []struct {
		name  string
		where netproxy.Cut
	}{
		{"after", netproxy.CutAfter},
		{"before", netproxy.CutBefore},
	} {
		t.Run(tc.name, func(t *testing.T) {
			direct := pgtest.URL(t)
			p, through := pgtest.Proxy(t, direct)
			e := newEnvOn(t, pgStoreAt(t, through), kms.Options{MasterKey: kms.GenerateMasterKey()})
			if _, err := e.svc.CreateKeyRing(e.root, kms.CreateKeyRingInput{Name: "r"}); err != nil {
				t.Fatal(err)
			}
			// The first encrypt reserves a block of uses for the key; the
			// next is one batch of the journal.
			e.encrypt(t, "r")
			c, err := pgx.Connect(context.Background(), direct)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close(context.Background()) })
			records := func() int {
				var n int
				if err := c.QueryRow(context.Background(), "SELECT count(*) FROM kms_trail").Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			}
			before := records()
			cut := p.CutOn(pgtest.PreparedMessage("COMMIT"), tc.where)
			_, err = e.svc.Encrypt(e.root, kms.EncryptInput{RingName: "r"})
			select {
			case <-cut:
			case <-time.After(10 * time.Second):
				t.Fatalf("the proxy never saw a COMMIT (Encrypt = %v)", err)
			}
			got := records() - before
			if tc.where == netproxy.CutAfter {
				// The COMMIT reached the server; whether it ran before the
				// server saw the connection end is the server's race (the
				// store's own test, TestCommitCut, pins the case where it
				// did). Either way the answer agrees with the database.
				switch {
				case err == nil && got != 1:
					t.Errorf("Encrypt answered done, but the trail grew by %d records, want 1", got)
				case err != nil && (got != 0 || kms.ErrorKind(err) != kms.KindUnavailable):
					t.Errorf("Encrypt = %v with the trail grown by %d records; want done with 1, or Unavailable with 0", err, got)
				}
			} else {
				if kms.ErrorKind(err) != kms.KindUnavailable {
					t.Errorf("Encrypt whose batch did not commit = %v, want kind Unavailable", err)
				}
				if got != 0 {
					t.Errorf("the trail grew by %d records after an Encrypt answered %v, want 0", got, err)
				}
			}
		})
	}
}
