package e2e

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/client"
	"github.com/ringkms/kms/internal/netproxy"
	"github.com/ringkms/kms/internal/pgtest"
)

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
	p, err := netproxy.New(pair.PrimaryAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	multi := pair.MultiURL()
	c := startCluster(t, []string{multi, multi, strings.Replace(multi, pair.PrimaryAddr(), p.Addr(), 1)})
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
