package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/client"
)

// The crash test: writers load kmsd while it is killed with SIGKILL at a
// random moment, several rounds on one data directory. A write counts as
// acknowledged when kmsd answered it 200; every acknowledged write must be
// there after the restart, as the answer described it. A write in flight
// at the kill (sent, not answered) may or may not have landed: for an
// update, the state found must be the last acknowledged one or the one in
// flight.

const (
	crashRounds  = 4
	crashWorkers = 6
)

// Writes the workers acknowledged, and the updates in flight at a kill.
type (
	ackRing struct {
		name, id, key string // key: the first key
	}
	ackKey struct { // a key made by a rotation
		ring, id string
	}
	// ackEncrypt is an encrypt call; with an Asset, the version of the
	// Asset's data that its header signs.
	ackEncrypt struct {
		ringID, keyID, hash, header string
		asset                       *crashAsset
		version                     int
	}
	// crashAsset is an Asset: its data is {"w", "n", "v": version}. One
	// worker owns it, so its updates are sequential.
	crashAsset struct {
		id      string
		acked   int // the last acknowledged version
		pending int // a later version whose update was in flight at a kill; -1: none
		next    int // the version of the next update
	}
	// crashKey is an API key: its props are {"w", "v": version}, updated
	// by its one owner as Assets are.
	crashKey struct {
		id             string
		acked, pending int
		next           int
	}
)

// crashWorker is the state of one writer; it outlives the rounds.
type crashWorker struct {
	w      int
	rings  []ackRing
	keys   []ackKey
	encs   []ackEncrypt
	assets []*crashAsset
	apikey []*crashKey
	n      int // writes attempted
}

// crashLoad is the load of one round.
type crashLoad struct {
	c      *client.Client
	round  int
	killed atomic.Bool
	acks   atomic.Int64
}

// step makes one write of worker k and records it; it returns false when
// the write failed (kmsd was killed, or a failure reported to t).
func (k *crashWorker) step(t *testing.T, l *crashLoad) bool {
	k.n++
	n := k.n
	ctx := context.Background()
	fail := func(what string, err error) bool {
		if !l.killed.Load() {
			t.Errorf("worker %d, round %d: %s before the kill: %v", k.w, l.round, what, err)
		}
		return false
	}
	op := n % 8
	switch {
	case len(k.rings) == 0:
		op = 0
	case op == 7 && len(k.apikey) == 0:
		op = 6
	}
	var ring []ackRing // one of the worker's rings, as ring[0]
	if len(k.rings) > 0 {
		ring = k.rings[rand.IntN(len(k.rings)):]
	}
	switch op {
	case 0: // a new ring
		name := fmt.Sprintf("r%d-w%d-%d", l.round, k.w, n)
		res, err := l.c.CreateKeyRing(ctx, kms.CreateKeyRingInput{Name: name, KEM: "x25519"})
		if err != nil {
			return fail("CreateKeyRing", err)
		}
		k.rings = append(k.rings, ackRing{name: name, id: res.Ring.ID, key: res.Key.ID})
	case 1: // a rotation
		key, err := l.c.Rotate(ctx, kms.RotateInput{RingName: ring[0].name})
		if err != nil {
			return fail("Rotate", err)
		}
		k.keys = append(k.keys, ackKey{ring: ring[0].name, id: key.ID})
	case 2, 3: // encrypt with a new Asset
		data := map[string]any{"w": k.w, "n": n, "v": 0}
		res, err := l.c.Encrypt(ctx, kms.EncryptInput{RingName: ring[0].name, Asset: &kms.AssetInput{Data: data}})
		if err != nil {
			return fail("Encrypt with a new Asset", err)
		}
		a := &crashAsset{id: res.Asset.ID, pending: -1, next: 1}
		k.assets = append(k.assets, a)
		k.encs = append(k.encs, ackEncrypt{ringID: res.RingID, keyID: res.Key.ID, hash: res.Hash, header: res.Header, asset: a, version: 0})
	case 4, 5: // encrypt updating an Asset (or a plain encrypt)
		if len(k.assets) == 0 {
			res, err := l.c.Encrypt(ctx, kms.EncryptInput{RingName: ring[0].name})
			if err != nil {
				return fail("Encrypt", err)
			}
			k.encs = append(k.encs, ackEncrypt{ringID: res.RingID, keyID: res.Key.ID, hash: res.Hash, header: res.Header})
			break
		}
		a := k.assets[rand.IntN(len(k.assets))]
		ver := a.next
		a.next++
		data := map[string]any{"w": k.w, "n": n, "v": ver}
		res, err := l.c.Encrypt(ctx, kms.EncryptInput{RingName: ring[0].name, Asset: &kms.AssetInput{AssetID: a.id, Data: data}})
		if err != nil {
			a.pending = ver
			return fail("Encrypt updating an Asset", err)
		}
		a.acked, a.pending = ver, -1
		k.encs = append(k.encs, ackEncrypt{ringID: res.RingID, keyID: res.Key.ID, hash: res.Hash, header: res.Header, asset: a, version: ver})
	case 6: // a new API key
		res, err := l.c.CreateAPIKey(ctx, kms.APIKeyInput{AccountID: kms.BootstrapAccountUID, AccountByUID: true,
			Flags: kms.Flags{"keyring." + ring[0].name + ".encrypt": true}, Props: map[string]any{"w": k.w, "v": 0}})
		if err != nil {
			return fail("CreateAPIKey", err)
		}
		k.apikey = append(k.apikey, &crashKey{id: res.KeyID, pending: -1, next: 1})
	case 7: // an API key update
		ak := k.apikey[rand.IntN(len(k.apikey))]
		ver := ak.next
		ak.next++
		_, err := l.c.UpdateAPIKey(ctx, kms.APIKeyUpdate{Op: kms.UpdateMerge, Ref: kms.APIKeyRef{Value: ak.id}, Props: map[string]any{"v": ver}})
		if err != nil {
			ak.pending = ver
			return fail("UpdateAPIKey", err)
		}
		ak.acked, ak.pending = ver, -1
	}
	l.acks.Add(1)
	return true
}

func TestCrashDurability(t *testing.T) {
	in := newInstance(t)
	v := newValidator(t)
	workers := make([]*crashWorker, crashWorkers)
	for w := range workers {
		workers[w] = &crashWorker{w: w}
	}
	p := in.start(t)
	for round := 1; round <= crashRounds; round++ {
		l := &crashLoad{c: clientOf(p, t, v, in.bootstrap), round: round}
		var load loop
		for _, k := range workers {
			load.run(func(int) bool { return !l.killed.Load() && k.step(t, l) })
		}
		delay := time.Duration(100+rand.IntN(701)) * time.Millisecond
		// Not an assertion: the random moment of the kill.
		time.Sleep(delay)
		l.killed.Store(true)
		p.Kill(t)
		load.halt()
		if t.Failed() {
			t.FailNow()
		}
		if l.acks.Load() == 0 {
			t.Fatalf("round %d: no write was acknowledged in %v", round, delay)
		}
		t.Logf("round %d: SIGKILL %v after the load began, %d writes acknowledged", round, delay, l.acks.Load())

		// The chain verifies on the data as the crash left it, and every
		// acknowledged write is there after the restart.
		in.verifyAudit(t)
		p = in.start(t)
		checkAcked(t, clientOf(p, t, v, in.bootstrap), workers)
		if t.Failed() {
			t.FailNow()
		}
	}
	p.Stop(t)
	out := in.verifyAudit(t)
	t.Logf("after %d rounds: %s", crashRounds, strings.ReplaceAll(strings.TrimSpace(out), "\n", "; "))
}

// checkAcked checks every write the workers acknowledged, with a few
// concurrent readers.
func checkAcked(t *testing.T, c *client.Client, workers []*crashWorker) {
	t.Helper()
	ctx := context.Background()
	var checks []func() error
	counts := map[string]int{}
	var inflight, landed atomic.Int64 // API key updates in flight at the last kill
	for _, k := range workers {
		for _, r := range k.rings {
			counts["rings"]++
			checks = append(checks, func() error {
				ring, err := c.GetKeyRing(ctx, kms.RingRef{Name: r.name})
				if err != nil {
					return fmt.Errorf("ring %s: %w", r.name, err)
				}
				if ring.ID != r.id {
					return fmt.Errorf("ring %s has ID %s, was created with %s", r.name, ring.ID, r.id)
				}
				for _, id := range []string{r.key, ring.ActiveKey} {
					if _, err := c.GetKey(ctx, kms.RingRef{Name: r.name}, id); err != nil {
						return fmt.Errorf("ring %s, key %s: %w", r.name, id, err)
					}
				}
				return nil
			})
		}
		for _, key := range k.keys {
			counts["rotations"]++
			checks = append(checks, func() error {
				if _, err := c.GetKey(ctx, kms.RingRef{Name: key.ring}, key.id); err != nil {
					return fmt.Errorf("rotated key %s of %s: %w", key.id, key.ring, err)
				}
				return nil
			})
		}
		// The version each Asset holds now, read once.
		versions := map[*crashAsset]int{}
		for _, a := range k.assets {
			got, err := c.GetAsset(ctx, a.id)
			if err != nil {
				t.Errorf("Asset %s: %v", a.id, err)
				continue
			}
			ver := num(got.Data["v"])
			if ver != a.acked && ver != a.pending {
				t.Errorf("Asset %s holds version %d, want the last acknowledged %d (or %d, in flight at the kill)", a.id, ver, a.acked, a.pending)
			}
			versions[a] = ver
			counts["assets"]++
			switch {
			case a.pending >= 0 && ver == a.pending:
				counts["asset updates in flight, landed"]++
			case a.pending >= 0:
				counts["asset updates in flight, lost"]++
			}
			// What it holds is known now: the next round's kill is
			// judged against it, whether the update in flight at this
			// one landed or not.
			a.acked, a.pending = ver, -1
		}
		for _, e := range k.encs {
			counts["encrypts"]++
			checks = append(checks, func() error {
				hi, err := c.LookupHash(ctx, e.hash)
				if err != nil {
					return fmt.Errorf("hash %s: %w", e.hash, err)
				}
				if hi.RingID != e.ringID || hi.KeyID != e.keyID {
					return fmt.Errorf("hash resolves to %+v, was issued for ring %s key %s", hi, e.ringID, e.keyID)
				}
				res, err := c.Decrypt(ctx, kms.DecryptInput{Hash: e.hash, Header: e.header})
				cur, has := versions[e.asset]
				switch {
				case e.asset != nil && !has:
					return nil // reported above
				case e.asset == nil || cur == e.version:
					if err != nil {
						return fmt.Errorf("decrypt of a header (Asset version %d, current) = %w", e.version, err)
					}
					if res.Key.ID != e.keyID || e.asset != nil && (!res.Asset.Valid || res.Asset.ID != e.asset.id || num(res.Asset.Data["v"]) != e.version) {
						return fmt.Errorf("decrypt = key %s, asset %+v; want key %s, Asset %v version %d valid", res.Key.ID, res.Asset, e.keyID, e.asset, e.version)
					}
				default:
					if kms.ErrorKind(err) != kms.KindUnprocessable || res == nil || res.Asset.Valid || !strings.Contains(res.Asset.Message, "changed") {
						return fmt.Errorf("decrypt of a header of Asset %s version %d (now %d) = %+v, %v; want 422 changed", e.asset.id, e.version, cur, res, err)
					}
				}
				return nil
			})
		}
		for _, ak := range k.apikey {
			counts["apikeys"]++
			checks = append(checks, func() error {
				got, err := c.GetAPIKey(ctx, ak.id)
				if err != nil {
					return fmt.Errorf("API key %s: %w", ak.id, err)
				}
				ver := num(got.Props["v"])
				if ver != ak.acked && ver != ak.pending {
					return fmt.Errorf("API key %s has props version %d, want the last acknowledged %d (or %d, in flight at the kill)", ak.id, ver, ak.acked, ak.pending)
				}
				if ak.pending >= 0 {
					inflight.Add(1)
					if ver == ak.pending {
						landed.Add(1)
					}
				}
				ak.acked, ak.pending = ver, -1 // known now, as for Assets
				return nil
			})
		}
	}
	each(len(checks), func(i int) {
		if err := checks[i](); err != nil {
			t.Error(err)
		}
	})
	if n := inflight.Load(); n > 0 {
		counts["API key updates in flight, landed"] = int(landed.Load())
		counts["API key updates in flight, lost"] = int(n - landed.Load())
	}
	t.Logf("checked %v", counts)
}

// num reads a JSON number as an int; -2 when it is not one.
func num(v any) int {
	switch v := v.(type) {
	case float64:
		return int(v)
	case interface{ Int64() (int64, error) }:
		n, err := v.Int64()
		if err == nil {
			return int(n)
		}
	}
	return -2
}
