package pgstore

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ringkms/kms"
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
	var roots [2]context.Context
	for i, svc := range svcs {
		p, err := svc.Authenticate(ctx, secret)
		if err != nil {
			t.Fatalf("node %d: Authenticate = %v", i, err)
		}
		roots[i] = kms.WithPrincipal(ctx, p)
	}

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
	p, viaProxy := newProxy(t, direct)
	ctx := context.Background()
	oldKey, newKey := kms.GenerateMasterKey(), kms.GenerateMasterKey()
	svc, err := kms.New(openStore(t, viaProxy, Options{}), kms.Options{MasterKey: oldKey})
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	b, err := svc.Bootstrap(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	pr, err := svc.Authenticate(ctx, b.Secret)
	if err != nil {
		t.Fatal(err)
	}
	root := kms.WithPrincipal(ctx, pr)
	if _, err := svc.CreateKeyRing(root, kms.CreateKeyRingInput{Name: "r"}); err != nil {
		t.Fatal(err)
	}

	p.stop()
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
	p.start()

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
