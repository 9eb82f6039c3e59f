package pgstore

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/netproxy"
	"github.com/ringkms/kms/internal/pgtest"
)

// TestCluster runs two Services, as two kmsd nodes would, on one
// database: they start together and make one signing key and one
// bootstrap; concurrent encrypts through both keep one unbroken activity
// chain and never hand a key out more than maxEncryptCount times in all;
// what one encrypts the other decrypts; a rotation on one reaches the
// other within the documented bound; a ring deleted on one is refused by
// the other at once.
func TestCluster(t *testing.T) {
	dbURL := pgtest.URL(t)
	mk := kms.GenerateMasterKey()
	ctx := context.Background()
	const secret = "cluster-bootstrap-secret-0123456789abcdef"

	var (
		svcs [2]*kms.Service
		sts  [2]*Store
		errs [2]error
		made [2]bool
		wg   sync.WaitGroup
	)
	for i := range svcs {
		sts[i] = openStore(t, dbURL, Options{})
	}
	for i := range svcs {
		wg.Go(func() {
			if svcs[i], errs[i] = kms.New(sts[i], kms.Options{MasterKey: mk}); errs[i] != nil {
				return
			}
			var b kms.BootstrapResult
			b, errs[i] = svcs[i].Bootstrap(ctx, secret)
			made[i] = b.Created
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("node %d: New and Bootstrap started together = %v", i, err)
		}
		defer svcs[i].Close()
	}
	if made[0] == made[1] {
		t.Fatalf("Bootstrap created the root key on nodes %v, want on exactly one", made)
	}
	k0, err0 := svcs[0].SigningKeys(ctx)
	k1, err1 := svcs[1].SigningKeys(ctx)
	if err0 != nil || err1 != nil || len(k0.Keys) != 1 || len(k1.Keys) != 1 || k0.Keys[0] != k1.Keys[0] || !k0.Keys[0].Active {
		t.Fatalf("signing keys = %+v (%v) and %+v (%v), want one, the same and active on both nodes", k0, err0, k1, err1)
	}
	roots := [2]context.Context{rootOf(t, svcs[0], secret), rootOf(t, svcs[1], secret)}

	const limit = 50
	if _, err := svcs[0].CreateKeyRing(roots[0], kms.CreateKeyRingInput{Name: "shared"}); err != nil {
		t.Fatal(err)
	}
	if _, err := svcs[0].SetConfig(roots[0], kms.RingRef{Name: "shared"}, &kms.KeyRingConfig{Algos: kms.ConfigAlgos{AES256: kms.AlgoConfig{MaxEncryptCount: limit}}}); err != nil {
		t.Fatal(err)
	}
	var (
		mu   sync.Mutex
		uses = map[string]int{}
		encs [2][]*kms.EncryptResult
	)
	for i := range svcs {
		for range 4 {
			wg.Go(func() {
				for range 40 {
					res, err := svcs[i].Encrypt(roots[i], kms.EncryptInput{RingName: "shared"})
					if err != nil {
						t.Errorf("node %d: Encrypt = %v", i, err)
						return
					}
					mu.Lock()
					uses[res.Key.ID]++
					encs[i] = append(encs[i], res)
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for id, n := range uses {
		if n > limit {
			t.Errorf("key %s handed out %d times, over maxEncryptCount %d", id, n, limit)
		}
	}
	if len(uses) < 320/limit {
		t.Errorf("320 encrypts used %d keys, want at least %d", len(uses), 320/limit)
	}
	for i := range svcs {
		other := svcs[1-i]
		for _, enc := range encs[i][:20] {
			dec, err := other.Decrypt(roots[1-i], kms.DecryptInput{Hash: enc.Hash, Header: enc.Header})
			if err != nil || dec.Key.ID != enc.Key.ID {
				t.Fatalf("node %d decrypting node %d's encrypt = %v", 1-i, i, err)
			}
		}
	}

	// A rotation on node 0 reaches node 1 within the bound of a second.
	if _, err := svcs[0].CreateKeyRing(roots[0], kms.CreateKeyRingInput{Name: "turn"}); err != nil {
		t.Fatal(err)
	}
	if _, err := svcs[1].Encrypt(roots[1], kms.EncryptInput{RingName: "turn"}); err != nil {
		t.Fatal(err) // node 1 caches the ring and its key
	}
	k, err := svcs[0].Rotate(roots[0], kms.RotateInput{RingName: "turn"})
	if err != nil {
		t.Fatal(err)
	}
	rotated := time.Now()
	time.Sleep(time.Until(rotated.Add(time.Second)))
	if res, err := svcs[1].Encrypt(roots[1], kms.EncryptInput{RingName: "turn"}); err != nil || res.Key.ID != k.ID {
		t.Fatalf("node 1's encrypt a second after node 0 rotated = %v, %v; want the new key %s", res, err, k.ID)
	}

	// A ring deleted on node 0 is refused by node 1 at once, whatever its
	// caches hold.
	if _, err := svcs[0].DeleteKeyRing(roots[0], kms.RingRef{Name: "turn"}); err != nil {
		t.Fatal(err)
	}
	if res, err := svcs[1].Encrypt(roots[1], kms.EncryptInput{RingName: "turn"}); kms.ErrorKind(err) != kms.KindNotFound {
		t.Fatalf("node 1's encrypt on a ring node 0 deleted = %v, %v; want NotFound", res, err)
	}

	// One chain, whole, seen alike from both nodes.
	for i, svc := range svcs {
		res, err := svc.VerifyActivityChain(ctx)
		if err != nil {
			t.Fatalf("node %d: VerifyActivityChain = %v", i, err)
		}
		if n, err := sts[i].Trail().(*Trail).refresh(); err != nil || res.Records != n {
			t.Errorf("node %d: VerifyActivityChain checked %d records, the trail has %d (%v)", i, res.Records, n, err)
		}
	}
}

// TestRekeyedWhileCutOff: a node cut off from the database while kmsd
// rekey runs, which gets its share of the lock back after the rekey
// ended, finds the store sealed under another master key once its
// connection is back, and refuses every write (and its health check)
// from then on, instead of sealing new secrets under the old key.
func TestRekeyedWhileCutOff(t *testing.T) {
	direct := pgtest.URL(t)
	p, viaProxy := pgtest.Proxy(t, direct)
	ctx := context.Background()
	oldKey, newKey := kms.GenerateMasterKey(), kms.GenerateMasterKey()
	svc := newService(t, openStore(t, viaProxy, Options{}), kms.Options{MasterKey: oldKey})
	b, err := svc.Bootstrap(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	root := rootOf(t, svc, b.Secret)
	if _, err := svc.CreateKeyRing(root, kms.CreateKeyRingInput{Name: "r"}); err != nil {
		t.Fatal(err)
	}

	p.SetMode(netproxy.Refuse)
	deadline := time.Now().Add(10 * time.Second)
	var st *Store
	for st == nil {
		// The server lets the node's lock go once it sees its connection
		// closed.
		if st, err = Open(ctx, direct, Options{Exclusive: true, Existing: true}); err != nil {
			if kms.ErrorKind(err) != kms.KindConflict || time.Now().After(deadline) {
				t.Fatalf("Open for the rekey = %v", err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if _, err := kms.Rekey(ctx, st, oldKey, newKey); err != nil {
		t.Fatalf("Rekey = %v", err)
	}
	st.Close()
	p.SetMode(netproxy.Pass)

	deadline = time.Now().Add(15 * time.Second)
	for {
		err := svc.Ping(ctx)
		if err != nil && strings.Contains(err.Error(), "rekeyed") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Ping = %v, want the error of a store rekeyed under the node", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	_, err = svc.CreateKeyRing(root, kms.CreateKeyRingInput{Name: "after"})
	if kms.ErrorKind(err) != kms.KindUnavailable || !strings.Contains(err.Error(), "restart it with the new master key") {
		t.Fatalf("CreateKeyRing on the node = %v, want Unavailable saying to restart with the new master key", err)
	}
}

// TestClusterSigningKeyRotation rotates the header signing key of two
// nodes on one database, through one node and then as kmsd
// rotate-signing-key does, beside them: at every moment each node signs
// with a key that the store publishes, each verifies the other's headers
// of either key, and within the documented bound (a second) both sign
// with the new key.
func TestClusterSigningKeyRotation(t *testing.T) {
	dbURL := pgtest.URL(t)
	mk := kms.GenerateMasterKey()
	ctx := context.Background()
	var (
		svcs  [2]*kms.Service
		roots [2]context.Context
	)
	for i := range svcs {
		svcs[i] = newService(t, openStore(t, dbURL, Options{}), kms.Options{MasterKey: mk})
	}
	const secret = "cluster-bootstrap-secret-0123456789abcdef"
	if _, err := svcs[0].Bootstrap(ctx, secret); err != nil {
		t.Fatal(err)
	}
	for i, svc := range svcs {
		roots[i] = rootOf(t, svc, secret)
	}
	if _, err := svcs[0].CreateKeyRing(roots[0], kms.CreateKeyRingInput{Name: "r"}); err != nil {
		t.Fatal(err)
	}
	var headers []*kms.EncryptResult
	// encrypt issues a header on node i and checks that it names a
	// published key, and that every header so far verifies on both
	// nodes and with the published keys. It returns the key ID.
	encrypt := func(what string, i int) string {
		t.Helper()
		res, err := svcs[i].Encrypt(roots[i], kms.EncryptInput{RingName: "r"})
		if err != nil {
			t.Fatalf("%s: node %d: Encrypt = %v", what, i, err)
		}
		headers = append(headers, res)
		raw, _ := base64.RawURLEncoding.DecodeString(res.Header)
		id := hex.EncodeToString(raw[2:10])
		for n, svc := range svcs {
			set, err := svc.SigningKeys(ctx)
			if err != nil {
				t.Fatalf("%s: node %d: SigningKeys = %v", what, n, err)
			}
			for _, h := range headers {
				if v, err := set.VerifyHeader(h.Header, nil); err != nil || !v.Valid {
					t.Fatalf("%s: header of key %s with the keys node %d publishes = %+v, %v", what, id, n, v, err)
				}
				if info, err := svc.LookupHeader(roots[n], h.Header); err != nil || !info.Valid {
					t.Fatalf("%s: node %d: LookupHeader = %+v, %v", what, n, info, err)
				}
				if _, err := svc.Decrypt(roots[n], kms.DecryptInput{Hash: h.Hash, Header: h.Header}); err != nil {
					t.Fatalf("%s: node %d: Decrypt = %v", what, n, err)
				}
			}
		}
		return id
	}
	first := encrypt("before", 1)
	if got := encrypt("before", 0); got != first {
		t.Fatalf("the nodes sign with keys %s and %s, want one", got, first)
	}

	k, err := svcs[0].RotateSigningKey(roots[0])
	if err != nil {
		t.Fatal(err)
	}
	rotated := time.Now()
	if got := encrypt("rotated on node 0", 0); got != k.ID {
		t.Fatalf("node 0 signs with %s after its rotation, want %s", got, k.ID)
	}
	encrypt("rotated on node 0", 1) // the old key or the new: both published
	time.Sleep(time.Until(rotated.Add(time.Second)))
	if got := encrypt("a second after the rotation", 1); got != k.ID {
		t.Fatalf("node 1 signs with %s a second after node 0 rotated, want %s", got, k.ID)
	}

	// kmsd rotate-signing-key, on a store of its own, beside the nodes.
	k2, err := kms.RotateStoreSigningKey(ctx, openStore(t, dbURL, Options{}), mk)
	if err != nil {
		t.Fatalf("RotateStoreSigningKey = %v", err)
	}
	rotated = time.Now()
	encrypt("rotated beside the nodes", 0)
	encrypt("rotated beside the nodes", 1)
	time.Sleep(time.Until(rotated.Add(time.Second)))
	for i := range svcs {
		if got := encrypt("a second after the rotation beside", i); got != k2.ID {
			t.Fatalf("node %d signs with %s a second after the rotation, want %s", i, got, k2.ID)
		}
	}
	set, err := svcs[1].SigningKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(set.Keys) != 3 || set.Keys[0].ID != first || set.Keys[1].ID != k.ID || set.Keys[2].ID != k2.ID || !set.Keys[2].Active || set.Keys[1].Active {
		t.Fatalf("SigningKeys = %+v, want the three keys, oldest first, the last active", set.Keys)
	}
}
