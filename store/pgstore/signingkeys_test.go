package pgstore

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/pgtest"
)

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
		svc, err := kms.New(openStore(t, dbURL, Options{}), kms.Options{MasterKey: mk})
		if err != nil {
			t.Fatalf("node %d: New = %v", i, err)
		}
		defer svc.Close()
		svcs[i] = svc
	}
	const secret = "cluster-bootstrap-secret-0123456789abcdef"
	if _, err := svcs[0].Bootstrap(ctx, secret); err != nil {
		t.Fatal(err)
	}
	for i, svc := range svcs {
		p, err := svc.Authenticate(ctx, secret)
		if err != nil {
			t.Fatalf("node %d: Authenticate = %v", i, err)
		}
		roots[i] = kms.WithPrincipal(ctx, p)
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
