package e2e

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/client"
	"github.com/ringkms/kms/internal/netproxy"
	"github.com/ringkms/kms/internal/pgtest"
)

// The high-availability tests: nodes of the real kmsd on a PostgreSQL
// that fails as a real one does. A primary is killed and its synchronous
// standby promoted, a node's connection goes silent, a node starts on a
// hot standby, a connection is cut at a COMMIT, a node's connections are
// cut at random moments under load. docs/OPERATIONS.md
// (sections 13 and 14) says what the nodes must do.

const (
	serveBound  = 10 * time.Second      // after a promotion, each node answers 200 on /healthz and on a write within it
	healthEvery = 50 * time.Millisecond // the pace of a load's /healthz probes
	errorPause  = 20 * time.Millisecond // a worker's pause after an error answer, not to spin on a node that cannot serve
	// readOnlyMessage starts the message of every answer of a node on a
	// database that takes no writes (store/pgstore, errors.go).
	readOnlyMessage = "service unavailable: the database is read-only (a standby, or a primary that was demoted); kmsd waits for a primary"
	// sqlCommit ends each write transaction of pgstore, in the batch of
	// its writes; sqlAppendLock takes the append lock before the
	// transaction of a batch of the trail (store/pgstore, txn.go).
	sqlCommit     = "COMMIT"
	sqlAppendLock = "SELECT pg_advisory_lock(7813586475436714348)"
)

// haOp is what a call of a load does.
type haOp int

const (
	opHealth       haOp = iota // GET /healthz
	opEncrypt                  // an encrypt with the load's ring
	opEncryptAsset             // the same, creating an Asset
	opRing                     // a ring creation, under a name of its own
	opRotate                   // a rotation of the load's ring
	opAPIKey                   // an API key creation
)

func (o haOp) String() string {
	return [...]string{"GET /healthz", "encrypt", "encrypt with an Asset", "create ring", "rotate", "create API key"}[o]
}

// haCall is one call of a load: what, to which node, its answer, when.
type haCall struct {
	node       int // from 0
	op         haOp
	ring       string // the ring a creation named
	who        string // the API key that made the call; empty for the root key
	hash       string // the hash an acknowledged encrypt answered
	asset      string // the data "call" of the Asset an encrypt created
	status     int    // HTTP status; 0 for no answer
	err        error
	start, end time.Time
}

func (c haCall) write() bool                    { return c.op != opHealth }
func (c haCall) took() time.Duration            { return c.end.Sub(c.start) }
func (c haCall) during(from, to time.Time) bool { return c.end.After(from) && c.start.Before(to) }

func (c haCall) String() string {
	what := c.op.String()
	if c.ring != "" {
		what += " " + c.ring
	}
	return fmt.Sprintf("%s on node %d = %d in %v (%s)", what, c.node+1, c.status, c.took().Round(time.Millisecond), outcome(c.err))
}

// haLoad sends calls to the nodes of a cluster from goroutines of its own
// until halted, and keeps every call and what each write acknowledged.
type haLoad struct {
	c    *cluster
	ring string // the ring of encrypts and rotations
	loop

	mu       sync.Mutex
	calls    []haCall
	encrypts []clusterAck
	rings    []string // rings whose creation was acknowledged
	keys     []string // keys of ring that acknowledged rotations made
	apiKeys  []string // IDs of API keys whose creation was acknowledged
}

// writes starts workers on each of the nodes (indexes) that send ops in
// turn, each worker from its own place in the cycle.
func (l *haLoad) writes(t *testing.T, nodes []int, workers int, ops ...haOp) {
	t.Helper()
	for _, i := range nodes {
		for w := range workers {
			l.worker(l.c.root(t, i), i, "", fmt.Sprintf("ha-%d-%d", i+1, w), w, ops...)
		}
	}
}

// worker starts one worker that sends ops in turn through cl, a client of
// node with the API key who (empty for the root key), from the place
// first in the cycle; name and the call's number name what its calls
// make (rings, Assets).
func (l *haLoad) worker(cl *client.Client, node int, who, name string, first int, ops ...haOp) {
	l.run(func(n int) bool {
		n += first
		if c := l.do(cl, node, who, ops[n%len(ops)], fmt.Sprintf("%s-%d", name, n)); c.status != http.StatusOK {
			time.Sleep(errorPause)
		}
		return true
	})
}

// probe asks /healthz of each of the nodes every healthEvery.
func (l *haLoad) probe(t *testing.T, nodes ...int) {
	t.Helper()
	for _, i := range nodes {
		cl := l.c.client(t, i, "")
		l.run(func(int) bool {
			l.do(cl, i, "", opHealth, "")
			time.Sleep(healthEvery)
			return true
		})
	}
}

// do sends one call through cl, a client of node with the API key who
// (empty for the root key), and keeps it; name names a ring it creates,
// or the Asset of an encrypt (its data "call").
func (l *haLoad) do(cl *client.Client, node int, who string, op haOp, name string) haCall {
	ctx, status := withStatus(bg)
	c := haCall{node: node, who: who, op: op, start: time.Now()}
	var ack func() // keeps what the call made, once it is acknowledged
	switch op {
	case opHealth:
		c.err = cl.Healthz(ctx)
	case opEncrypt, opEncryptAsset:
		in := kms.EncryptInput{RingName: l.ring}
		if op == opEncryptAsset {
			c.asset = name
			in.Asset = &kms.AssetInput{Data: map[string]any{"call": name}}
		}
		e, err := cl.Encrypt(ctx, in)
		if c.err = err; err == nil {
			c.hash = e.Hash
			a := clusterAck{node: node, keyID: e.Key.ID, hash: e.Hash, header: e.Header, keyShare: e.KeyShare}
			if e.Asset != nil {
				a.assetID = e.Asset.ID
			}
			ack = func() { l.encrypts = append(l.encrypts, a) }
		}
	case opRing:
		c.ring = name
		_, c.err = cl.CreateKeyRing(ctx, kms.CreateKeyRingInput{Name: name, KEM: "x25519"})
		ack = func() { l.rings = append(l.rings, name) }
	case opRotate:
		k, err := cl.Rotate(ctx, kms.RotateInput{RingName: l.ring})
		if c.err = err; err == nil {
			ack = func() { l.keys = append(l.keys, k.ID) }
		}
	case opAPIKey:
		k, err := cl.CreateAPIKey(ctx, kms.APIKeyInput{AccountID: kms.BootstrapAccountUID, AccountByUID: true,
			Flags: kms.Flags{"keyring." + l.ring + ".encrypt": true}})
		if c.err = err; err == nil {
			ack = func() { l.apiKeys = append(l.apiKeys, k.KeyID) }
		}
	}
	c.end, c.status = time.Now(), *status
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.calls = append(l.calls, c); ack != nil && c.err == nil {
		ack()
	}
	return c
}

// filter returns the calls that match (all for nil), in order of end.
func (l *haLoad) filter(match func(haCall) bool) []haCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []haCall
	for _, c := range l.calls {
		if match == nil || match(c) {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b haCall) int { return a.end.Compare(b.end) })
	return out
}

// oks returns node's writes (or /healthz calls) answered 200 that ended
// after since, in the order they ended.
func (l *haLoad) oks(node int, write bool, since time.Time) []haCall {
	return l.filter(func(c haCall) bool {
		return c.node == node && c.write() == write && c.status == http.StatusOK && c.end.After(since)
	})
}

// waitAcked waits until each of nodes has answered 200 to n writes that
// ended after since.
func (l *haLoad) waitAcked(t *testing.T, since time.Time, n int, nodes ...int) {
	t.Helper()
	waitFor(t, 30*time.Second, fmt.Sprintf("%d acknowledged writes on each node", n), func() bool {
		for _, i := range nodes {
			if len(l.oks(i, true, since)) < n {
				return t.Failed()
			}
		}
		return true
	})
}

// waitServed waits for each of nodes to answer 200 on /healthz and on a
// write after since, requires both within limit of since, and returns
// how long after since each first did: [node]{/healthz, write}.
func (l *haLoad) waitServed(t *testing.T, since time.Time, limit time.Duration, nodes ...int) map[int][2]time.Duration {
	t.Helper()
	out := map[int][2]time.Duration{}
	waitFor(t, limit+time.Second, "a 200 on /healthz and on a write of every node", func() bool {
		for _, i := range nodes {
			health, write := l.oks(i, false, since), l.oks(i, true, since)
			if len(health) == 0 || len(write) == 0 {
				return t.Failed()
			}
			out[i] = [2]time.Duration{health[0].end.Sub(since).Round(time.Millisecond), write[0].end.Sub(since).Round(time.Millisecond)}
		}
		return true
	})
	for i, d := range out {
		if max(d[0], d[1]) > limit {
			t.Errorf("node %d answered 200 on /healthz %v and on a write %v after, want both within %v", i+1, d[0], d[1], limit)
		}
	}
	return out
}

// checkAcked requires every write the load saw acknowledged to be there,
// read through the clients in turn: each encrypt decrypts with its key
// and its Asset, each ring, each key a rotation made and each API key
// exists.
func (l *haLoad) checkAcked(t *testing.T, clients ...*client.Client) {
	t.Helper()
	checkDecrypts(t, clients, l.encrypts)
	for i, name := range l.rings {
		if _, err := clients[i%len(clients)].GetKeyRing(bg, kms.RingRef{Name: name}); err != nil {
			t.Errorf("GetKeyRing of an acknowledged ring %s = %s", name, outcome(err))
		}
	}
	for i, id := range l.keys {
		if _, err := clients[i%len(clients)].GetKey(bg, kms.RingRef{Name: l.ring}, id); err != nil {
			t.Errorf("GetKey of the key %s of an acknowledged rotation = %s", id, outcome(err))
		}
	}
	for i, id := range l.apiKeys {
		if _, err := clients[i%len(clients)].GetAPIKey(bg, id); err != nil {
			t.Errorf("GetAPIKey of an acknowledged API key %s = %s", id, outcome(err))
		}
	}
	t.Logf("every acknowledged write is there: %d encrypts, %d rings, %d rotations, %d API keys",
		len(l.encrypts), len(l.rings), len(l.keys), len(l.apiKeys))
}

// checkRefused requires that no ring whose creation was answered an error
// exists: an error answer means that nothing was done (docs/API.md), on
// PostgreSQL too, where a commit whose answer was lost is settled before
// anyone is answered (docs/OPERATIONS.md, "A connection lost during a
// commit"). The one exception there, a database out of reach for two
// minutes, does not arise in these tests: an answer that says an outcome
// is unknown fails them.
func (l *haLoad) checkRefused(t *testing.T, cl *client.Client) {
	t.Helper()
	refused := l.filter(func(c haCall) bool { return c.op == opRing && c.status != http.StatusOK })
	for _, c := range refused {
		if strings.Contains(kms.ErrorMessage(c.err), "could not be found out") {
			t.Errorf("%s: an outcome left unknown", c)
		}
		_, err := cl.GetKeyRing(bg, kms.RingRef{Name: c.ring})
		switch {
		case err == nil:
			t.Errorf("%s, yet the ring exists", c)
		case kms.ErrorKind(err) != kms.KindNotFound:
			t.Errorf("GetKeyRing %s = %s", c.ring, outcome(err))
		}
	}
	t.Logf("no ring whose creation was answered an error exists (%d)", len(refused))
}

// TestHAFailoverUnderLoad: three nodes on the multi-host URL of a primary
// and its synchronous standby (target_session_attrs=read-write), under a
// load of every kind of write, across a SIGKILL of the primary at a
// random moment and the promotion of the standby. Every write
// acknowledged before or after is on the new primary; each node serves
// again, a 200 on /healthz and on a write, within 10 s of the promotion,
// as the same process; no call is answered 500 (503 while there is no
// primary), and the audit chain verifies.
func TestHAFailoverUnderLoad(t *testing.T) {
	needKmsd(t)
	const (
		workers = 3  // per node
		first   = 10 // writes each node acknowledges before the kill
		more    = 20 // and after the promotion
		outage  = time.Second
	)
	pair := pgtest.StartPair(t)
	c := startCluster(t, slices.Repeat([]string{pair.MultiURL()}, clusterNodes))
	pids := c.pids()
	newRing(t, c.root(t, 0), "ha")
	l := &haLoad{c: c, ring: "ha"}
	nodes := []int{0, 1, 2}
	l.probe(t, nodes...)
	l.writes(t, nodes, workers, opEncrypt, opRing, opEncryptAsset, opRotate, opEncrypt, opAPIKey)
	defer l.halt()
	l.waitAcked(t, time.Time{}, first, nodes...)
	delay := time.Duration(rand.IntN(401)) * time.Millisecond
	time.Sleep(delay)
	killedAt := time.Now()
	pair.KillPrimary()
	time.Sleep(outage) // a failover's detection takes at least that
	pair.Promote()
	promotedAt := time.Now()
	served := l.waitServed(t, promotedAt, serveBound, nodes...)
	l.waitAcked(t, promotedAt, more, nodes...)
	l.halt()

	t.Logf("SIGKILL of the primary %v after each node's %dth acknowledged write; the standby promoted %v later",
		delay, first, promotedAt.Sub(killedAt).Round(time.Millisecond))
	for _, i := range nodes {
		unavailable := l.filter(func(c haCall) bool { return c.node == i && c.status == http.StatusServiceUnavailable })
		var last time.Duration
		if len(unavailable) > 0 {
			last = unavailable[len(unavailable)-1].end.Sub(killedAt).Round(time.Millisecond)
		}
		t.Logf("node %d: %d answers 503, the last %v after the kill; after the promotion, /healthz 200 in %v, a write 200 in %v",
			i+1, len(unavailable), last, served[i][0], served[i][1])
	}
	for _, c := range l.filter(func(c haCall) bool { return c.status != http.StatusOK }) {
		switch {
		case c.end.Before(killedAt):
			t.Errorf("before the kill: %s, want 200", c)
		case c.status != http.StatusServiceUnavailable:
			t.Errorf("%v after the kill: %s, want 200 or 503", c.end.Sub(killedAt).Round(time.Millisecond), c)
		}
	}
	c.sameProcesses(t, pids)
	if c.v.noServerErrors(t); t.Failed() {
		t.FailNow()
	}
	l.checkAcked(t, c.root(t, 0), c.root(t, 1), c.root(t, 2))
	l.checkRefused(t, c.root(t, 0))
	c.v.noServerErrors(t)
	c.stop(t)
	out := c.in.verifyAudit(t)
	t.Logf("verify-audit: %s", strings.ReplaceAll(strings.TrimSpace(out), "\n", "; "))
}

// TestHASilentNode: three nodes on one database, node 3 reaching it
// through a proxy that, under load on all three, holds its traffic
// (connections open, nothing passing, as with a frozen host or a
// partition) just as node 3 takes the append lock on which every node's
// writes take turns. With -store-timeout T, node 3's calls end in 503
// within 2T and a little (docs/OPERATIONS.md, "A silent node": T for the
// batch that met the silence, T more for a call that waited for it), and
// its /healthz answers 503; nodes 1 and 2 answer 200 throughout, each
// call within T; once the traffic passes again node 3 serves by itself;
// every acknowledged write exists, and no ring whose creation was
// answered an error does.
func TestHASilentNode(t *testing.T) {
	needKmsd(t)
	const (
		timeout = 2 * time.Second // -store-timeout of every node
		bound   = 2*timeout + 3*time.Second
		hold    = bound + time.Second // a call that begins with it ends in it
		workers = 2                   // per node
	)
	db := pgtest.URL(t)
	p, through := pgtest.Proxy(t, db)
	c := startCluster(t, []string{db, db, through}, "-store-timeout", timeout.String())
	pids := c.pids()
	newRing(t, c.root(t, 0), "silent")
	l := &haLoad{c: c, ring: "silent"}
	l.probe(t, 0, 1, 2)
	l.writes(t, []int{0, 1, 2}, workers, opRing, opEncrypt, opRing, opEncryptAsset)
	defer l.halt()
	l.waitAcked(t, time.Time{}, 5, 2)
	// Held as node 3 takes the append lock: the moment its silence would
	// hold up the others most.
	select {
	case <-p.HoldOn([]byte(sqlAppendLock)):
	case <-time.After(10 * time.Second):
		t.Fatal("node 3 took no append lock for 10s; has pgstore's statement changed?")
	}
	heldAt := time.Now()
	time.Sleep(hold)
	p.SetMode(netproxy.Pass)
	passedAt := time.Now()
	served := l.waitServed(t, passedAt, timeout+10*time.Second, 2)
	time.Sleep(500 * time.Millisecond)
	l.halt()

	t.Logf("node 3's traffic held for %v, as it took the append lock; then it answered 200 on /healthz %v after, on a write %v after",
		passedAt.Sub(heldAt).Round(time.Millisecond), served[2][0], served[2][1])
	var slowest [3]time.Duration
	var writes, health int
	for _, c := range l.filter(nil) {
		if c.during(heldAt, passedAt) {
			slowest[c.node] = max(slowest[c.node], c.took())
		}
		switch {
		case c.node != 2 && c.status != http.StatusOK:
			t.Errorf("%s, want 200: node 3's silence must not hold up the others", c)
		case c.node != 2 && c.during(heldAt, passedAt) && c.took() > timeout:
			t.Errorf("%s while node 3's traffic was held, want an answer within the store timeout %v", c, timeout)
		case c.node != 2:
		case c.status != http.StatusOK && c.status != http.StatusServiceUnavailable:
			t.Errorf("%s, want 200 or 503", c)
		case c.during(heldAt, passedAt) && c.took() > bound:
			t.Errorf("%s while its traffic was held, want an answer within %v", c, bound)
		case c.write() && c.start.After(heldAt) && c.end.Before(passedAt):
			if writes++; c.status != http.StatusServiceUnavailable {
				t.Errorf("%s while its traffic was held, want 503", c)
			}
		case !c.write() && c.start.After(heldAt.Add(timeout)) && c.end.Before(passedAt):
			if health++; c.status != http.StatusServiceUnavailable {
				t.Errorf("%s, sent %v into the hold, want 503", c, c.start.Sub(heldAt).Round(time.Millisecond))
			}
		}
	}
	t.Logf("slowest call under way during the hold: node 1 %v, node 2 %v, node 3 %v; node 3 answered 503 to %d writes and %d /healthz sent during the hold",
		slowest[0].Round(time.Millisecond), slowest[1].Round(time.Millisecond), slowest[2].Round(time.Millisecond), writes, health)
	if writes == 0 || health == 0 {
		t.Errorf("node 3 answered %d writes and %d /healthz that began and ended while its traffic was held; want some of each", writes, health)
	}
	c.sameProcesses(t, pids)
	c.v.noServerErrors(t)
	l.checkAcked(t, c.root(t, 0), c.root(t, 1))
	l.checkRefused(t, c.root(t, 0))
}

// TestHAHotStandby: a node started on a hot standby (the database
// bootstrapped through a node on the primary) answers /healthz and every
// write 503 saying the database is read-only, never 500, and serves, as
// the same process, within 10 s of the standby's promotion.
func TestHAHotStandby(t *testing.T) {
	needKmsd(t)
	const readOnly = time.Second // /healthz alone, then with writes too
	pair := pgtest.StartPair(t)
	c := startCluster(t, []string{pair.PrimaryURL()})
	newRing(t, c.root(t, 0), "ha")
	enc := must[*kms.EncryptResult](t, "Encrypt on the primary")(c.root(t, 0).Encrypt(bg, kms.EncryptInput{RingName: "ha",
		Asset: &kms.AssetInput{Data: map[string]any{"on": "the primary"}}}))
	c.stop(t)

	c.nodes[0].store = pair.StandbyURL()
	c.start(t, c.nodes[0])
	pids := c.pids()
	l := &haLoad{c: c, ring: "ha"}
	l.probe(t, 0)
	defer l.halt()
	time.Sleep(readOnly)
	l.writes(t, []int{0}, 2, opEncrypt, opRing, opRotate, opEncryptAsset, opAPIKey)
	time.Sleep(readOnly)
	killedAt := time.Now()
	pair.KillPrimary()
	pair.Promote()
	promotedAt := time.Now()
	served := l.waitServed(t, promotedAt, serveBound, 0)
	time.Sleep(500 * time.Millisecond)
	l.halt()

	t.Logf("on the standby: %d calls answered; after the promotion, /healthz 200 in %v, a write 200 in %v",
		len(l.filter(func(c haCall) bool { return c.end.Before(killedAt) })), served[0][0], served[0][1])
	refused := map[haOp]int{}
	for _, c := range l.filter(nil) {
		switch {
		case c.end.After(killedAt):
			if c.status != http.StatusOK && c.status != http.StatusServiceUnavailable {
				t.Errorf("%s, want 200 or 503", c)
			}
		case c.status != http.StatusServiceUnavailable || !strings.HasPrefix(kms.ErrorMessage(c.err), readOnlyMessage):
			t.Errorf("on the standby: %s; want 503 saying %q", c, readOnlyMessage)
		default:
			refused[c.op]++
		}
	}
	for _, op := range []haOp{opHealth, opEncrypt, opEncryptAsset, opRing, opRotate, opAPIKey} {
		if refused[op] == 0 {
			t.Errorf("no %s was answered on the standby", op)
		}
	}
	c.sameProcesses(t, pids)
	c.v.noServerErrors(t)
	root := c.root(t, 0)
	checkDecrypts(t, []*client.Client{root}, []clusterAck{{keyID: enc.Key.ID, hash: enc.Hash, header: enc.Header, assetID: enc.Asset.ID, keyShare: enc.KeyShare}})
	l.checkAcked(t, root)
	l.checkRefused(t, root)
}

// TestHACommitCut: a node whose connection to the database is cut at the
// COMMIT of a write (an encrypt, a ring creation) answers as the database
// holds it, read through another node. Cut just after the COMMIT went
// out, the server may have run it or not (it may end the session first):
// the answer is 200 and the write is there, or 503 and nothing is. Cut
// just before, the answer is 503 and nothing is there.
func TestHACommitCut(t *testing.T) {
	needKmsd(t)
	db := pgtest.URL(t)
	p, through := pgtest.Proxy(t, db)
	c := startCluster(t, []string{db, through})
	direct, cut := c.root(t, 0), c.root(t, 1)
	newRing(t, cut, "cut")
	// The first encrypt of a node with a key reserves a block of its
	// calls, in a commit of its own; the next is one commit.
	must[*kms.EncryptResult](t, "Encrypt")(cut.Encrypt(bg, kms.EncryptInput{RingName: "cut"}))
	l := &haLoad{c: c, ring: "cut"}
	records := func(props map[string]any) int {
		return len(allPages(t, "SearchActivity", 100, func(r kms.PageRequest) (*kms.List[*kms.Activity], error) {
			return direct.SearchActivity(bg, client.ActivityFilter{Ring: "cut", Action: "encrypt", Props: props}, r)
		}))
	}
	for _, where := range []netproxy.Cut{netproxy.CutAfter, netproxy.CutBefore} {
		for _, op := range []haOp{opEncrypt, opRing} {
			side := map[netproxy.Cut]string{netproxy.CutAfter: "after", netproxy.CutBefore: "before"}[where]
			t.Run(fmt.Sprintf("%s cut %s the COMMIT", op, side), func(t *testing.T) {
				before, acked := records(nil), len(l.encrypts)
				done := p.CutOn(pgtest.PreparedMessage(sqlCommit), where)
				call := l.do(cut, 1, "", op, "cut-"+side)
				select {
				case <-done:
				case <-time.After(10 * time.Second):
					t.Fatalf("the proxy never saw a COMMIT (%s)", call)
				}
				var present bool
				if op == opEncrypt {
					n := records(nil) - before
					if n != 0 && n != 1 {
						t.Fatalf("%d more encrypt records of the ring, want 0 or 1", n)
					}
					if present = n == 1; call.status == http.StatusOK {
						a := l.encrypts[acked]
						hi := must[*kms.HashInfo](t, "LookupHash on the other node")(direct.LookupHash(bg, a.hash))
						if n := records(map[string]any{"hash": a.hash}); hi.KeyID != a.keyID || n != 1 {
							t.Errorf("the acknowledged encrypt: LookupHash = key %s, want %s; %d records of its hash, want 1", hi.KeyID, a.keyID, n)
						}
					}
				} else {
					_, err := direct.GetKeyRing(bg, kms.RingRef{Name: call.ring})
					if present = err == nil; !present && kms.ErrorKind(err) != kms.KindNotFound {
						t.Fatalf("GetKeyRing on the other node = %s", outcome(err))
					}
				}
				t.Logf("%s; in the database: %v", call, present)
				switch {
				case call.status == http.StatusOK && !present:
					t.Errorf("%s, but the database does not hold it", call)
				case call.status != http.StatusOK && call.status != http.StatusServiceUnavailable:
					t.Errorf("%s, want 200 or 503", call)
				case call.status != http.StatusOK && present:
					t.Errorf("%s, but the database holds it", call)
				case where == netproxy.CutBefore && call.status != http.StatusServiceUnavailable:
					t.Errorf("%s, whose COMMIT never reached the server; want 503", call)
				}
				// The node serves on.
				must[*kms.EncryptResult](t, "Encrypt after the cut")(cut.Encrypt(bg, kms.EncryptInput{RingName: "cut"}))
			})
		}
	}
	c.v.noServerErrors(t)
}

// TestHAConnectionCuts: three nodes on a primary with a synchronous
// standby (the URL of the documented setup, naming both with
// target_session_attrs=read-write), under a load of encrypts, with and
// without an Asset, on a ring with a maxEncryptCount (so that the nodes
// reserve blocks of its uses and the ring rotates by count), and of ring
// creations, rotations and API key creations, while node 3's connections
// to the database are cut at random moments: reset, alone or with an
// outage of a few milliseconds, or cut just before or just after a
// COMMIT, 30 times in about 5 s, in three rounds. An error answer means
// that nothing of the call was done (docs/OPERATIONS.md, "What an answer
// means"). Each encrypting worker calls with an API key of its own, one
// call at a time, so that every record of the trail is told to one call:
//
//   - the trail holds, for each worker, one successful encrypt record per
//     encrypt acknowledged (its hash), and no other;
//   - no Asset named by an encrypt answered an error exists;
//   - no ring whose creation answered an error exists, and everything
//     acknowledged does; no call answers anything but 200 or 503, and the
//     audit chain verifies;
//   - and so that the test shows something, some encrypts of each kind
//     were answered 200 and some 503.
func TestHAConnectionCuts(t *testing.T) {
	needKmsd(t)
	const (
		rounds  = 3
		cuts    = 30 // a round
		over    = 5 * time.Second
		workers = 3  // encrypting, a node
		limit   = 64 // the ring's maxEncryptCount: blocks of 8
	)
	pair := pgtest.StartPair(t)
	p, through := pair.ProxyPrimary()
	multi := pair.MultiURL()
	c := startCluster(t, []string{multi, multi, through})
	pids := c.pids()
	root := c.root(t, 0)
	newRing(t, root, "cuts")
	must[*kms.KeyRingConfig](t, "SetConfig")(root.SetConfig(bg, kms.RingRef{Name: "cuts"},
		&kms.KeyRingConfig{Algos: kms.ConfigAlgos{AES256: kms.AlgoConfig{MaxEncryptCount: limit}}}))
	l := &haLoad{c: c, ring: "cuts"}
	var who []string // the encrypting workers' API keys
	for i := range clusterNodes {
		for w := range workers {
			k := must[*kms.APIKey](t, "CreateAPIKey")(root.CreateAPIKey(bg, kms.APIKeyInput{AccountID: kms.BootstrapAccountUID,
				AccountByUID: true, Flags: kms.Flags{"keyring.cuts.encrypt": true}}))
			who = append(who, k.KeyID)
			l.worker(c.client(t, i, k.Key), i, k.KeyID, fmt.Sprintf("cuts-%d-%d", i+1, w), w, opEncrypt, opEncryptAsset)
		}
	}
	l.writes(t, []int{0, 1, 2}, 1, opRing, opRotate, opAPIKey)
	defer l.halt()
	since := time.Time{}
	for r := range rounds {
		l.waitAcked(t, since, 10, 2)
		for range cuts {
			time.Sleep(rand.N(2 * over / cuts))
			switch rand.IntN(4) {
			case 0:
				p.SetMode(netproxy.Refuse)
				p.SetMode(netproxy.Pass)
			case 1:
				p.SetMode(netproxy.Refuse)
				time.Sleep(rand.N(20 * time.Millisecond))
				p.SetMode(netproxy.Pass)
			case 2:
				p.CutOn(pgtest.PreparedMessage(sqlCommit), netproxy.CutBefore)
			case 3:
				p.CutOn(pgtest.PreparedMessage(sqlCommit), netproxy.CutAfter)
			}
		}
		since = time.Now()
		t.Logf("round %d: %d cuts of node 3's connections", r+1, cuts)
	}
	l.waitAcked(t, since, 10, 2) // node 3 serves again
	l.halt()

	answered := map[haOp]map[int]int{}
	for _, call := range l.filter(nil) {
		if answered[call.op] == nil {
			answered[call.op] = map[int]int{}
		}
		answered[call.op][call.status]++
		if call.status != http.StatusOK && call.status != http.StatusServiceUnavailable {
			t.Errorf("%s, want 200 or 503", call)
		}
	}
	t.Logf("answers by status: encrypts %v, with an Asset %v, ring creations %v, rotations %v, API keys %v",
		answered[opEncrypt], answered[opEncryptAsset], answered[opRing], answered[opRotate], answered[opAPIKey])
	for _, op := range []haOp{opEncrypt, opEncryptAsset} {
		if answered[op][http.StatusOK] == 0 || answered[op][http.StatusServiceUnavailable] == 0 {
			t.Errorf("%s: %v; want some answered 200 and some 503, or the test shows nothing", op, answered[op])
		}
	}
	c.sameProcesses(t, pids)
	c.v.noServerErrors(t)

	// Each worker's records against its calls.
	for _, id := range who {
		calls := l.filter(func(c haCall) bool { return c.who == id })
		acked := map[string]int{} // hash -> its records
		for _, call := range calls {
			if call.status == http.StatusOK {
				acked[call.hash] = 0
			}
		}
		recs := allPages(t, "SearchActivity", 1000, func(r kms.PageRequest) (*kms.List[*kms.Activity], error) {
			return root.SearchActivity(bg, client.ActivityFilter{KeyID: id, Action: "encrypt", Props: map[string]any{"result": "ok"}}, r)
		})
		for _, rec := range recs {
			h, _ := rec.Props["hash"].(string)
			if n, ok := acked[h]; ok {
				acked[h] = n + 1
				continue
			}
			// Not acknowledged: the call this key made when the record
			// was written (one at a time) answered an error.
			at := time.UnixMilli(rec.CreatedAt)
			what := "no call of its key was under way then"
			if i := slices.IndexFunc(calls, func(c haCall) bool {
				return !c.start.After(at.Add(time.Millisecond)) && !c.end.Before(at.Add(-time.Millisecond))
			}); i >= 0 {
				what = calls[i].String()
			}
			t.Errorf("record %d says an encrypt by %s handed out key %v (hash %s, Asset %v), at %s: %s",
				rec.Seq, id, rec.Props["keyId"], h, rec.Props["assetId"], at.Format("15:04:05.000"), what)
		}
		for h, n := range acked {
			if n != 1 {
				t.Errorf("the acknowledged encrypt of hash %s by %s has %d records, want 1", h, id, n)
			}
		}
	}
	refused := l.filter(func(c haCall) bool { return c.op == opEncryptAsset && c.status != http.StatusOK })
	for _, call := range refused {
		assets := allPages(t, "SearchAssets", 10, func(r kms.PageRequest) (*kms.List[*kms.Asset], error) {
			return root.SearchAssets(bg, kms.AssetFilter{Data: map[string]any{"call": call.asset}}, r)
		})
		if len(assets) != 0 {
			t.Errorf("%s, yet its Asset %s exists", call, assets[0].ID)
		}
	}
	t.Logf("no record or Asset of an encrypt answered an error (%d with an Asset)", len(refused))
	l.checkRefused(t, root)
	l.checkAcked(t, c.root(t, 0), c.root(t, 1), c.root(t, 2))
	c.stop(t)
	out := c.in.verifyAudit(t)
	t.Logf("verify-audit: %s", strings.ReplaceAll(strings.TrimSpace(out), "\n", "; "))
}
