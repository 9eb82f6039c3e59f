package kms_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/kmstest"
)

// actionRecords returns the activity records of action on ring, oldest first.
func actionRecords(tb testing.TB, svc *kms.Service, root context.Context, ring, action string) []*kms.Activity {
	tb.Helper()
	list, err := svc.SearchActivity(root, kms.ActivityFilter{Ring: ring, Action: action}, kms.PageRequest{Limit: 1000})
	if err != nil {
		tb.Fatalf("SearchActivity(%s, %s) = %v", ring, action, err)
	}
	return list.Data
}

// setPeriod sets the rotationPeriod of the /ks ring name, keeping the rest
// of its configuration.
func setPeriod(tb testing.TB, svc *kms.Service, root context.Context, name, period string, maxCount int64) *kms.KeyRingConfig {
	tb.Helper()
	cfg := &kms.KeyRingConfig{Algos: kms.ConfigAlgos{AES256: kms.AlgoConfig{RotationPeriod: period, MaxEncryptCount: maxCount}}}
	out, err := svc.SetConfig(root, kms.RingRef{Name: name}, cfg)
	if err != nil {
		tb.Fatalf("SetConfig(%s, rotationPeriod %q) = %v", name, period, err)
	}
	return out
}

func ringActiveKey(tb testing.TB, svc *kms.Service, root context.Context, name string) string {
	tb.Helper()
	r, err := svc.GetKeyRing(root, kms.RingRef{Name: name})
	if err != nil {
		tb.Fatal(err)
	}
	return r.ActiveKey
}

func TestRotationPeriodConfig(t *testing.T) {
	e := newEnv(t)
	e.ring(t, "cfg")
	for _, c := range []struct {
		in, want string
		bad      bool
	}{
		{in: "", want: ""},
		{in: "0", want: ""},
		{in: "0s", want: ""},
		{in: "720h", want: "720h"},
		{in: "720h0m0s", want: "720h"},
		{in: "90m", want: "1h30m"},
		{in: "1h", want: "1h"},
		{in: "59m59s", bad: true},
		{in: "-1h", bad: true},
		{in: "30d", bad: true},
		{in: "soon", bad: true},
	} {
		t.Run(c.in, func(t *testing.T) {
			cfg := &kms.KeyRingConfig{Algos: kms.ConfigAlgos{AES256: kms.AlgoConfig{RotationPeriod: c.in}}}
			out, err := e.svc.SetConfig(e.root, kms.RingRef{Name: "cfg"}, cfg)
			if c.bad {
				wantKind(t, "SetConfig(rotationPeriod "+c.in+")", err, kms.KindInvalid)
				return
			}
			if err != nil || out.Algos.AES256.RotationPeriod != c.want {
				t.Fatalf("SetConfig(rotationPeriod %q) = %+v, %v; want %q", c.in, out, err, c.want)
			}
			got, err := e.svc.GetConfig(e.root, kms.RingRef{Name: "cfg"})
			if err != nil || got.Algos.AES256.RotationPeriod != c.want {
				t.Errorf("GetConfig = %+v, %v; want rotationPeriod %q", got, err, c.want)
			}
		})
	}
}

// TestRotationPeriodSweep: the sweep rotates a ring once its active key
// has been active for the period, once however often it passes, as the
// service's own rotation; the next period runs from the new key.
func TestRotationPeriodSweep(t *testing.T) {
	e, clock := newEnvAt(t, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	first := e.ring(t, "swept").Key.ID
	setPeriod(t, e.svc, e.root, "swept", "2h", 0)

	clock.Advance(2*time.Hour - time.Second)
	next, err := kms.RotateDue(e.svc)
	if err != nil {
		t.Fatal(err)
	}
	if got := ringActiveKey(t, e.svc, e.root, "swept"); got != first {
		t.Fatalf("rotated a second before the period ended")
	}
	if want := clock.Now().Add(time.Second); !next.Equal(want) {
		t.Errorf("RotateDue = next %v, want %v", next, want)
	}
	clock.Advance(time.Second)
	for range 3 {
		if _, err := kms.RotateDue(e.svc); err != nil {
			t.Fatal(err)
		}
	}
	second := ringActiveKey(t, e.svc, e.root, "swept")
	if second == first {
		t.Fatal("not rotated at the end of the period")
	}
	recs := actionRecords(t, e.svc, e.root, "swept", "keyring.rotate.period")
	if len(recs) != 1 || recs[0].KeyID != "system" || recs[0].Props["previousKeyId"] != first || recs[0].Props["keyId"] != second ||
		recs[0].Props["trigger"] != "sweep" || recs[0].Props["version"] != float64(2) {
		t.Fatalf("rotation records = %+v, want one by the service", recs)
	}
	k, err := e.svc.GetKey(e.root, kms.RingRef{Name: "swept"}, second)
	if err != nil || k.Version != 2 {
		t.Errorf("GetKey(new) = %+v, %v; want version 2", k, err)
	}

	// The next period runs from the new key's creation.
	clock.Advance(2*time.Hour - time.Second)
	kms.RotateDue(e.svc)
	if got := ringActiveKey(t, e.svc, e.root, "swept"); got != second {
		t.Fatal("rotated again before the new key's period ended")
	}
	clock.Advance(time.Second)
	kms.RotateDue(e.svc)
	if got := ringActiveKey(t, e.svc, e.root, "swept"); got == second {
		t.Fatal("not rotated at the end of the new key's period")
	}

	// No period: no rotation; and the schedule goes with it.
	setPeriod(t, e.svc, e.root, "swept", "0", 0)
	third := ringActiveKey(t, e.svc, e.root, "swept")
	clock.Advance(100 * time.Hour)
	if next, _ := kms.RotateDue(e.svc); !next.IsZero() || ringActiveKey(t, e.svc, e.root, "swept") != third {
		t.Errorf("a ring without a period rotated, or is scheduled (next %v)", next)
	}
}

// TestRotationPeriodEncryptFirst: an encrypt that finds the active key past
// its period before the sweep does rotates the ring first, and never
// hands the old key out.
func TestRotationPeriodEncryptFirst(t *testing.T) {
	e, clock := newEnvAt(t, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	first := e.ring(t, "enc").Key.ID
	setPeriod(t, e.svc, e.root, "enc", "1h", 0)
	res, err := e.svc.Encrypt(e.root, kms.EncryptInput{RingName: "enc"})
	if err != nil || res.Key.ID != first {
		t.Fatalf("Encrypt within the period = %v, %v", res, err)
	}
	clock.Advance(time.Hour)
	var wg sync.WaitGroup
	keys := make([]string, 8)
	for i := range keys {
		wg.Go(func() {
			res, err := e.svc.Encrypt(e.root, kms.EncryptInput{RingName: "enc"})
			if err != nil {
				t.Errorf("Encrypt = %v", err)
				return
			}
			keys[i] = res.Key.ID
		})
	}
	wg.Wait()
	for _, k := range keys {
		if k == first || k != keys[0] {
			t.Fatalf("encrypts past the period handed out %q, first key %s", keys, first)
		}
	}
	recs := actionRecords(t, e.svc, e.root, "enc", "keyring.rotate.period")
	if len(recs) != 1 || recs[0].Props["trigger"] != "encrypt" {
		t.Errorf("rotation records = %+v, want one, made for an encrypt", recs)
	}
}

// TestRotationPeriodAndCount: maxEncryptCount and the period combine,
// whichever comes first.
func TestRotationPeriodAndCount(t *testing.T) {
	e, clock := newEnvAt(t, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	first := e.ring(t, "both").Key.ID
	setPeriod(t, e.svc, e.root, "both", "1h", 3)
	encrypt := func() string {
		t.Helper()
		res := e.encrypt(t, "both")
		return res.Key.ID
	}
	for range 3 {
		if k := encrypt(); k != first {
			t.Fatalf("encrypt within both limits handed out %s, want %s", k, first)
		}
	}
	clock.Advance(30 * time.Minute)
	byCount := encrypt() // the count comes first
	if byCount == first {
		t.Fatal("not rotated after maxEncryptCount calls")
	}
	clock.Advance(59 * time.Minute) // the new key's period runs from its creation
	if k := encrypt(); k != byCount {
		t.Fatalf("rotated before the new key's period ended")
	}
	clock.Advance(time.Minute) // now the period comes first
	byPeriod := encrypt()
	if byPeriod == byCount {
		t.Fatal("not rotated at the end of the period")
	}
	if n := len(actionRecords(t, e.svc, e.root, "both", "keyring.rotate.auto")); n != 1 {
		t.Errorf("%d rotations by count, want 1", n)
	}
	if n := len(actionRecords(t, e.svc, e.root, "both", "keyring.rotate.period")); n != 1 {
		t.Errorf("%d rotations by period, want 1", n)
	}
}

// TestRotationPeriodCluster: three nodes on one PostgreSQL database, with
// one fake clock, whose sweeps and encrypt calls all find a ring's period
// ended at once, rotate it exactly once: one new key, one record.
func TestRotationPeriodCluster(t *testing.T) {
	clock := kmstest.NewClock()
	nodes := pgNodes(t, 3, kms.Options{MasterKey: kms.GenerateMasterKey(), Now: clock.Now}, nil)
	root := bootstrapRoot(t, nodes[0])
	created, err := nodes[0].CreateKeyRing(root, kms.CreateKeyRingInput{Name: "cluster", KEM: "x25519"})
	if err != nil {
		t.Fatal(err)
	}
	first := created.Key.ID
	setPeriod(t, nodes[0], root, "cluster", "1h", 0)
	// Every node has the ring cached, scheduled, before the period ends.
	for _, n := range nodes {
		if res, err := n.Encrypt(root, kms.EncryptInput{RingName: "cluster"}); err != nil || res.Key.ID != first {
			t.Fatalf("Encrypt within the period = %v, %v", res, err)
		}
	}

	for round := 1; round <= 3; round++ {
		clock.Advance(time.Hour)
		var mu sync.Mutex
		handed := map[string]int{}
		var wg sync.WaitGroup
		for _, n := range nodes {
			wg.Go(func() {
				if _, err := kms.RotateDue(n); err != nil {
					t.Errorf("RotateDue = %v", err)
				}
			})
			for range 4 {
				wg.Go(func() {
					res, err := n.Encrypt(root, kms.EncryptInput{RingName: "cluster"})
					if err != nil {
						t.Errorf("Encrypt = %v", err)
						return
					}
					mu.Lock()
					handed[res.Key.ID]++
					mu.Unlock()
				})
			}
		}
		wg.Wait()
		for _, n := range nodes { // late passes find nothing due
			if _, err := kms.RotateDue(n); err != nil {
				t.Fatal(err)
			}
		}

		recs := actionRecords(t, nodes[0], root, "cluster", "keyring.rotate.period")
		if len(recs) != round {
			t.Fatalf("round %d: %d rotation records, want %d: %+v", round, len(recs), round, recs)
		}
		last := recs[len(recs)-1]
		newKey, _ := last.Props["keyId"].(string)
		if last.KeyID != "system" || last.Props["previousKeyId"] != first || last.Props["version"] != float64(round+1) {
			t.Errorf("round %d: rotation record %+v", round, last)
		}
		if len(handed) != 1 || handed[newKey] != 12 {
			t.Errorf("round %d: encrypts past the period handed out %v, want only the new key %s", round, handed, newKey)
		}
		keys, err := nodes[0].ListKeys(root, kms.RingRef{Name: "cluster"}, kms.PageRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if len(keys.Data) != round+1 {
			t.Fatalf("round %d: the ring has %d keys, want %d", round, len(keys.Data), round+1)
		}
		for i, k := range keys.Data {
			if k.Version != i+1 {
				t.Errorf("round %d: key %d has version %d", round, i, k.Version)
			}
		}
		first = newKey
	}
}
