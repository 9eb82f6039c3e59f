package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/kmsdtest"
)

// TestNoSecretAtRestOrInLogs runs the credential flows against kmsd with
// the most talkative log level, stops it, and looks for every secret it
// handed out or was given, in every file of the data directory and in
// everything kmsd printed: passwords, API key secrets, access tokens,
// invitation and reset tokens, and the key shares of a ring with split
// data keys. The outbox is outside the data directory:
// mail is how tokens reach people.
func TestNoSecretAtRestOrInLogs(t *testing.T) {
	in := newInstance(t)
	p := in.start(t, "-log-level", "debug")
	v := newValidator(t)
	bg := context.Background()
	root := clientOf(p, t, v, in.bootstrap)
	anon := clientOf(p, t, v, "")
	seen := map[string]bool{}
	secrets := map[string]string{"bootstrap API key": in.bootstrap}

	acct, err := root.CreateAccount(bg, kms.AccountInput{UID: "secrets"})
	if err != nil {
		t.Fatal(err)
	}
	key, err := root.CreateAPIKey(bg, kms.APIKeyInput{AccountID: acct.ID, Flags: kms.Flags{"users.read": true}})
	if err != nil {
		t.Fatal(err)
	}
	secrets["API key"] = key.Key
	created, err := root.CreateUser(bg, kms.UserInput{Username: "sam", Email: "sam@example.com", FirstName: "S", LastName: "M"})
	if err != nil {
		t.Fatal(err)
	}
	secrets["generated password"] = created.Password
	login, err := anon.Login(bg, kms.LoginInput{Username: "sam", Password: created.Password})
	if err != nil {
		t.Fatal(err)
	}
	secrets["access token"] = login.AccessToken
	sam := clientOf(p, t, v, login.AccessToken)
	refreshed, err := sam.Refresh(bg)
	if err != nil {
		t.Fatal(err)
	}
	secrets["refreshed access token"] = refreshed.AccessToken
	// A change of its own password, with the current one.
	changed := "Sam-changed-passw0rd!"
	secrets["changed password"] = changed
	_, err = clientOf(p, t, v, refreshed.AccessToken).UpdateUser(bg, kms.UserRef{Value: "sam"}, kms.UserUpdate{Password: &changed, CurrentPassword: created.Password})
	if err != nil {
		t.Fatal(err)
	}
	if m := in.waitMail(t, "sam@example.com", seen); !strings.Contains(m.body, "password") {
		t.Fatalf("mail to sam after the change:\n%s\nwant a notice of the new password", m.body)
	}

	if _, err := root.Invite(bg, kms.InviteInput{Username: "ivy", Email: "ivy@example.com", FirstName: "I", LastName: "V"}); err != nil {
		t.Fatal(err)
	}
	_, inviteToken := in.waitMail(t, "ivy@example.com", seen).link(t, "/auth/user/invite-validate")
	secrets["invitation token"] = inviteToken
	const invitePassword = "Ivy-passw0rd!"
	secrets["invitation password"] = invitePassword
	done, err := anon.CompleteInvite(bg, inviteToken, invitePassword)
	if err != nil {
		t.Fatal(err)
	}
	secrets["invitation access token"] = done.AccessToken

	if _, err := anon.StartPasswordReset(bg, "sam@example.com"); err != nil {
		t.Fatal(err)
	}
	_, resetToken := in.waitMail(t, "sam@example.com", seen).link(t, "/auth/basic/reset-password-complete")
	secrets["reset token"] = resetToken
	const newPassword = "Sam-new-passw0rd!"
	secrets["reset password"] = newPassword
	if err := anon.CompletePasswordReset(bg, resetToken, newPassword); err != nil {
		t.Fatal(err)
	}
	// Near misses of the route that names an API key by its secret (a
	// trailing slash, a wrong method or name): the secret must reach
	// neither the log nor the answer.
	for _, m := range []struct{ method, path string }{
		{"DELETE", "/auth/apikey/" + key.Key + "/"},
		{"PATCH", "/auth/apikey/" + key.Key},
		{"DELETE", "/auth/apikeys/" + in.bootstrap},
		{"GET", "/auth/apikey/" + in.bootstrap + "/props"},
	} {
		req, err := http.NewRequest(m.method, p.URL+m.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+in.bootstrap)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode < 400 {
			t.Errorf("%s %s = %d, want an error", m.method, m.path, resp.StatusCode)
		}
		for what, s := range secrets {
			if bytes.Contains(body, []byte(s)) {
				t.Errorf("%s %s: the answer holds the %s: %s", m.method, m.path, what, body)
			}
		}
	}
	// Key shares, from encrypt and decrypt calls alone and in batches.
	if _, err := root.CreateKeyRing(bg, kms.CreateKeyRingInput{Name: "split", KEM: "x25519", DataKeys: kms.DataKeysSplit}); err != nil {
		t.Fatal(err)
	}
	keepShare := func(what, share string) {
		raw, err := base64.StdEncoding.DecodeString(share)
		if err != nil || len(raw) != 32 {
			t.Fatalf("the %s %q is not base64 of 32 bytes", what, share)
		}
		secrets[what] = string(raw) // its forms: raw and standard base64
		secrets[what+" in base64url"] = base64.RawURLEncoding.EncodeToString(raw)
	}
	enc, err := root.Encrypt(bg, kms.EncryptInput{RingName: "split"})
	if err != nil {
		t.Fatal(err)
	}
	keepShare("key share", enc.KeyShare)
	if _, err := root.Decrypt(bg, kms.DecryptInput{Hash: enc.Hash, Header: enc.Header}); err != nil {
		t.Fatal(err)
	}
	batch, err := root.EncryptBatch(bg, kms.EncryptBatchInput{RingName: "split", Count: 3})
	if err != nil {
		t.Fatal(err)
	}
	var items []kms.DecryptInput
	for i, it := range batch.Items {
		if it.EncryptResult == nil {
			t.Fatalf("batch item %d: %+v", i, it.Error)
		}
		keepShare(fmt.Sprintf("key share of batch item %d", i), it.KeyShare)
		items = append(items, kms.DecryptInput{Hash: it.Hash, Header: it.Header})
	}
	if _, err := root.DecryptBatch(bg, kms.DecryptBatchInput{Items: items}); err != nil {
		t.Fatal(err)
	}
	// A failed login with a wrong password: the attempt must not be logged.
	const wrongPassword = "Wr0ng-password!"
	secrets["wrong password"] = wrongPassword
	if _, err := anon.Login(bg, kms.LoginInput{Username: "sam", Password: wrongPassword}); err == nil {
		t.Fatal("Login with a wrong password succeeded")
	}
	p.Stop(t)

	forms := func(s string) [][]byte {
		return [][]byte{[]byte(s), []byte(base64.StdEncoding.EncodeToString([]byte(s)))}
	}
	logs := []byte(p.Stdout.String() + p.Stderr.String())
	inFiles := map[string][]byte{}
	for what, s := range secrets {
		for i, f := range forms(s) {
			inFiles[fmt.Sprintf("%s (form %d)", what, i+1)] = f
		}
	}
	kmsdtest.NoSecretsIn(t, in.data, inFiles)
	for what, s := range secrets {
		for _, f := range forms(s) {
			if bytes.Contains(logs, f) {
				t.Errorf("the %s is in kmsd's output", what)
			}
		}
	}
	if !bytes.Contains(logs, []byte(`"message":"request"`)) {
		t.Errorf("kmsd logged no request; the scan of its output proves little:\n%s", logs)
	}
}

// TestResetStartTimingTellsNothing: how long POST
// /auth/basic/reset-password-start takes to answer must not tell whether
// the address is a User's. It compares the medians of the answer times of
// known and unknown addresses, asked in random turns against the real
// kmsd, each known address once (so that each would send a mail). Each
// request comes from an address of its own (X-Forwarded-For, which kmsd
// trusts here), so the per-client throttle does not refuse the run.
func TestResetStartTimingTellsNothing(t *testing.T) {
	_, p, _, root := serve(t, "-client-ip-header", "X-Forwarded-For")
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
