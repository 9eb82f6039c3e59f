package e2e

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ringkms/kms"
)

// TestResetStartTimingTellsNothing: how long POST
// /auth/basic/reset-password-start takes to answer must not tell whether
// the address is a User's. It compares the medians of the answer times of
// known and unknown addresses, asked in random turns against the real
// kmsd, each known address once (so that each would send a mail). Each
// request comes from an address of its own (X-Forwarded-For, which kmsd
// trusts here), so the per-client throttle does not refuse the run.
func TestResetStartTimingTellsNothing(t *testing.T) {
	in := newInstance(t)
	p := in.start(t, "-client-ip-header", "X-Forwarded-For")
	root := clientOf(p, t, newValidator(t), in.bootstrap)
	const n = 60
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range 2 {
		wg.Go(func() {
			for i := w; i < n; i += 2 {
				name := fmt.Sprintf("timing%02d", i)
				_, err := root.CreateUser(bg, kms.UserInput{Username: name, Email: name + "@example.com", FirstName: "T", LastName: "U"})
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("CreateUser: %v", err)
	}

	hc := &http.Client{Timeout: 30 * time.Second}
	calls := 0
	ask := func(email string) time.Duration {
		t.Helper()
		calls++
		req, err := http.NewRequest("POST", p.URL+"/auth/basic/reset-password-start", bytes.NewReader([]byte(`{"email":"`+email+`"}`)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Forwarded-For", fmt.Sprintf("198.18.%d.%d", calls/200, calls%200+1))
		start := time.Now()
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		d := time.Since(start)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("reset-password-start %s = %d", email, resp.StatusCode)
		}
		// Let what the request left behind it finish before the next.
		time.Sleep(10 * time.Millisecond)
		return d
	}
	for i := range 10 { // warm up the connection and the server
		ask(fmt.Sprintf("warm%d@example.org", i))
	}
	turns := make([]bool, 0, 2*n)
	for range n {
		turns = append(turns, true, false)
	}
	rand.Shuffle(len(turns), func(i, j int) { turns[i], turns[j] = turns[j], turns[i] })
	var known, unknown []time.Duration
	for _, isKnown := range turns {
		if isKnown {
			known = append(known, ask(fmt.Sprintf("timing%02d@example.com", len(known))))
		} else {
			unknown = append(unknown, ask(fmt.Sprintf("nobody%02d@example.com", len(unknown))))
		}
	}
	median := func(d []time.Duration) time.Duration {
		slices.Sort(d)
		return d[len(d)/2]
	}
	mk, mu := median(known), median(unknown)
	// A known address used to cost a durable store commit more than an
	// unknown one (2 to 3 times the answer time); noise between two
	// medians of the same work stays well under a quarter.
	bound := max(mu/4, 300*time.Microsecond)
	t.Logf("median answer: known %v, unknown %v (bound on the difference %v)", mk, mu, bound)
	if diff := (mk - mu).Abs(); diff > bound {
		t.Errorf("known addresses answer in %v, unknown in %v (medians of %d each): the time tells them apart", mk, mu, n)
	}
}
