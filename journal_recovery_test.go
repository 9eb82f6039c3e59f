package kms_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/store/badgerstore"
)

// faultStore fails the trail's appends or the index's writes on demand, as
// a full disk or a crash between the journal's steps would leave them.
type faultStore struct {
	kms.Store
	trail      kms.Trail
	failAppend atomic.Bool
	failIndex  atomic.Bool
}

var errDiskFull = errors.New("no space left on device")

func (s *faultStore) Trail() kms.Trail { return faultTrail{s.trail, s} }

func (s *faultStore) UpdateNoSync(ctx context.Context, fn func(kms.Txn) error) error {
	if s.failIndex.Load() {
		return errDiskFull
	}
	return s.Store.UpdateNoSync(ctx, fn)
}

type faultTrail struct {
	kms.Trail
	s *faultStore
}

func (t faultTrail) Append(recs [][]byte) error {
	if t.s.failAppend.Load() {
		return errDiskFull
	}
	return t.Trail.Append(recs)
}

// start opens a Service on st and returns it with a context acting as
// the bootstrap key; the first start bootstraps.
func startOn(t *testing.T, st kms.Store, key kms.MasterKey, secret *string) (*kms.Service, context.Context) {
	t.Helper()
	svc, err := kms.New(st, kms.Options{MasterKey: key})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if *secret == "" {
		b, err := svc.Bootstrap(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		*secret = b.Secret
	}
	p, err := svc.Authenticate(ctx, *secret)
	if err != nil {
		t.Fatal(err)
	}
	return svc, kms.WithPrincipal(ctx, p)
}

// startWithRing starts a Service on a new store, as startOn does, and
// creates the key ring "r".
func startWithRing(t *testing.T, st kms.Store, key kms.MasterKey, secret *string) (*kms.Service, context.Context) {
	t.Helper()
	svc, root := startOn(t, st, key, secret)
	if _, err := svc.CreateKeyRing(root, kms.CreateKeyRingInput{Name: "r"}); err != nil {
		t.Fatal(err)
	}
	return svc, root
}

func newFaultStore(t *testing.T) *faultStore {
	inner, err := badgerstore.OpenInMemory()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inner.Close() })
	return &faultStore{Store: inner, trail: inner.Trail()}
}

// TestRecoveryAppendsPendingRecords: an encrypt call whose Asset was
// committed but whose record could not reach the trail is answered with
// an error, the journal stops, and the next start appends the record.
func TestRecoveryAppendsPendingRecords(t *testing.T) {
	st := newFaultStore(t)
	key := kms.GenerateMasterKey()
	var secret string
	svc, root := startWithRing(t, st, key, &secret)
	// A key's first encrypt reserves a block of its count, in a job of its
	// own: done before the trail fails, so that the failing job is the
	// encrypt's.
	if _, err := svc.Encrypt(root, kms.EncryptInput{RingName: "r"}); err != nil {
		t.Fatal(err)
	}
	st.failAppend.Store(true)
	_, err := svc.Encrypt(root, kms.EncryptInput{RingName: "r", Asset: &kms.AssetInput{Data: map[string]any{"file": "a"}}})
	wantKind(t, "Encrypt while the trail fails", err, kms.KindInternal)
	st.failAppend.Store(false)
	_, err = svc.Encrypt(root, kms.EncryptInput{RingName: "r"})
	wantKind(t, "Encrypt after the journal stopped", err, kms.KindInternal)
	svc.Close()

	svc, root = startOn(t, st, key, &secret)
	defer svc.Close()
	if _, err := svc.VerifyActivityChain(root); err != nil {
		t.Fatalf("VerifyActivityChain after recovery = %v", err)
	}
	l, err := svc.SearchActivity(root, kms.ActivityFilter{Props: map[string]any{"assetOp": "create"}}, kms.PageRequest{})
	if err != nil || len(l.Data) != 1 {
		t.Fatalf("search for the pending record = %v, %v; want the one record", l, err)
	}
	a, err := svc.GetAsset(root, l.Data[0].Props["assetId"].(string))
	if err != nil || a.Data["file"] != "a" {
		t.Fatalf("GetAsset of the recorded Asset = %+v, %v", a, err)
	}
	if _, err := svc.Encrypt(root, kms.EncryptInput{RingName: "r"}); err != nil {
		t.Fatalf("Encrypt after recovery = %v", err)
	}
}

// TestRecoveryIndexesRecords: records whose index entries were never
// written are indexed at the next start.
func TestRecoveryIndexesRecords(t *testing.T) {
	st := newFaultStore(t)
	key := kms.GenerateMasterKey()
	var secret string
	svc, root := startWithRing(t, st, key, &secret)
	st.failIndex.Store(true)
	for range 5 {
		if _, err := svc.Encrypt(root, kms.EncryptInput{RingName: "r"}); err != nil {
			t.Fatalf("Encrypt while the index fails = %v, want nil: the record is in the trail", err)
		}
	}
	svc.Close()
	st.failIndex.Store(false)

	svc, root = startOn(t, st, key, &secret)
	defer svc.Close()
	l, err := svc.SearchActivity(root, kms.ActivityFilter{Action: "encrypt", Ring: "r"}, kms.PageRequest{})
	if err != nil || len(l.Data) != 5 {
		t.Fatalf("search after recovery = %d records, %v; want 5", len(l.Data), err)
	}
}

// TestRecoveryRefusesAlteredTrail: a trail cut short of its index, or whose
// last indexed record was altered, stops the Service from starting. (The
// records of the last batch that changed the store are kept under
// act/pending too, and are appended again rather than refused.)
func TestRecoveryRefusesAlteredTrail(t *testing.T) {
	for name, tamper := range map[string]func([][]byte) [][]byte{
		"truncated": func(recs [][]byte) [][]byte { return recs[:len(recs)-1] },
		"altered": func(recs [][]byte) [][]byte {
			recs[len(recs)-1] = append([]byte{}, recs[len(recs)-1]...)
			recs[len(recs)-1][40] ^= 1
			return recs
		},
	} {
		t.Run(name, func(t *testing.T) {
			inner, err := badgerstore.OpenInMemory()
			if err != nil {
				t.Fatal(err)
			}
			defer inner.Close()
			st := &sliceTrailStore{Store: inner, trail: &sliceTrail{}}
			key := kms.GenerateMasterKey()
			var secret string
			svc, root := startWithRing(t, st, key, &secret)
			// The last records change nothing in the store, so no copy of
			// them waits under act/pending to be appended again.
			for range 3 {
				if _, err := svc.Encrypt(root, kms.EncryptInput{RingName: "r"}); err != nil {
					t.Fatal(err)
				}
			}
			svc.Close()
			st.trail.tamper(tamper)
			if _, err := kms.New(st, kms.Options{MasterKey: key}); err == nil || !strings.Contains(err.Error(), "activity") {
				t.Fatalf("New on a %s trail = %v, want an error about the activity trail", name, err)
			}
		})
	}
}
