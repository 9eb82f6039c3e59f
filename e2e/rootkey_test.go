package e2e

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/client"
	"github.com/ringkms/kms/internal/hsmtest"
)

// The master key on the built kmsd (docs/OPERATIONS.md section 2): in a
// PKCS#11 token, and rotated with kmsd rekey while the nodes serve.

// made is what kmsd acknowledged that the store keeps sealed under its
// master key, or authenticated with keys derived from it: encrypts (a
// signed header; on a ring with split data keys, a share secret sealed),
// /ks rings, /asym rings (their private key sealed) and Users (their
// password hash sealed). Its methods make one more through a client and
// record it once acknowledged; check opens them all.
type made struct {
	mu    sync.Mutex
	acks  []clusterAck
	rings []madeRing
	asym  []*kms.CreateAsymKeyRingResult
	users []*kms.CreateUserResult
}

type madeRing struct {
	name  string
	split bool
}

// add records v in *list.
func add[T any](m *made, list *[]T, v T) {
	m.mu.Lock()
	*list = append(*list, v)
	m.mu.Unlock()
}

// pick returns one of *list at random; false when it is empty.
func pick[T any](m *made, list *[]T) (v T, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(*list) == 0 {
		return v, false
	}
	return (*list)[rand.IntN(len(*list))], true
}

// failed describes a call that failed; nil when err is.
func failed(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %s", what, outcome(err))
}

// encrypt encrypts on ring through node i of its store (cl), with an
// Asset of the data when not nil.
func (m *made) encrypt(cl *client.Client, i int, ring string, asset map[string]any) error {
	in := kms.EncryptInput{RingName: ring}
	if asset != nil {
		in.Asset = &kms.AssetInput{Data: asset}
	}
	e, err := cl.Encrypt(bg, in)
	if err == nil {
		a := clusterAck{node: i, keyID: e.Key.ID, hash: e.Hash, header: e.Header, keyShare: e.KeyShare}
		if e.Asset != nil {
			a.assetID = e.Asset.ID
		}
		add(m, &m.acks, a)
	}
	return failed("Encrypt on "+ring, err)
}

func (m *made) newRing(cl *client.Client, name string, split bool) error {
	in := kms.CreateKeyRingInput{Name: name, KEM: "x25519"} // split data keys, the default
	if !split {
		in.DataKeys = kms.DataKeysRing
	}
	_, err := cl.CreateKeyRing(bg, in)
	if err == nil {
		add(m, &m.rings, madeRing{name, split})
	}
	return failed("CreateKeyRing "+name, err)
}

func (m *made) newAsym(cl *client.Client, name string) error {
	r, err := cl.CreateAsymKeyRing(bg, kms.CreateAsymKeyRingInput{Name: name})
	if err == nil {
		add(m, &m.asym, r)
	}
	return failed("CreateAsymKeyRing "+name, err)
}

func (m *made) newUser(cl *client.Client, name string) error {
	u, err := cl.CreateUser(bg, kms.UserInput{Username: name, Email: name + "@example.com", FirstName: "Re", LastName: "Key"})
	if err == nil {
		add(m, &m.users, u)
	}
	return failed("CreateUser "+name, err)
}

// readAsym reads the first key of an /asym ring through cl: the service
// opens the ring's private key to unwrap it.
func readAsym(cl *client.Client, r *kms.CreateAsymKeyRingResult) error {
	k, err := cl.GetAsymKey(bg, kms.RingRef{Name: r.Ring.Name}, r.Key.ID)
	if err == nil && k.KeyData.Key != r.Key.KeyData.Key {
		return fmt.Errorf("GetAsymKey of %s = a key that is not the one its creation handed out", r.Ring.Name)
	}
	return failed("GetAsymKey of "+r.Ring.Name, err)
}

// login logs the User in through cl: the service opens its password hash.
func login(cl *client.Client, u *kms.CreateUserResult) error {
	res, err := cl.WithBearer("").Login(bg, kms.LoginInput{Username: u.User.Username, Password: u.Password})
	if err == nil && res.User.ID != u.User.ID {
		return fmt.Errorf("Login of %s = User %s, want %s", u.User.Username, res.User.ID, u.User.ID)
	}
	return failed("Login of "+u.User.Username, err)
}

// check opens everything made on every client: every encrypt decrypts
// with its key, Asset and share, and its header is valid; every /ks ring
// serves an encrypt that another node decrypts; every /asym ring's key
// reads; every User logs in.
func (m *made) check(t *testing.T, clients []*client.Client) {
	t.Helper()
	begin := time.Now()
	for _, cl := range clients {
		checkDecrypts(t, []*client.Client{cl}, m.acks)
	}
	n := len(clients)
	each(len(m.acks), func(i int) {
		a := m.acks[i]
		if hi, err := clients[i%n].LookupHeader(bg, a.header); err != nil || !hi.Valid || hi.Hash != a.hash {
			t.Errorf("LookupHeader of hash %s on %s = %+v, %s; want valid", a.hash, clients[i%n].BaseURL(), hi, outcome(err))
		}
	})
	each(len(m.rings), func(i int) {
		r, probe := m.rings[i], &made{}
		if err := probe.encrypt(clients[i%n], i%n, r.name, nil); err != nil {
			t.Errorf("on %s: %v", clients[i%n].BaseURL(), err)
			return
		}
		if share := probe.acks[0].keyShare != ""; share != r.split {
			t.Errorf("Encrypt on ring %s (split: %v) handed out a key share: %v", r.name, r.split, share)
		}
		checkDecrypts(t, clients[(i+1)%n:][:1], probe.acks)
	})
	each(len(m.asym)*n, func(i int) {
		if err := readAsym(clients[i%n], m.asym[i/n]); err != nil {
			t.Errorf("on %s: %v", clients[i%n].BaseURL(), err)
		}
	})
	// A login costs a password hash (64 MiB of argon2id): each User logs
	// in on one node.
	each(len(m.users), func(i int) {
		if err := login(clients[i%n], m.users[i]); err != nil {
			t.Errorf("on %s: %v", clients[i%n].BaseURL(), err)
		}
	})
	t.Logf("checked on %d nodes in %v: %d encrypts, %d /ks rings, %d /asym rings, %d Users", n, time.Since(begin).Round(time.Millisecond), len(m.acks), len(m.rings), len(m.asym), len(m.users))
}

// TestMasterKeyInHSM: kmsd with its master key in a PKCS#11 token (a real
// SoftHSM2 token, KMS_MASTER_KEY_PKCS11) seals the store's secrets, opens
// them again after a restart, and refuses a plain master key; its trail
// verifies with the token's key; kmsd rekey moves the store to a plain
// key and then to another key of the token (never back to one the store
// has left), everything staying valid at each step.
func TestMasterKeyInHSM(t *testing.T) {
	in := newInstance(t)
	tok := hsmtest.New(t, "kms")
	tok.GenerateAESKey(t, "kms-master", hsmtest.AESKeyOptions{})
	tok.GenerateAESKey(t, "kms-master-2", hsmtest.AESKeyOptions{})
	inToken := []string{tok.Env, "KMS_MASTER_KEY_PKCS11=" + tok.URI("kms-master")}
	in.masterKey, in.vars = "", inToken
	v := newValidator(t)
	m := &made{}
	// serve starts kmsd on the store, runs fn with its root client, and
	// stops it.
	serve := func(what string, fn func(*client.Client)) {
		t.Helper()
		p := in.start(t)
		t.Logf("%s: kmsd started", what)
		fn(clientOf(p, t, v, in.bootstrap))
		v.client().CloseIdleConnections()
		p.Stop(t)
		if t.Failed() {
			t.FailNow()
		}
	}
	serve("under the token's key", func(root *client.Client) {
		if err := errors.Join(m.newRing(root, "hsm", false), m.encrypt(root, 0, "hsm", map[string]any{"doc": "sealed by the token"}),
			m.encrypt(root, 0, "hsm", nil), m.newAsym(root, "hsm-asym"), m.newUser(root, "hsm-user")); err != nil {
			t.Fatal(err)
		}
		if err := login(root, m.users[0]); err != nil {
			t.Fatal(err)
		}
	})
	check := func(root *client.Client) { m.check(t, []*client.Client{root}) }
	serve("restarted under the token's key", check)

	plain := *in
	plain.masterKey, plain.vars = newMasterKey(), nil
	plain.refuses(t, notThisStore)
	plain.auditRefused(t)
	t.Logf("verify-audit with the token's key: %s", strings.TrimSpace(in.verifyAudit(t)))

	t.Logf("rekey to a plain key: %s", in.rekey(t, "KMS_NEW_MASTER_KEY="+plain.masterKey))
	in.refuses(t, notThisStore)
	// The token stays configured (SOFTHSM2_CONF), unused.
	in.masterKey, in.vars = plain.masterKey, []string{tok.Env}
	serve("under the plain key", check)
	in.verifyAudit(t)

	t.Logf("rekey to another key of the token: %s", in.rekey(t, "KMS_NEW_MASTER_KEY_PKCS11="+tok.URI("kms-master-2")))
	in.refuses(t, notThisStore)
	in.masterKey, in.vars = "", []string{tok.Env, "KMS_MASTER_KEY_PKCS11=" + tok.URI("kms-master-2")}
	serve("under the token's second key", check)
	in.verifyAudit(t)
}

// loadNode is a kmsd under the load, which sends it calls only while it
// is in: a node being restarted is taken out first, once its calls in
// flight have been answered, so that no call of the load meets a node
// that is stopping, and every failed call counts.
type loadNode struct {
	*clusterNode
	i  int            // its index in its store's nodes
	mu sync.RWMutex   // read-held by each call to the node, write-held to take it out or put it in
	cl *client.Client // its client with the root API key; nil while out
}

// loadStore is the nodes over one store under the load, and what the load
// made there.
type loadStore struct {
	name  string
	in    *instance
	nodes []*loadNode
	m     *made
	calls atomic.Int64
}

// rekeyLoad is the load of TestRekeyUnderLoad: calls that seal and open
// secrets, on every store, through the nodes that are in.
type rekeyLoad struct {
	v      *validator
	stores []*loadStore
	loop
	phase  atomic.Value // string: the step of the procedure, for failures
	mu     sync.Mutex
	failed []string
}

// node returns a node of s that is in, read-locked, or nil.
func (s *loadStore) node() *loadNode {
	off := rand.IntN(len(s.nodes))
	for i := range s.nodes {
		nd := s.nodes[(off+i)%len(s.nodes)]
		if nd.mu.TryRLock() {
			if nd.cl != nil {
				return nd
			}
			nd.mu.RUnlock()
		}
	}
	return nil
}

// call makes the n-th call of worker w on a node of s: of every eight,
// three encrypts (one with an Asset, one on the ring with split data
// keys), a /ks ring made (every other one split), an /asym ring made and
// one read, then a User made or an encrypt, and a login or an encrypt: a
// User made every fourth round and a login every other, since each
// costs a password hash.
func (s *loadStore) call(nd *loadNode, w, n int) error {
	name, ni := fmt.Sprintf("w%d-%d", w, n), nd.i
	switch n % 8 {
	case 0:
		return s.m.encrypt(nd.cl, ni, "docs", nil)
	case 1:
		return s.m.encrypt(nd.cl, ni, "docs", map[string]any{"w": w, "n": n})
	case 2:
		return s.m.encrypt(nd.cl, ni, "docs-split", map[string]any{"w": w, "n": n})
	case 3:
		return s.m.newRing(nd.cl, "ring-"+name, n/8%2 == 1)
	case 4:
		return s.m.newAsym(nd.cl, "asym-"+name)
	case 5:
		if r, ok := pick(s.m, &s.m.asym); ok {
			return readAsym(nd.cl, r)
		}
	case 6:
		if n/8%4 == 0 {
			return s.m.newUser(nd.cl, "user-"+name)
		}
		return s.m.encrypt(nd.cl, ni, "docs-split", nil)
	case 7:
		if u, ok := pick(s.m, &s.m.users); ok && n/8%2 == 0 {
			return login(nd.cl, u)
		}
		return s.m.encrypt(nd.cl, ni, "docs", nil)
	}
	return nil
}

// start runs workers on s until the load stops.
func (l *rekeyLoad) start(s *loadStore, workers int) {
	for w := range workers {
		n := 0 // the calls made
		l.loop.run(func(int) bool {
			nd := s.node()
			if nd == nil {
				time.Sleep(5 * time.Millisecond)
				return true
			}
			err := s.call(nd, w, n)
			nd.mu.RUnlock()
			s.calls.Add(1)
			n++
			if err != nil {
				l.mu.Lock()
				l.failed = append(l.failed, fmt.Sprintf("%s, on %s of %s: %v", l.phase.Load(), nd.name, s.name, err))
				l.mu.Unlock()
			}
			return true
		})
	}
}

// run lets the load make n more calls on each store that has a node in.
func (l *rekeyLoad) run(t *testing.T, n int64) {
	t.Helper()
	for _, s := range l.stores {
		at := s.calls.Load()
		waitFor(t, 30*time.Second, fmt.Sprintf("%d more calls on %s", n, s.name), func() bool {
			return s.calls.Load() >= at+n
		})
	}
}

// end stops the load and fails the test for every failed call.
func (l *rekeyLoad) end(t *testing.T) {
	t.Helper()
	l.halt()
	for _, f := range l.failed[:min(len(l.failed), 20)] {
		t.Error(f)
	}
	for _, s := range l.stores {
		t.Logf("%s: %d calls", s.name, s.calls.Load())
	}
	if len(l.failed) > 0 {
		t.Fatalf("%d calls failed in all", len(l.failed))
	}
}

// out takes the node out of the load once its calls in flight are
// answered, and stops it.
func (l *rekeyLoad) out(t *testing.T, nd *loadNode) {
	t.Helper()
	nd.mu.Lock()
	nd.cl = nil
	nd.mu.Unlock()
	// A connection the client dialled and never used would hold up the
	// graceful shutdown (see killUnderLoad).
	l.v.client().CloseIdleConnections()
	nd.p.Stop(t)
}

// in starts the node on in (its store, with the keys to start it with),
// with the flags in extra, and puts it in the load.
func (l *rekeyLoad) in(t *testing.T, nd *loadNode, in *instance, extra ...string) {
	t.Helper()
	nd.p = in.start(t, append([]string{"-data", nd.data}, extra...)...)
	cl := clientOf(nd.p, t, l.v, in.bootstrap)
	nd.mu.Lock()
	nd.cl = cl
	nd.mu.Unlock()
}

// check checks what the load made on each store on every node of it,
// the stores side by side, once the load has ended.
func (l *rekeyLoad) check(t *testing.T) {
	var wg sync.WaitGroup
	for _, s := range l.stores {
		var clients []*client.Client
		for _, nd := range s.nodes {
			clients = append(clients, nd.cl)
		}
		wg.Go(func() { s.m.check(t, clients) })
	}
	wg.Wait()
}

// TestRekeyUnderLoad follows docs/OPERATIONS.md, "Rotating the master
// key", on three kmsd nodes over PostgreSQL and one kmsd on the embedded
// store, under a load that seals and opens every kind of secret: (b)
// every node is restarted in turn with the next key (the embedded one's
// in a PKCS#11 token) while the others serve; (c) kmsd rekey runs beside
// the PostgreSQL nodes, and through the admin socket of the embedded one;
// (d) the load goes on. No call fails, and everything acknowledged opens
// on every node; (e) restarted with the new key alone, every node still
// opens it all, while the old key opens nothing: kmsd and verify-audit
// refuse it on both stores.
func TestRekeyUnderLoad(t *testing.T) {
	begin := time.Now()
	c := newCluster(t) // (a) the old key only
	emb := newInstance(t)
	tok := hsmtest.New(t, "kms")
	tok.GenerateAESKey(t, "kms-next", hsmtest.AESKeyOptions{})
	l := &rekeyLoad{v: c.v}
	l.phase.Store("(a) the old key only")
	pg := &loadStore{name: "PostgreSQL", in: c.in, m: &made{}}
	for i, nd := range c.nodes {
		pg.nodes = append(pg.nodes, &loadNode{clusterNode: nd, i: i})
	}
	embNode := &loadNode{clusterNode: &clusterNode{name: "the embedded kmsd", data: emb.data}}
	embedded := &loadStore{name: "the embedded store", in: emb, nodes: []*loadNode{embNode}, m: &made{}}
	l.stores = []*loadStore{pg, embedded}
	l.in(t, embNode, emb)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s printed:\n%s", embNode.name, embNode.p.Stderr)
		}
	})
	for _, nd := range pg.nodes {
		nd.cl = clientOf(nd.p, t, c.v, c.in.bootstrap)
	}
	for _, s := range l.stores {
		for _, r := range []madeRing{{"docs", false}, {"docs-split", true}} {
			if err := s.m.newRing(s.nodes[0].cl, r.name, r.split); err != nil {
				t.Fatal(err)
			}
		}
	}
	l.start(pg, 3)
	l.start(embedded, 2)
	defer l.halt() // also when the test fails on the way
	l.run(t, 40)
	t.Logf("(a) %v: under load", time.Since(begin).Round(time.Millisecond))

	// (b) Every node is given the next key, in turn.
	pgNew := newMasterKey()
	for _, nd := range pg.nodes {
		l.phase.Store("(b) " + nd.name + " restarted with the next key")
		l.out(t, nd)
		l.in(t, nd, c.in.with("KMS_MASTER_KEY_NEXT="+pgNew))
		l.run(t, 30)
	}
	l.phase.Store("(b) the embedded kmsd restarted with the next key in the token")
	l.out(t, embNode)
	l.in(t, embNode, emb.with(tok.Env), "-master-key-next-pkcs11", tok.URI("kms-next"))
	l.run(t, 30)
	t.Logf("(b) %v: every node has the next key", time.Since(begin).Round(time.Millisecond))

	// (c) The rekeys, beside the PostgreSQL nodes and through the
	// embedded kmsd's admin socket, each followed by more calls.
	rekeyStore := func(s *loadStore, what string, vars ...string) string {
		t.Helper()
		l.phase.Store("(c) " + what)
		at := s.calls.Load()
		out := s.in.rekey(t, vars...)
		t.Logf("%s, while %d calls were answered on %s: %s", what, s.calls.Load()-at, s.name, out)
		l.run(t, 40)
		return out
	}
	rekeyStore(pg, "kmsd rekey -store", "KMS_NEW_MASTER_KEY="+pgNew)
	if out := rekeyStore(embedded, "kmsd rekey -data"); !strings.Contains(out, "by the running kmsd") {
		t.Errorf("kmsd rekey -data beside the running kmsd printed %q, want it to say the running kmsd did it", out)
	}
	t.Logf("(c) %v: both stores rekeyed", time.Since(begin).Round(time.Millisecond))

	// (d) The load goes on a little, then stops: not one call failed, and
	// everything acknowledged opens on every node.
	l.phase.Store("(d) after the rekeys")
	l.run(t, 60)
	l.end(t)
	l.check(t)
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("(d) %v: every acknowledged write opens", time.Since(begin).Round(time.Millisecond))

	// (e) The old keys open nothing; the new keys alone open everything.
	for _, s := range l.stores {
		for _, nd := range s.nodes {
			l.out(t, nd)
		}
		// s.in holds the old key alone (the nodes got the next one
		// through copies of it).
		s.in.refuses(t, notThisStore)
		s.in.auditRefused(t)
	}
	c.in.masterKey = pgNew
	emb.masterKey, emb.vars = "", []string{tok.Env, "KMS_MASTER_KEY_PKCS11=" + tok.URI("kms-next")}
	for _, s := range l.stores {
		s.in.verifyAudit(t)
		for _, nd := range s.nodes {
			l.in(t, nd, s.in)
		}
	}
	l.check(t)
	t.Logf("(e) %v: the new keys alone open everything, the old ones nothing", time.Since(begin).Round(time.Millisecond))
}
