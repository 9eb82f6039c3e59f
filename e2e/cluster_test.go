package e2e

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/client"
	"github.com/ringkms/kms/internal/pgtest"
)

// The cluster test: three kmsd nodes with one master key over one
// PostgreSQL database (-store), each on its own port with its own data
// directory, and any request sent to any node (docs/OPERATIONS.md).

const (
	clusterNodes = 3
	// viewBound is how old a node's view of a change made through
	// another node may be (docs/OPERATIONS.md, Running a cluster: the
	// coherence bound): a change answered at t0 shows on every node in
	// the requests sent from t0+viewBound on.
	viewBound = time.Second
	// probeEvery is the pace of the requests that watch a change reach
	// another node within viewBound; they only report how soon it did.
	probeEvery = 20 * time.Millisecond
)

// cluster is the nodes over one database.
type cluster struct {
	in    *instance // the master key, the root API key, the database (in.store)
	v     *validator
	flags []string // every node's flags, after its -data and -store
	nodes []*clusterNode
}

// clusterNode is one kmsd of the cluster: its data directory outlives its
// processes.
type clusterNode struct {
	name  string // "node 1", ...
	data  string // -data
	store string // -store: the database's URL, direct or through a proxy
	p     *proc  // the running process
}

// newCluster starts the nodes together on a new database, as
// docs/OPERATIONS.md (Running a cluster) allows: one of them bootstraps
// it.
func newCluster(t *testing.T) *cluster {
	t.Helper()
	db := pgtest.URL(t)
	return startCluster(t, slices.Repeat([]string{db}, clusterNodes))
}

// startCluster starts a node on each of stores, URLs of one database (a
// node may reach it through a proxy, or by a URL that names a standby
// too), together, with flags after the defaults. The instance's store,
// which verify-audit reads, is the first. When the test fails, it logs
// what each node printed.
func startCluster(t *testing.T, stores []string, flags ...string) *cluster {
	t.Helper()
	in := newInstance(t)
	in.store = stores[0]
	c := &cluster{in: in, v: newValidator(t), flags: flags}
	for i, store := range stores {
		nd := &clusterNode{name: fmt.Sprintf("node %d", i+1), data: filepath.Join(t.TempDir(), "data"), store: store}
		nd.p = in.launch(t, c.args(nd)...)
		c.nodes = append(c.nodes, nd)
	}
	for _, nd := range c.nodes {
		nd.p.Listen(t, startTimeout)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, nd := range c.nodes {
				t.Logf("%s printed:\n%s", nd.name, nd.p.Stderr)
			}
		}
	})
	return c
}

// args are the flags of the node's kmsd.
func (c *cluster) args(nd *clusterNode) []string {
	return append([]string{"-data", nd.data, "-store", nd.store}, c.flags...)
}

// start runs the node's kmsd on the cluster's database.
func (c *cluster) start(t *testing.T, nd *clusterNode) {
	t.Helper()
	nd.p = c.in.start(t, c.args(nd)...)
}

// pids returns the process IDs of the nodes.
func (c *cluster) pids() []int {
	var out []int
	for _, nd := range c.nodes {
		out = append(out, nd.p.Cmd.Process.Pid)
	}
	return out
}

// sameProcesses fails the test unless each node still runs, as the
// process of pids: none was restarted or died.
func (c *cluster) sameProcesses(t *testing.T, pids []int) {
	t.Helper()
	for i, nd := range c.nodes {
		select {
		case <-nd.p.Exited:
			t.Errorf("%s (pid %d) exited: %v", nd.name, pids[i], nd.p.Cmd.ProcessState)
		default:
		}
		if pid := nd.p.Cmd.Process.Pid; pid != pids[i] {
			t.Errorf("%s is pid %d, it was %d", nd.name, pid, pids[i])
		}
	}
}

// stop stops every node. The clients' idle connections are closed first:
// one the client dialled and never used would hold up the node's graceful
// shutdown by 5 s, Go's http.Server.Shutdown grace for new connections.
func (c *cluster) stop(t *testing.T) {
	t.Helper()
	c.v.client().CloseIdleConnections()
	for _, nd := range c.nodes {
		nd.p.Stop(t)
	}
}

// client returns a client of node i (from 0) with the secret.
func (c *cluster) client(t *testing.T, i int, secret string) *client.Client {
	t.Helper()
	return clientOf(c.nodes[i].p, t, c.v, secret)
}

// root returns a client of node i with the root API key.
func (c *cluster) root(t *testing.T, i int) *client.Client {
	t.Helper()
	return c.client(t, i, c.in.bootstrap)
}

// outcome describes the answer of a call for the log.
func outcome(err error) string {
	if err == nil {
		return "200"
	}
	if e := kms.AsError(err); e != nil {
		return fmt.Sprintf("%v (%s)", e.Kind, e.Message)
	}
	return err.Error()
}

// watch sends probe to a node every probeEvery from now until
// t0+viewBound, and logs how soon after t0 it first saw the change
// (probe's seen). Once seen, the change must stay seen: a node that
// brings the old state back fails the test, as does a probe's error.
// It returns when t0+viewBound has passed, so that the caller's next
// request is sent after the bound.
func watch(t *testing.T, what string, t0 time.Time, probe func() (seen bool, err error)) {
	t.Helper()
	deadline := t0.Add(viewBound)
	tick := time.NewTicker(probeEvery)
	defer tick.Stop()
	first := time.Duration(-1)
	probes := 0
	for sent := time.Now(); sent.Before(deadline); sent = time.Now() {
		seen, err := probe()
		probes++
		switch {
		case err != nil:
			t.Errorf("%s: the probe sent %v after the change = %v", what, sent.Sub(t0), err)
			return
		case probes == 1:
			t.Logf("%s: the first request, sent %v after the change, saw it: %v", what, sent.Sub(t0), seen)
		}
		switch {
		case seen && first < 0:
			first = sent.Sub(t0)
		case !seen && first >= 0:
			t.Errorf("%s: a request sent %v after the change shows the old state again, after one sent at %v saw the change", what, sent.Sub(t0), first)
		}
		<-tick.C
	}
	if first >= 0 {
		t.Logf("%s: seen from the request sent %v after the change on (%d requests within %v)", what, first, probes, viewBound)
	} else {
		t.Logf("%s: not seen by any of %d requests within %v", what, probes, viewBound)
	}
	time.Sleep(time.Until(deadline))
}

// newRing creates a /ks ring with an X25519 key pair through cl.
func newRing(t *testing.T, cl *client.Client, name string) *kms.CreateKeyRingResult {
	t.Helper()
	return must[*kms.CreateKeyRingResult](t, "CreateKeyRing "+name)(cl.CreateKeyRing(bg, kms.CreateKeyRingInput{Name: name, KEM: "x25519"}))
}

func TestCluster(t *testing.T) {
	c := newCluster(t)
	root1, root2, root3 := c.root(t, 0), c.root(t, 1), c.root(t, 2)

	t.Run("the nodes started together made one root API key", func(t *testing.T) {
		for i := range clusterNodes {
			keys := allPages(t, fmt.Sprintf("ListAPIKeys on node %d", i+1), 10, func(r kms.PageRequest) (*kms.List[*kms.APIKey], error) {
				return c.root(t, i).ListAPIKeys(bg, r)
			})
			if len(keys) != 1 || !keys[0].Flags["*"] {
				t.Fatalf("ListAPIKeys on node %d = %d keys, want the one root API key (flag *)", i+1, len(keys))
			}
		}
	})

	t.Run("a ring made on one node serves on the others", func(t *testing.T) {
		ring := newRing(t, root1, "cl-basic")
		e := must[*kms.EncryptResult](t, "Encrypt on node 2")(root2.Encrypt(bg, kms.EncryptInput{RingName: "cl-basic",
			Asset: &kms.AssetInput{Data: map[string]any{"doc": "d1"}}}))
		if e.RingID != ring.Ring.ID || e.Key.ID != ring.Key.ID || e.Asset == nil {
			t.Fatalf("Encrypt on node 2 = ring %s key %s asset %v; want ring %s key %s and an Asset", e.RingID, e.Key.ID, e.Asset, ring.Ring.ID, ring.Key.ID)
		}
		d := must[*kms.DecryptResult](t, "Decrypt on node 3")(root3.Decrypt(bg, kms.DecryptInput{Hash: e.Hash, Header: e.Header}))
		if d.RingID != ring.Ring.ID || d.Key.ID != e.Key.ID || !d.Asset.Valid || d.Asset.ID != e.Asset.ID {
			t.Fatalf("Decrypt on node 3 = ring %s key %s asset %+v; want ring %s key %s, Asset %s valid", d.RingID, d.Key.ID, d.Asset, ring.Ring.ID, e.Key.ID, e.Asset.ID)
		}
		if enc, dec := unwrap(t, ring.PrivateKey, ring.Ring.ID, e.Key), unwrap(t, ring.PrivateKey, ring.Ring.ID, d.Key); !slices.Equal(enc, dec) {
			t.Fatal("the key of the decrypt on node 3 is not the key of the encrypt on node 2")
		}
		got := must[*kms.KeyRing](t, "GetKeyRing on node 3")(root3.GetKeyRing(bg, kms.RingRef{Name: "cl-basic"}))
		if got.ID != ring.Ring.ID || got.ActiveKey != ring.Key.ID {
			t.Fatalf("GetKeyRing on node 3 = ID %s active key %s, want %s and %s", got.ID, got.ActiveKey, ring.Ring.ID, ring.Key.ID)
		}
		if hi := must[*kms.HashInfo](t, "LookupHash on node 3")(root3.LookupHash(bg, e.Hash)); hi.RingID != ring.Ring.ID || hi.KeyID != e.Key.ID {
			t.Fatalf("LookupHash on node 3 = %+v, want ring %s key %s", hi, ring.Ring.ID, e.Key.ID)
		}
		// The nodes sign headers with one key.
		for i, cl := range []*client.Client{root1, root3} {
			if hi := must[*kms.HeaderInfo](t, "LookupHeader")(cl.LookupHeader(bg, e.Header)); !hi.Valid || hi.Hash != e.Hash {
				t.Fatalf("LookupHeader on node %d of a header of node 2 = %+v, want valid for hash %s", 2*i+1, hi, e.Hash)
			}
		}
	})

	t.Run("any request to any node", func(t *testing.T) {
		newRing(t, root1, "cl-any")
		// An API key made on node 1 works on nodes 2 and 3 at once.
		ak := must[*kms.APIKey](t, "CreateAPIKey on node 1")(root1.CreateAPIKey(bg, kms.APIKeyInput{AccountID: kms.BootstrapAccountUID, AccountByUID: true,
			Flags: kms.Flags{"keyring.cl-any.encrypt": true, "keyring.cl-any.decrypt": true}}))
		e := must[*kms.EncryptResult](t, "Encrypt on node 2 with an API key made on node 1")(c.client(t, 1, ak.Key).Encrypt(bg, kms.EncryptInput{RingName: "cl-any"}))
		if d := must[*kms.DecryptResult](t, "Decrypt on node 3 with an API key made on node 1")(c.client(t, 2, ak.Key).Decrypt(bg, kms.DecryptInput{Hash: e.Hash, Header: e.Header})); d.Key.ID != e.Key.ID {
			t.Fatalf("Decrypt on node 3 = key %s, want %s", d.Key.ID, e.Key.ID)
		}

		// A User made on node 1 signs in on node 2; its access token
		// works on node 3.
		u := must[*kms.CreateUserResult](t, "CreateUser on node 1")(root1.CreateUser(bg, kms.UserInput{Username: "cl-user", Email: "cl-user@example.com",
			FirstName: "Clu", LastName: "Ster", Flags: kms.Flags{"keyring.cl-any.read": true}}))
		login := must[*kms.LoginResult](t, "Login on node 2")(c.client(t, 1, "").Login(bg, kms.LoginInput{Username: "cl-user", Password: u.Password}))
		if login.User.ID != u.User.ID {
			t.Fatalf("Login on node 2 = User %s, want %s", login.User.ID, u.User.ID)
		}
		if r := must[*kms.KeyRing](t, "GetKeyRing on node 3 with a token from node 2")(c.client(t, 2, login.AccessToken).GetKeyRing(bg, kms.RingRef{Name: "cl-any"})); r.Name != "cl-any" {
			t.Fatalf("GetKeyRing on node 3 = %+v", r)
		}

		// A ring deleted on node 1 serves no encrypt on any node from the
		// next call on, even on nodes that used it just before.
		newRing(t, root1, "cl-doomed")
		others := []struct {
			name string
			cl   *client.Client
		}{{"node 3", root3}, {"node 2", root2}}
		for _, o := range others {
			must[*kms.EncryptResult](t, "Encrypt on "+o.name+" before the deletion")(o.cl.Encrypt(bg, kms.EncryptInput{RingName: "cl-doomed"}))
		}
		must[*kms.DeleteKeyRingResult](t, "DeleteKeyRing on node 1")(root1.DeleteKeyRing(bg, kms.RingRef{Name: "cl-doomed"}))
		for _, o := range others {
			res, err := o.cl.Encrypt(bg, kms.EncryptInput{RingName: "cl-doomed"})
			switch {
			case err == nil:
				t.Errorf("Encrypt on %s right after the deletion on node 1 handed out key %s of the deleted ring", o.name, res.Key.ID)
			case kms.ErrorKind(err) != kms.KindNotFound:
				t.Errorf("Encrypt on %s right after the deletion on node 1 = %s, want not found", o.name, outcome(err))
			}
		}
	})

	t.Run("a deactivated API key is refused on every node within the bound", func(t *testing.T) {
		newRing(t, root1, "cl-deact")
		ak := must[*kms.APIKey](t, "CreateAPIKey")(root1.CreateAPIKey(bg, kms.APIKeyInput{AccountID: kms.BootstrapAccountUID, AccountByUID: true,
			Flags: kms.Flags{"keyring.cl-deact.encrypt": true}}))
		k3 := c.client(t, 2, ak.Key)
		// Node 3 has used the key: it knows it as active.
		must[*kms.EncryptResult](t, "Encrypt on node 3 before the deactivation")(k3.Encrypt(bg, kms.EncryptInput{RingName: "cl-deact"}))
		off := false
		must[*kms.APIKeyUpdateResult](t, "deactivate on node 1")(root1.UpdateAPIKey(bg, kms.APIKeyUpdate{Op: kms.UpdateMerge,
			Ref: kms.APIKeyRef{Value: ak.KeyID}, Active: &off}))
		t0 := time.Now()
		refused := func() (bool, error) {
			_, err := k3.Encrypt(bg, kms.EncryptInput{RingName: "cl-deact"})
			switch {
			case err == nil:
				return false, nil
			case kms.ErrorKind(err) == kms.KindUnauthenticated:
				return true, nil
			}
			return false, fmt.Errorf("%s, want 200 or unauthenticated", outcome(err))
		}
		watch(t, "the deactivation on node 3", t0, refused)
		if t.Failed() {
			return
		}
		_, err := k3.Encrypt(bg, kms.EncryptInput{RingName: "cl-deact"})
		if kms.ErrorKind(err) != kms.KindUnauthenticated {
			t.Fatalf("Encrypt on node 3, sent %v after the deactivation on node 1 = %s; want unauthenticated", time.Since(t0), outcome(err))
		}
	})

	t.Run("a rotation shows on every node within the bound", func(t *testing.T) {
		ring := newRing(t, root1, "cl-rot")
		// Node 3 has used the ring: it knows its active key.
		if e := must[*kms.EncryptResult](t, "Encrypt on node 3 before the rotation")(root3.Encrypt(bg, kms.EncryptInput{RingName: "cl-rot"})); e.Key.ID != ring.Key.ID {
			t.Fatalf("Encrypt on node 3 = key %s, want %s", e.Key.ID, ring.Key.ID)
		}
		k := must[*kms.Key](t, "Rotate on node 2")(root2.Rotate(bg, kms.RotateInput{RingName: "cl-rot"}))
		t0 := time.Now()
		if k.ID == ring.Key.ID {
			t.Fatalf("Rotate = the key %s the ring had", k.ID)
		}
		newKey := func() (bool, error) {
			e, err := root3.Encrypt(bg, kms.EncryptInput{RingName: "cl-rot"})
			switch {
			case err != nil:
				return false, fmt.Errorf("%s", outcome(err))
			case e.Key.ID == k.ID:
				return true, nil
			case e.Key.ID == ring.Key.ID:
				return false, nil
			}
			return false, fmt.Errorf("key %s, neither the old key %s nor the new %s", e.Key.ID, ring.Key.ID, k.ID)
		}
		watch(t, "the rotation on node 3", t0, newKey)
		if t.Failed() {
			return
		}
		e := must[*kms.EncryptResult](t, "Encrypt on node 3 after the bound")(root3.Encrypt(bg, kms.EncryptInput{RingName: "cl-rot"}))
		if e.Key.ID != k.ID {
			t.Fatalf("Encrypt on node 3, sent %v after the rotation on node 2 = key %s; want the new key %s (the old was %s)", time.Since(t0), e.Key.ID, k.ID, ring.Key.ID)
		}
	})

	t.Run("maxEncryptCount holds across the nodes", func(t *testing.T) {
		const (
			limit   = 100
			calls   = 400
			workers = 8 // per node
		)
		newRing(t, root1, "cl-max")
		cfg := must[*kms.KeyRingConfig](t, "SetConfig")(root1.SetConfig(bg, kms.RingRef{Name: "cl-max"}, &kms.KeyRingConfig{Algos: kms.ConfigAlgos{AES256: kms.AlgoConfig{MaxEncryptCount: limit}}}))
		if cfg.Algos.AES256.MaxEncryptCount != limit {
			t.Fatalf("SetConfig = maxEncryptCount %d, want %d", cfg.Algos.AES256.MaxEncryptCount, limit)
		}
		// Nodes 2 and 3 have not seen the ring: each reads it, with its
		// configuration, from the database. At the limit the ring rotates
		// by itself (encrypt.go, reserveEncrypt): every call succeeds.
		var (
			mu    sync.Mutex
			uses  = map[string]int{} // key ID -> successful encrypts
			nodes = []*client.Client{root1, root2, root3}
		)
		eachBy(clusterNodes*workers, calls, func(w, _ int) {
			e, err := nodes[w%clusterNodes].Encrypt(bg, kms.EncryptInput{RingName: "cl-max"})
			if err != nil {
				t.Errorf("Encrypt on node %d = %s", w%clusterNodes+1, outcome(err))
				return
			}
			mu.Lock()
			uses[e.Key.ID]++
			mu.Unlock()
		})
		total := 0
		for id, n := range uses {
			total += n
			if n > limit {
				t.Errorf("key %s served %d encrypts, over maxEncryptCount %d", id, n, limit)
			}
		}
		keys := allPages(t, "ListKeys", 100, func(r kms.PageRequest) (*kms.List[*kms.Key], error) {
			return root2.ListKeys(bg, kms.RingRef{Name: "cl-max"}, r)
		})
		ringKeys := map[string]bool{}
		var inOrder []int // the encrypts each key served, oldest key first
		for _, k := range keys {
			ringKeys[k.ID] = true
			inOrder = append(inOrder, uses[k.ID])
		}
		for id := range uses {
			if !ringKeys[id] {
				t.Errorf("key %s served encrypts but is not a key of the ring", id)
			}
		}
		t.Logf("%d encrypts over %d keys; encrypts per key of the ring, oldest first: %v", total, len(uses), inOrder)
		if total != calls {
			t.Fatalf("%d encrypts succeeded, want %d", total, calls)
		}
		if len(uses) < calls/limit {
			t.Fatalf("%d encrypts used %d keys; with maxEncryptCount %d they need at least %d", calls, len(uses), limit, calls/limit)
		}
	})

	t.Run("SIGKILL of a node under load", func(t *testing.T) { killUnderLoad(t, c) })
}

// clusterAck is an encrypt call a node answered 200.
type clusterAck struct {
	node         int // index of the node that answered
	keyID        string
	hash, header string
	assetID      string // the Asset the call created; empty for none
	keyShare     string // the call's key share, on a ring with split data keys
}

// killUnderLoad loads every node with encrypts, kills one with SIGKILL,
// keeps the others loaded, and checks that every acknowledged encrypt
// decrypts on the survivors, that the audit chain verifies, and that the
// killed node serves again after a restart.
func killUnderLoad(t *testing.T, c *cluster) {
	const workers = 4 // per node
	newRing(t, c.root(t, 0), "cl-kill")
	victim := rand.IntN(clusterNodes)
	vn := c.nodes[victim]
	t.Logf("the node to kill: %s", vn.name)

	var (
		mu         sync.Mutex
		acks       []clusterAck
		killed     atomic.Bool  // set before the SIGKILL
		afterKill  atomic.Int64 // survivors' acks after the kill
		beforeKill atomic.Int64 // the victim's acks
		load       loop
	)
	for w := range clusterNodes * workers {
		i := w % clusterNodes
		cl := c.root(t, i)
		load.run(func(n int) bool {
			in := kms.EncryptInput{RingName: "cl-kill"}
			if n%3 == 0 {
				in.Asset = &kms.AssetInput{Data: map[string]any{"w": w, "n": n}}
			}
			e, err := cl.Encrypt(bg, in)
			if err != nil {
				if i == victim && killed.Load() {
					return false // the node died: the call may or may not have landed
				}
				t.Errorf("Encrypt on %s (killed: %v) = %s", c.nodes[i].name, killed.Load(), outcome(err))
				return false
			}
			a := clusterAck{node: i, keyID: e.Key.ID, hash: e.Hash, header: e.Header, keyShare: e.KeyShare}
			if e.Asset != nil {
				a.assetID = e.Asset.ID
			}
			mu.Lock()
			acks = append(acks, a)
			mu.Unlock()
			switch {
			case i == victim:
				beforeKill.Add(1)
			case killed.Load():
				afterKill.Add(1)
			}
			return true
		})
	}
	defer load.halt() // also when a wait below fails the test
	// The victim is killed once it has answered some calls, at a random
	// moment after that (not an assertion).
	const first = 10
	waitFor(t, 30*time.Second, fmt.Sprintf("%d encrypts on %s", first, vn.name), func() bool {
		return beforeKill.Load() >= first || t.Failed()
	})
	delay := time.Duration(rand.IntN(401)) * time.Millisecond
	time.Sleep(delay)
	killed.Store(true)
	vn.p.Kill(t)
	// The survivors go on serving: 20 answers per worker of theirs after
	// the kill, in all.
	const more = 20 * (clusterNodes - 1) * workers
	waitFor(t, 30*time.Second, fmt.Sprintf("%d encrypts on the surviving nodes after the kill", more), func() bool {
		return afterKill.Load() >= more || t.Failed()
	})
	load.halt()
	if t.Failed() {
		t.FailNow()
	}
	byNode := make([]int, clusterNodes)
	for _, a := range acks {
		byNode[a.node]++
	}
	t.Logf("SIGKILL %v after the %dth encrypt of %s; acknowledged encrypts by node: %v (%d after the kill)", delay, first, vn.name, byNode, afterKill.Load())

	// Every acknowledged encrypt decrypts on the survivors.
	var survivors []*client.Client
	for i := range clusterNodes {
		if i != victim {
			survivors = append(survivors, c.root(t, i))
		}
	}
	checkDecrypts(t, survivors, acks)
	if t.Failed() {
		t.FailNow()
	}

	// The chain verifies once every node is stopped. (The clients' idle
	// connections are closed first: one the client dialled and never
	// used would hold up the node's graceful shutdown by 5 s, Go's
	// http.Server.Shutdown grace for new connections.)
	c.v.client().CloseIdleConnections()
	for i, nd := range c.nodes {
		if i != victim {
			nd.p.Stop(t)
		}
	}
	out := c.in.verifyAudit(t)
	t.Logf("verify-audit: %s", strings.ReplaceAll(strings.TrimSpace(out), "\n", "; "))

	// The killed node serves again.
	c.start(t, vn)
	cl := c.root(t, victim)
	e := must[*kms.EncryptResult](t, "Encrypt on the restarted node")(cl.Encrypt(bg, kms.EncryptInput{RingName: "cl-kill",
		Asset: &kms.AssetInput{Data: map[string]any{"after": "restart"}}}))
	checkDecrypts(t, []*client.Client{cl}, []clusterAck{{node: victim, keyID: e.Key.ID, hash: e.Hash, header: e.Header, assetID: e.Asset.ID, keyShare: e.KeyShare}})
	var own []clusterAck
	for _, a := range acks {
		if a.node == victim {
			own = append(own, a)
		}
	}
	checkDecrypts(t, []*client.Client{cl}, own)
	c.v.client().CloseIdleConnections()
	vn.p.Stop(t)
	c.in.verifyAudit(t)
}

// checkDecrypts decrypts every acknowledged encrypt, spread over the
// clients, with a few concurrent callers.
func checkDecrypts(t *testing.T, clients []*client.Client, acks []clusterAck) {
	t.Helper()
	each(len(acks), func(i int) {
		a, cl := acks[i], clients[i%len(clients)]
		d, err := cl.Decrypt(bg, kms.DecryptInput{Hash: a.hash, Header: a.header})
		switch {
		case err != nil:
			t.Errorf("Decrypt on %s of an encrypt acknowledged by node %d = %s", cl.BaseURL(), a.node+1, outcome(err))
		case d.Key.ID != a.keyID:
			t.Errorf("Decrypt on %s = key %s, the encrypt handed out %s", cl.BaseURL(), d.Key.ID, a.keyID)
		case a.assetID != "" && (!d.Asset.Valid || d.Asset.ID != a.assetID):
			t.Errorf("Decrypt on %s = Asset %+v, want %s valid", cl.BaseURL(), d.Asset, a.assetID)
		case d.KeyShare != a.keyShare:
			t.Errorf("Decrypt on %s of hash %s = a key share (%d characters) that is not the one the encrypt handed out", cl.BaseURL(), a.hash, len(d.KeyShare))
		}
	})
}
