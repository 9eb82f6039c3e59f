package kms_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/kmsdtest"
	"github.com/ringkms/kms/internal/pgtest"
	"github.com/ringkms/kms/kmstest"
	"github.com/ringkms/kms/store/pgstore"
)

// rekeyLoad is a load of calls that use every kind of sealed secret, run
// on some Services until stopped: encrypts (signed headers), /asym rings
// made (a private key sealed) and read (opened), Users made (a password
// sealed) who log in (opened).
type rekeyLoad struct {
	t      *testing.T
	stop   atomic.Bool
	wg     sync.WaitGroup
	calls  atomic.Int64
	mu     sync.Mutex
	failed []string
	users  map[string]string // username -> password, of Users made
	asym   map[string]string // /asym ring name -> its key's ID, of rings made
}

// newRekeyLoad makes the ring the load encrypts under, "docs", on svc as
// app, and returns the load, not started.
func newRekeyLoad(t *testing.T, svc *kms.Service, app context.Context) *rekeyLoad {
	t.Helper()
	if _, err := svc.CreateKeyRing(app, kms.CreateKeyRingInput{Name: "docs", KEM: "x25519"}); err != nil {
		t.Fatal(err)
	}
	return &rekeyLoad{t: t, users: map[string]string{}, asym: map[string]string{}}
}

// newRekeying returns a Service over a new store in memory, given a
// master key and a next one to rekey to, with the store and both keys.
func newRekeying(t *testing.T) (svc *kms.Service, st kms.Store, old, next kms.MasterKey) {
	t.Helper()
	old, next = kms.GenerateMasterKey(), kms.GenerateMasterKey()
	st = kmstest.MemoryStore(t)
	svc, err := kms.New(st, kms.Options{MasterKey: old, NextMasterKey: next})
	if err != nil {
		t.Fatal(err)
	}
	return svc, st, old, next
}

func (l *rekeyLoad) fail(format string, args ...any) {
	l.mu.Lock()
	l.failed = append(l.failed, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

// run loads svc, as principal ctx, from a worker named w.
func (l *rekeyLoad) run(svc *kms.Service, ctx context.Context, w string) {
	l.wg.Go(func() {
		for i := 0; !l.stop.Load(); i++ {
			var err error
			switch i % 4 {
			case 0:
				_, err = svc.Encrypt(ctx, kms.EncryptInput{RingName: "docs"})
			case 1:
				name := fmt.Sprintf("%s-asym-%d", w, i)
				var r *kms.CreateAsymKeyRingResult
				if r, err = svc.CreateAsymKeyRing(ctx, kms.CreateAsymKeyRingInput{Name: name}); err == nil {
					l.mu.Lock()
					l.asym[name] = r.Key.ID
					l.mu.Unlock()
				}
			case 2:
				name := fmt.Sprintf("%s-user-%d", w, i)
				var u *kms.CreateUserResult
				if u, err = svc.CreateUser(ctx, userInput(name, kms.Flags{"keyring.*.read": true})); err == nil {
					l.mu.Lock()
					l.users[name] = u.Password
					l.mu.Unlock()
				}
			case 3:
				l.mu.Lock()
				var name, pw string
				for name, pw = range l.users {
					break
				}
				l.mu.Unlock()
				if name != "" {
					_, err = svc.Login(context.Background(), kms.LoginInput{Username: name, Password: pw})
				}
			}
			l.calls.Add(1)
			if err != nil {
				l.fail("%s call %d: %v", w, i, err)
			}
		}
	})
}

// end stops the load and fails the test for every failed call.
func (l *rekeyLoad) end() {
	l.stop.Store(true)
	l.wg.Wait()
	for _, f := range l.failed {
		l.t.Error(f)
	}
	l.t.Logf("%d calls, %d failed", l.calls.Load(), len(l.failed))
}

// during runs fn once the load has made some calls, and lets it run a
// little after.
func (l *rekeyLoad) during(fn func()) {
	for l.calls.Load() < 40 && !l.stop.Load() {
		time.Sleep(5 * time.Millisecond)
	}
	fn()
	at := l.calls.Load()
	for l.calls.Load() < at+40 {
		time.Sleep(5 * time.Millisecond)
	}
}

// checkAfter checks, on svc, that every User made logs in and every /asym
// ring made opens its key.
func (l *rekeyLoad) checkAfter(svc *kms.Service, ctx context.Context) {
	for name, pw := range l.users {
		if _, err := svc.Login(context.Background(), kms.LoginInput{Username: name, Password: pw}); err != nil {
			l.t.Errorf("Login of %s after the rekey = %v", name, err)
		}
	}
	for name, keyID := range l.asym {
		if _, err := svc.GetAsymKey(ctx, kms.RingRef{Name: name}, keyID); err != nil {
			l.t.Errorf("the key of /asym ring %s after the rekey = %v", name, err)
		}
	}
}

// TestServiceRekey: a Service given a next master key rekeys its own
// store while it serves a load that seals and opens every kind of secret:
// no call fails, everything made before and during opens after, and the
// old key opens nothing.
func TestServiceRekey(t *testing.T) {
	ctx := context.Background()
	svc, st, old, next := newRekeying(t)
	app := asApplication(t, svc, "rekey-online")
	l := newRekeyLoad(t, svc, app)
	for w := range 4 {
		l.run(svc, app, fmt.Sprint("w", w))
	}
	l.during(func() {
		res, err := svc.Rekey(ctx)
		if err != nil {
			t.Errorf("Rekey = %v", err)
		}
		t.Logf("rekeyed %+v", res)
	})
	l.end()
	l.checkAfter(svc, app)
	svc.Close()
	// Nothing is left sealed under the old root secret: a Service that
	// never knew it opens everything.
	fresh, err := kms.New(st, kms.Options{MasterKey: next})
	if err != nil {
		t.Fatalf("New(the new key) = %v", err)
	}
	l.checkAfter(fresh, app)
	fresh.Close()
	if _, err := kms.Rekey(ctx, st, old, next); kms.ErrorKind(err) != kms.KindInvalid {
		t.Errorf("Rekey from the key the store was rekeyed away from, to the key it is under = %v, want invalid", err)
	}
	if _, err := kms.New(st, kms.Options{MasterKey: old}); kms.ErrorKind(err) != kms.KindUnauthenticated {
		t.Errorf("New(the old key) = %v, want unauthenticated", err)
	}
	if _, err := kms.VerifyAudit(ctx, st, next); err != nil {
		t.Errorf("VerifyAudit(the new key) = %v", err)
	}
	if svc, err := kms.New(kmstest.MemoryStore(t), kms.Options{MasterKey: old}); err != nil {
		t.Fatal(err)
	} else {
		if _, err := svc.Rekey(ctx); kms.ErrorKind(err) != kms.KindInvalid {
			t.Errorf("Rekey of a Service without a next key = %v, want invalid", err)
		}
		svc.Close()
	}
}

// TestRekeyBesideNodes: two Services on one PostgreSQL database, each
// given the next master key, serve a load that seals and opens every kind
// of secret while Rekey runs beside them: no call fails, both go on under
// the new root secret, everything made opens on either, the old key opens
// nothing, and a Service that held only the old key stops writing.
func TestRekeyBesideNodes(t *testing.T) {
	ctx := context.Background()
	dbURL := pgtest.URL(t)
	old, next := kms.GenerateMasterKey(), kms.GenerateMasterKey()
	open := func(opts kms.Options) *kms.Service {
		t.Helper()
		st, err := pgstore.Open(ctx, dbURL, pgstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		svc, err := kms.New(st, opts)
		if err != nil {
			t.Fatal(err)
		}
		return svc
	}
	a := open(kms.Options{MasterKey: old, NextMasterKey: next})
	defer a.Close()
	b := open(kms.Options{MasterKey: old, NextMasterKey: next})
	defer b.Close()
	stale := open(kms.Options{MasterKey: old})
	defer stale.Close()
	app := asApplication(t, a, "rekey-beside")
	l := newRekeyLoad(t, a, app)
	for w := range 3 {
		l.run(a, app, fmt.Sprint("a", w))
		l.run(b, app, fmt.Sprint("b", w))
	}
	// A rekey while sealed writes of both nodes are in flight; then, as
	// they go on, a rekey back and the same rekey again, both refused.
	l.during(func() {
		st, err := pgstore.Open(ctx, dbURL, pgstore.Options{Existing: true})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		from, to := kms.RootKey(old), kms.RootKey(next)
		for i := range 3 {
			res, err := kms.Rekey(ctx, st, from, to)
			if i == 0 && err != nil {
				t.Errorf("Rekey beside the nodes = %v", err)
			}
			if i > 0 && kms.ErrorKind(err) != kms.KindInvalid {
				t.Errorf("Rekey %d (back, then there again) beside the nodes = %v, want it refused", i+1, err)
			}
			t.Logf("rekey %d: %+v, %v", i+1, res, err)
			from, to = to, from
			time.Sleep(50 * time.Millisecond)
		}
	})
	l.end()
	l.checkAfter(a, app)
	l.checkAfter(b, app)
	// Nothing is left sealed under the old root secret: a node that never
	// knew it opens everything.
	fresh := open(kms.Options{MasterKey: next})
	defer fresh.Close()
	l.checkAfter(fresh, app)
	kmsdtest.WaitFor(t, 5*time.Second, "the node without the new key to stop writing", func() bool {
		return kms.ErrorKind(stale.Ping(ctx)) == kms.KindUnavailable
	})
	st, err := pgstore.Open(ctx, dbURL, pgstore.Options{Existing: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := kms.VerifyAudit(ctx, st, old); kms.ErrorKind(err) != kms.KindUnauthenticated {
		t.Errorf("VerifyAudit(the old key) = %v, want unauthenticated", err)
	}
	if _, err := kms.VerifyAudit(ctx, st, next); err != nil {
		t.Errorf("VerifyAudit(the new key) = %v", err)
	}
}

// unheard is a store that announces no change (it hides its Watcher), as
// a node that missed the announcement of a rekey.
type unheard struct{ kms.Store }

// TestSealedWriteFollowsAnUnheardRekey: a node that has not heard of a
// rekey (another node's) writes a secret: it seals it under the root
// secret its transaction sees, the new one, not under the one it knew,
// so a Service that never knew the old root secret opens it.
func TestSealedWriteFollowsAnUnheardRekey(t *testing.T) {
	ctx := context.Background()
	old, next := kms.GenerateMasterKey(), kms.GenerateMasterKey()
	open := pgOpener(t)
	a, err := kms.New(unheard{open()}, kms.Options{MasterKey: old, NextMasterKey: next})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := kms.New(open(), kms.Options{MasterKey: old, NextMasterKey: next})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	app := asApplication(t, a, "unheard")
	if _, err := b.Rekey(ctx); err != nil {
		t.Fatalf("Rekey on the other node = %v", err)
	}
	ring, err := a.CreateAsymKeyRing(app, kms.CreateAsymKeyRingInput{Name: "after"})
	if err != nil {
		t.Fatalf("CreateAsymKeyRing on the node that did not hear of the rekey = %v", err)
	}
	u, err := a.CreateUser(app, userInput("unheard", kms.Flags{"keyring.*.read": true}))
	if err != nil {
		t.Fatalf("CreateUser on the node that did not hear of the rekey = %v", err)
	}
	fresh, err := kms.New(open(), kms.Options{MasterKey: next})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if _, err := fresh.GetAsymKey(app, kms.RingRef{Name: "after"}, ring.Key.ID); err != nil {
		t.Errorf("the /asym key it wrote, on a Service of the new key alone = %v", err)
	}
	if _, err := fresh.Login(ctx, kms.LoginInput{Username: "unheard", Password: u.Password}); err != nil {
		t.Errorf("the password it set, on a Service of the new key alone = %v", err)
	}
}
