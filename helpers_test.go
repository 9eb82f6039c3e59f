package kms_test

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/pgtest"
	"github.com/ringkms/kms/kmstest"
	"github.com/ringkms/kms/store/pgstore"
)

// TestMain shares one PostgreSQL server among the tests that run on one
// (pgtest), started by the first of them.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// env is a Service over a fresh in-memory store, with a root principal.
type env struct {
	svc  *kms.Service
	root context.Context // carries the bootstrap key's principal (flag "*")
	acct string          // the root Account ID
}

func newEnv(tb testing.TB) *env {
	tb.Helper()
	return newEnvOn(tb, kmstest.MemoryStore(tb), kms.Options{MasterKey: kms.GenerateMasterKey()})
}

// newEnvAt starts an env on a new in-memory store whose Service's clock
// starts at at and moves only when the test advances it.
func newEnvAt(tb testing.TB, at time.Time) (*env, *kmstest.Clock) {
	tb.Helper()
	clock := kmstest.ClockAt(at)
	return newEnvOn(tb, kmstest.MemoryStore(tb), kms.Options{MasterKey: kms.GenerateMasterKey(), Now: clock.Now}), clock
}

func newEnvOn(tb testing.TB, st kms.Store, opts kms.Options) *env {
	tb.Helper()
	svc := serviceOn(tb, st, opts)
	root := bootstrapRoot(tb, svc)
	return &env{svc: svc, root: root, acct: kms.PrincipalFrom(root).AccountID}
}

// serviceOn starts a Service over st with opts; the Service and st are
// closed at the end of the test.
func serviceOn(tb testing.TB, st kms.Store, opts kms.Options) *kms.Service {
	tb.Helper()
	svc, err := kms.New(st, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		svc.Close()
		st.Close()
	})
	return svc
}

// as returns a context acting with a new API key of the root Account that
// holds flags.
func (e *env) as(tb testing.TB, flags kms.Flags) context.Context {
	tb.Helper()
	return e.asIn(tb, e.acct, flags)
}

// asIn is as with a new API key of the Account with ID account.
func (e *env) asIn(tb testing.TB, account string, flags kms.Flags) context.Context {
	tb.Helper()
	k, err := e.svc.CreateAPIKey(e.root, kms.APIKeyInput{AccountID: account, Flags: flags})
	if err != nil {
		tb.Fatal(err)
	}
	p, err := e.svc.Authenticate(context.Background(), k.Key)
	if err != nil {
		tb.Fatal(err)
	}
	return kms.WithPrincipal(context.Background(), p)
}

func (e *env) ring(tb testing.TB, name string) *kms.CreateKeyRingResult {
	tb.Helper()
	r, err := e.svc.CreateKeyRing(e.root, kms.CreateKeyRingInput{Name: name, KEM: "x25519"})
	if err != nil {
		tb.Fatalf("CreateKeyRing(%q) = %v", name, err)
	}
	return r
}

// encrypt encrypts on ring as root and returns the answer.
func (e *env) encrypt(tb testing.TB, ring string) *kms.EncryptResult {
	tb.Helper()
	res, err := e.svc.Encrypt(e.root, kms.EncryptInput{RingName: ring})
	if err != nil {
		tb.Fatalf("Encrypt(%s) = %v", ring, err)
	}
	return res
}

// encryptBatch encrypts count items on ring in one batch as root and
// returns the answer.
func (e *env) encryptBatch(tb testing.TB, ring string, count int) *kms.EncryptBatchResult {
	tb.Helper()
	res, err := e.svc.EncryptBatch(e.root, kms.EncryptBatchInput{RingName: ring, Count: count})
	if err != nil {
		tb.Fatalf("EncryptBatch(%s, %d) = %v", ring, count, err)
	}
	return res
}

// account creates an Account with the UID uid as root and returns it.
func (e *env) account(tb testing.TB, uid string) *kms.Account {
	tb.Helper()
	a, err := e.svc.CreateAccount(e.root, kms.AccountInput{UID: uid})
	if err != nil {
		tb.Fatalf("CreateAccount(%q) = %v", uid, err)
	}
	return a
}

// ringOfRingKeys is ring with dataKeys "ring", named: the ring's key is
// every call's data key.
func (e *env) ringOfRingKeys(tb testing.TB, name string) *kms.CreateKeyRingResult {
	tb.Helper()
	r, err := e.svc.CreateKeyRing(e.root, kms.CreateKeyRingInput{Name: name, KEM: "x25519", DataKeys: kms.DataKeysRing})
	if err != nil {
		tb.Fatalf("CreateKeyRing(%q, ring) = %v", name, err)
	}
	return r
}

func wantKind(tb testing.TB, what string, err error, kind kms.Kind) {
	tb.Helper()
	if err == nil {
		tb.Fatalf("%s = nil error, want kind %s", what, kind)
	}
	if got := kms.ErrorKind(err); got != kind {
		tb.Fatalf("%s = %v (kind %s), want kind %s", what, err, got, kind)
	}
}

// pgNodes starts n Services with opts over one new PostgreSQL database,
// as the nodes of a cluster, closed at the end of the test. wrap, when
// set, gives the store node i runs on, over its own.
func pgNodes(t *testing.T, n int, opts kms.Options, wrap func(i int, st kms.Store) kms.Store) []*kms.Service {
	t.Helper()
	open := pgOpener(t)
	nodes := make([]*kms.Service, n)
	for i := range nodes {
		pst := open()
		var st kms.Store = pst
		if wrap != nil {
			st = wrap(i, pst)
		}
		svc, err := kms.New(st, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { svc.Close() })
		nodes[i] = svc
	}
	return nodes
}

// pgOpener makes a new PostgreSQL database and returns a function that
// opens a store on it, a pool of its own (a node's), closed at the end of
// the test.
func pgOpener(t *testing.T) func() *pgstore.Store {
	t.Helper()
	url := pgtest.URL(t)
	return func() *pgstore.Store {
		t.Helper()
		return pgStoreAt(t, url)
	}
}

// pgStoreAt opens a store on the PostgreSQL database of url, closed at
// the end of the test.
func pgStoreAt(t *testing.T, url string) *pgstore.Store {
	t.Helper()
	st, err := pgstore.Open(context.Background(), url, pgstore.Options{})
	if err != nil {
		t.Fatalf("pgstore.Open = %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// bootstrapRoot bootstraps svc with a generated secret and returns a
// context acting as its root key.
func bootstrapRoot(tb testing.TB, svc *kms.Service) context.Context {
	tb.Helper()
	ctx := context.Background()
	b, err := svc.Bootstrap(ctx, "")
	if err != nil {
		tb.Fatal(err)
	}
	p, err := svc.Authenticate(ctx, b.Secret)
	if err != nil {
		tb.Fatal(err)
	}
	return kms.WithPrincipal(ctx, p)
}

// asApplication returns a context acting as the application name of svc
// (Service.Application).
func asApplication(tb testing.TB, svc *kms.Service, name string) context.Context {
	tb.Helper()
	ctx := context.Background()
	p, err := svc.Application(ctx, name)
	if err != nil {
		tb.Fatal(err)
	}
	return kms.WithPrincipal(ctx, p)
}

// startApplication starts a Service over st under the root key rk and
// returns it and a context acting as its application name; the caller
// closes the Service.
func startApplication(tb testing.TB, st kms.Store, rk kms.RootKey, name string) (*kms.Service, context.Context) {
	tb.Helper()
	svc, err := kms.New(st, kms.Options{MasterKey: rk})
	if err != nil {
		tb.Fatal(err)
	}
	return svc, asApplication(tb, svc, name)
}

// storedRing puts a ring in a new store as another release wrote it: a
// Service over the store, acting as an application, makes the ring "old"
// (X25519), and is closed; change then rewrites the ring's record, given
// decoded (rec), in one transaction with the store (tx, for other keys).
// storedRing returns a new Service over the store, closed at the end of
// the test, and the application's context.
func storedRing(t *testing.T, change func(tx kms.Txn, ringID string, rec map[string]json.RawMessage) error) (*kms.Service, context.Context) {
	t.Helper()
	ctx := context.Background()
	st := kmstest.MemoryStore(t)
	mk := kms.GenerateMasterKey()
	svc, app := startApplication(t, st, mk, "before")
	ring, err := svc.CreateKeyRing(app, kms.CreateKeyRingInput{Name: "old", KEM: "x25519"})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Close(); err != nil {
		t.Fatal(err)
	}
	key := []byte("ring/id/" + ring.Ring.ID)
	err = st.Update(ctx, func(tx kms.Txn) error {
		v, err := tx.Get(key)
		if err != nil {
			return err
		}
		var rec map[string]json.RawMessage
		if err := json.Unmarshal(v, &rec); err != nil {
			return err
		}
		if err := change(tx, ring.Ring.ID, rec); err != nil {
			return err
		}
		if v, err = json.Marshal(rec); err != nil {
			return err
		}
		return tx.Set(key, v)
	})
	if err != nil {
		t.Fatal(err)
	}
	return serviceOn(t, st, kms.Options{MasterKey: mk}), app
}

// eachPage lists from the first page to the last, limit items a page,
// and hands each page to page; an error of list fails the test.
func eachPage[T any](t testing.TB, limit int, list func(kms.PageRequest) (*kms.List[T], error), page func(*kms.List[T])) {
	t.Helper()
	req := kms.PageRequest{Limit: limit}
	for {
		l, err := list(req)
		if err != nil {
			t.Fatal(err)
		}
		page(l)
		if !l.Pagination.HasMore {
			return
		}
		req.Cursor = l.Pagination.NextCursor
	}
}
