package kms_test

import (
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/kmstest"
)

// encryptItems encrypts n plaintexts in one call of the transit key name
// and returns the versions of the items' ciphertexts, in order (a
// batch's items run concurrently).
func encryptItems(t *testing.T, e *env, name string, n int) []int {
	t.Helper()
	items := make([]kms.HeldPlaintext, n)
	for i := range items {
		items[i].Plaintext = []byte("x")
	}
	out, err := e.svc.EncryptWithHeldKey(e.root, kms.HeldEncryptInput{Name: name, Items: items})
	if err != nil {
		t.Fatalf("EncryptTransit(%d items) = %v", n, err)
	}
	versions := make([]int, n)
	for i, o := range out {
		if o.Err != nil {
			t.Fatalf("EncryptTransit item %d = %v", i, o.Err)
		}
		if len(o.Ciphertext) != 12+1+16 {
			t.Fatalf("ciphertext %x: want a nonce, one byte and a tag", o.Ciphertext)
		}
		versions[i] = o.KeyVersion
	}
	slices.Sort(versions)
	return versions
}

// TestTransitEncryptionBound: a version of a transit key makes at most
// Options.MaxTransitEncryptions encryptions (2^32 by default, NIST SP
// 800-38D's bound for random 96-bit nonces): the encrypt past it rotates
// the key first, recorded with reason nonceBound; each item of a batch,
// each rewrap and each data key counts; an explicit older version past
// it is refused; a /ks ring is not bound.
func TestTransitEncryptionBound(t *testing.T) {
	e := newEnvOn(t, kmstest.MemoryStore(t), kms.Options{MasterKey: kms.GenerateMasterKey(), MaxHeldKeyEncryptions: 3})
	if _, err := e.svc.CreateHeldKey(e.root, kms.CreateHeldKeyInput{Name: "b"}); err != nil {
		t.Fatal(err)
	}
	// A batch of 5: three with version 1, then the key rotates.
	if got := encryptItems(t, e, "b", 5); !equalInts(got, []int{1, 1, 1, 2, 2}) {
		t.Fatalf("versions of a batch of 5 under a bound of 3 = %v, want [1 1 1 2 2]", got)
	}
	// One more on version 2, then a data key and a rewrap count too.
	if got := encryptItems(t, e, "b", 1); !equalInts(got, []int{2}) {
		t.Fatalf("version = %v, want [2]", got)
	}
	dk, err := e.svc.GenerateHeldDataKey(e.root, kms.HeldDataKeyInput{Name: "b"})
	if err != nil || dk.KeyVersion != 3 {
		t.Fatalf("GenerateTransitDataKey = %+v, %v; want version 3 (version 2 served 3 encryptions)", dk, err)
	}
	rw, err := e.svc.RewrapWithHeldKey(e.root, kms.HeldRewrapInput{Name: "b", Items: []kms.HeldRewrapItem{sealedOf(dk), sealedOf(dk), sealedOf(dk)}})
	if err != nil {
		t.Fatal(err)
	}
	var rewrapped []int
	for _, it := range rw {
		if it.Err != nil {
			t.Fatal(it.Err)
		}
		rewrapped = append(rewrapped, it.KeyVersion)
	}
	if slices.Sort(rewrapped); !equalInts(rewrapped, []int{3, 3, 4}) {
		t.Fatalf("versions of a rewrap of 3 = %v, want [3 3 4]", rewrapped)
	}
	rots := ringRecords(t, e, "b", "asym.keyring.rotate.auto")
	if len(rots) != 3 {
		t.Fatalf("rotations by count = %d, want 3", len(rots))
	}
	for _, r := range rots {
		if r.Props["reason"] != "nonceBound" || r.Props["limit"] != float64(3) {
			t.Errorf("rotation record props = %v, want reason nonceBound, limit 3", r.Props)
		}
	}
	// An explicit version that served its encryptions is refused.
	out, err := e.svc.EncryptWithHeldKey(e.root, kms.HeldEncryptInput{Name: "b", Items: []kms.HeldPlaintext{{Plaintext: []byte("x"), KeyVersion: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	wantKind(t, "EncryptTransit(version 1, spent)", out[0].Err, kms.KindInvalid)
	if !strings.Contains(out[0].Err.Error(), "encrypt with the latest version") {
		t.Errorf("refusal = %v, want it to say to encrypt with the latest version", out[0].Err)
	}
	// A lower maxEncryptCount applies instead, and says so.
	limit := kms.KeyRingConfig{Algos: kms.ConfigAlgos{AES256: kms.AlgoConfig{MaxEncryptCount: 2}}}
	if _, err := e.svc.SetAsymConfig(e.root, kms.RingRef{Name: "b"}, &limit); err != nil {
		t.Fatal(err)
	}
	if got := encryptItems(t, e, "b", 3); !equalInts(got, []int{4, 5, 5}) {
		t.Fatalf("versions under maxEncryptCount 2 = %v, want [4 5 5]", got)
	}
	if rots := ringRecords(t, e, "b", "asym.keyring.rotate.auto"); rots[len(rots)-1].Props["reason"] != "maxEncryptCount" {
		t.Errorf("last rotation record props = %v, want reason maxEncryptCount", rots[len(rots)-1].Props)
	}

	// A /ks ring's keys are used outside the service: no such bound.
	e.ring(t, "ks")
	var keys []string
	for range 5 {
		r := e.encrypt(t, "ks")
		keys = append(keys, r.Key.ID)
	}
	if keys[0] != keys[4] {
		t.Errorf("a /ks ring rotated under the transit bound")
	}
}

// TestTransitEncryptionBoundDefault: without Options.MaxTransitEncryptions
// the bound is 2^32, and no larger one is taken; a transit key's count
// reserves blocks as large as those of a key without a limit, not the
// small ones of a small maxEncryptCount.
func TestTransitEncryptionBoundDefault(t *testing.T) {
	if _, err := kms.New(kmstest.MemoryStore(t), kms.Options{MasterKey: kms.GenerateMasterKey(), MaxHeldKeyEncryptions: 1<<32 + 1}); kms.ErrorKind(err) != kms.KindInvalid {
		t.Errorf("New(MaxTransitEncryptions 2^32+1) = %v, want Invalid", err)
	}
	e := newEnv(t)
	if kms.DefaultMaxHeldKeyEncryptions != 1<<32 {
		t.Errorf("DefaultMaxTransitEncryptions = %d", uint64(kms.DefaultMaxHeldKeyEncryptions))
	}
	out, err := e.svc.EncryptWithHeldKey(e.root, kms.HeldEncryptInput{Name: "d", Create: true, Items: []kms.HeldPlaintext{{Plaintext: []byte("x")}}})
	if err != nil || out[0].Err != nil {
		t.Fatalf("EncryptTransit = %+v, %v", out, err)
	}
	tk, err := e.svc.GetHeldKey(e.root, "d")
	if err != nil {
		t.Fatal(err)
	}
	total, err := kms.CountTotal(e.svc, tk.KeyIDs[1])
	if err != nil || total != 1<<16 {
		t.Errorf("reserved for a transit key's version after one encrypt = %d, %v; want a block of 65536 (2^32 / 2^16)", total, err)
	}
}

// TestTransitEncryptionBoundCluster: the bound holds across the nodes of
// a cluster: encrypts spread over two nodes never give one version more
// than the bound, whichever node made them.
func TestTransitEncryptionBoundCluster(t *testing.T) {
	const bound = 4
	nodes := pgNodes(t, 2, kms.Options{MasterKey: kms.GenerateMasterKey(), MaxHeldKeyEncryptions: bound}, nil)
	root := bootstrapRoot(t, nodes[0])
	if _, err := nodes[0].CreateHeldKey(root, kms.CreateHeldKeyInput{Name: "shared"}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	perVersion := map[int]int{}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				out, err := nodes[w%2].EncryptWithHeldKey(root, kms.HeldEncryptInput{Name: "shared", Items: []kms.HeldPlaintext{{Plaintext: []byte("x")}, {Plaintext: []byte("y")}}})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				for _, o := range out {
					if o.Err != nil {
						t.Error(o.Err)
					} else {
						perVersion[o.KeyVersion]++
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	total := 0
	for v, n := range perVersion {
		total += n
		if n > bound {
			t.Errorf("version %d made %d encryptions, more than the bound %d", v, n, bound)
		}
	}
	if total != 80 || len(perVersion) < 80/bound {
		t.Errorf("encryptions = %d over %d versions, want 80 over at least %d", total, len(perVersion), 80/bound)
	}
	// The list reads the rings' records (prefetched on PostgreSQL) and
	// leaves out a ring made by CreateAsymKeyRing.
	if _, err := nodes[1].CreateAsymKeyRing(root, kms.CreateAsymKeyRingInput{Name: "handed-out"}); err != nil {
		t.Fatal(err)
	}
	if names, err := nodes[1].ListHeldKeys(root); err != nil || !slices.Equal(names, []string{"shared"}) {
		t.Errorf("ListTransitKeys = %v, %v; want [shared]", names, err)
	}
}

// sealedOf is a data key's ciphertext as a rewrap's item.
func sealedOf(dk *kms.HeldDataKey) kms.HeldRewrapItem {
	return kms.HeldRewrapItem{HeldSealed: kms.HeldSealed{KeyVersion: dk.KeyVersion, Ciphertext: dk.Ciphertext}}
}
