//go:build cgo

package pgstore

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/headersign"
	"github.com/ringkms/kms/internal/hsm"
	"github.com/ringkms/kms/internal/hsmtest/hsmkey"
	"github.com/ringkms/kms/internal/pgtest"
)

// TestClusterTokenSigningKey runs the nodes of a cluster through a move
// of the header signing key into a SoftHSM2 token and a rotation in it,
// as docs/OPERATIONS.md section 16 describes: a node started with the
// token's key records it, active, once, however many start together; a
// node not restarted yet signs with the key it has, which stays
// published; and every node verifies every header throughout.
func TestClusterTokenSigningKey(t *testing.T) {
	_, uri := hsmkey.NewToken(t)
	tk, keyA, u := hsmkey.Open(t, uri)
	u.PINFile = ""
	uriA := u.String()
	idOf := func(k crypto.Signer) string {
		id := headersign.KeyID(k.Public().(ed25519.PublicKey))
		return hex.EncodeToString(id[:])
	}

	dbURL := pgtest.URL(t)
	mk := kms.GenerateMasterKey()
	ctx := context.Background()
	var svcs []*kms.Service
	var roots []context.Context
	const secret = "cluster-bootstrap-secret-0123456789abcdef"
	start := func(opts kms.Options) *kms.Service {
		t.Helper()
		opts.MasterKey = mk
		return newService(t, openStore(t, dbURL, Options{}), opts)
	}
	join := func(svc *kms.Service) {
		t.Helper()
		svcs, roots = append(svcs, svc), append(roots, rootOf(t, svc, secret))
	}
	var headers []string
	// encrypt issues a header on node i, checks that every header so far
	// verifies on every node and with the keys each publishes, and
	// returns the key the header names.
	encrypt := func(what string, i int) string {
		t.Helper()
		res, err := svcs[i].Encrypt(roots[i], kms.EncryptInput{RingName: "r"})
		if err != nil {
			t.Fatalf("%s: node %d: Encrypt = %v", what, i, err)
		}
		headers = append(headers, res.Header)
		for n, svc := range svcs {
			set, err := svc.SigningKeys(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range headers {
				if v, err := set.VerifyHeader(h, nil); err != nil || !v.Valid {
					t.Fatalf("%s: a header with the keys node %d publishes = %+v, %v", what, n, v, err)
				}
				if info, err := svc.LookupHeader(roots[n], h); err != nil || !info.Valid {
					t.Fatalf("%s: node %d: LookupHeader = %+v, %v", what, n, info, err)
				}
			}
		}
		raw, _ := base64.RawURLEncoding.DecodeString(res.Header)
		return hex.EncodeToString(raw[2:10])
	}
	active := func() string {
		set, err := svcs[0].SigningKeys(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range set.Keys {
			if k.Active {
				return k.ID
			}
		}
		return ""
	}

	// A node with a key of the store's own.
	first := start(kms.Options{})
	if _, err := first.Bootstrap(ctx, secret); err != nil {
		t.Fatal(err)
	}
	join(first)
	if _, err := svcs[0].CreateKeyRing(roots[0], kms.CreateKeyRingInput{Name: "r"}); err != nil {
		t.Fatal(err)
	}
	own := encrypt("before the token", 0)

	// Two nodes start together with the token's key: it is recorded once.
	var wg sync.WaitGroup
	started := make([]*kms.Service, 2)
	for i := range started {
		wg.Go(func() { started[i] = start(kms.Options{SigningKey: keyA, SigningKeyURI: uriA}) })
	}
	wg.Wait()
	join(started[0])
	join(started[1])
	if got := active(); got != idOf(keyA) {
		t.Fatalf("active key %s after the nodes started with the token's, want %s", got, idOf(keyA))
	}
	moved := time.Now()
	for i := 1; i <= 2; i++ {
		if got := encrypt("started with the token's key", i); got != idOf(keyA) {
			t.Fatalf("node %d signs with %s, want the token's %s", i, got, idOf(keyA))
		}
	}
	// The node not restarted yet signs with its own key, still published.
	time.Sleep(time.Until(moved.Add(time.Second)))
	if got := encrypt("a node given no key", 0); got != own {
		t.Fatalf("node 0, given no key, signs with %s, want its own %s", got, own)
	}
	recs, err := svcs[0].SearchActivity(roots[0], kms.ActivityFilter{Action: "signingkey.rotate"}, kms.PageRequest{})
	if err != nil {
		t.Fatal(err)
	}
	// One records the key; a node that lost the race to it, if any,
	// records its attempt as a conflict.
	made := 0
	for _, a := range recs.Data {
		if a.Props["signingKeyId"] == idOf(keyA) && a.Props["result"] == "ok" && a.KeyID == "operator" {
			made++
		}
	}
	if made != 1 {
		t.Errorf("signingkey.rotate records = %+v, want one of the token's key, by operator", recs.Data)
	}

	// The next key in the token, beside the nodes: they go on with the
	// key they were given until restarted with the new one.
	var keyB *hsm.Ed25519Key
	if _, err := kms.RotateStoreSigningKeyTo(ctx, openStore(t, dbURL, Options{}), mk, func() (crypto.Signer, string, error) {
		k, err := tk.GenerateEd25519("kms-signing-2", nil)
		keyB = k
		return k, strings.Replace(uriA, "kms-signing", "kms-signing-2", 1), err
	}); err != nil {
		t.Fatalf("RotateStoreSigningKeyTo = %v", err)
	}
	rotated := time.Now()
	time.Sleep(time.Until(rotated.Add(time.Second)))
	if got := active(); got != idOf(keyB) {
		t.Fatalf("active key %s after the rotation in the token, want %s", got, idOf(keyB))
	}
	for i := 1; i <= 2; i++ {
		if got := encrypt("after the rotation in the token", i); got != idOf(keyA) {
			t.Fatalf("node %d, given the key before, signs with %s, want %s", i, got, idOf(keyA))
		}
	}
	join(start(kms.Options{SigningKey: keyB, SigningKeyURI: "elsewhere"}))
	if got := encrypt("restarted with the new key", 3); got != idOf(keyB) {
		t.Fatalf("a node given the new key signs with %s, want %s", got, idOf(keyB))
	}
	encrypt("the others", 0)
	encrypt("the others", 1)
}
