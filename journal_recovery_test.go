package kms_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/kmstest"
	"github.com/ringkms/kms/store/badgerstore"
)

// faultStore fails the trail's appends or the index's writes on demand, as
// a full disk or a crash between the journal's steps would leave them.
type faultStore struct {
	kms.Store
	trail      kms.Trail
	failAppend atomic.Bool
	failIndex  atomic.Bool
	failUpdate atomic.Bool // durable commits fail
	full       atomic.Bool // Writable answers NoSpace
	undoFails  atomic.Bool // the next failed Append also makes durable commits fail
	// failNext fails the next Appends, as many as it holds, whatever
	// failAppend says.
	failNext atomic.Int32
}

var errDiskFull = errors.New("no space left on device")

func (s *faultStore) Trail() kms.Trail { return faultTrail{s.trail, s} }

func (s *faultStore) Update(ctx context.Context, fn func(kms.Txn) error) error {
	if s.failUpdate.Load() {
		return errDiskFull
	}
	return s.Store.Update(ctx, fn)
}

func (s *faultStore) Writable(ctx context.Context) error {
	if s.full.Load() {
		return kms.Errorf(kms.KindNoSpace, "insufficient storage: test disk is full")
	}
	return s.Store.Writable(ctx)
}

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
	for n := t.s.failNext.Load(); n > 0; n = t.s.failNext.Load() {
		if t.s.failNext.CompareAndSwap(n, n-1) {
			return errDiskFull
		}
	}
	if t.s.failAppend.Load() {
		if t.s.undoFails.CompareAndSwap(true, false) {
			t.s.failUpdate.Store(true) // the undo that follows fails too
		}
		return errDiskFull
	}
	return t.Trail.Append(recs)
}

// start opens a Service on st and returns it with a context acting as
// the bootstrap key; the first start bootstraps.
func startOn(t *testing.T, st kms.Store, key kms.MasterKey, secret *string) (*kms.Service, context.Context) {
	t.Helper()
	return startWith(t, st, kms.Options{MasterKey: key}, secret)
}

// startWith is startOn with the Options given.
func startWith(t *testing.T, st kms.Store, opts kms.Options, secret *string) (*kms.Service, context.Context) {
	t.Helper()
	svc, err := kms.New(st, opts)
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

// startFaulty starts a Service with the key ring "r" on a new faultStore,
// under a master key of its own.
func startFaulty(t *testing.T) (*faultStore, *kms.Service, context.Context) {
	t.Helper()
	st := newFaultStore(t)
	var secret string
	svc, root := startWithRing(t, st, kms.GenerateMasterKey(), &secret)
	return st, svc, root
}

func newFaultStore(t *testing.T) *faultStore {
	inner := kmstest.MemoryStore(t)
	return &faultStore{Store: inner, trail: inner.Trail()}
}

// assetCount returns how many Assets records of asset creation name, and
// how many Assets the store holds.
func assetCount(t *testing.T, svc *kms.Service, root context.Context) (records, assets int) {
	t.Helper()
	l, err := svc.SearchActivity(root, kms.ActivityFilter{Props: map[string]any{"assetOp": "create"}}, kms.PageRequest{})
	if err != nil {
		t.Fatalf("SearchActivity = %v", err)
	}
	al, err := svc.SearchAssets(root, kms.AssetFilter{}, kms.PageRequest{})
	if err != nil {
		t.Fatalf("SearchAssets = %v", err)
	}
	return len(l.Data), len(al.Data)
}

// TestFailedAppendUndoes: an encrypt call whose Asset was committed but
// whose record the trail refused is answered with an error only once its
// Asset is undone; the Service goes on without a restart, and a restart
// finds nothing of the call either.
func TestFailedAppendUndoes(t *testing.T) {
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
	if recs, assets := assetCount(t, svc, root); recs != 0 || assets != 0 {
		t.Fatalf("after the failed Encrypt: %d records, %d Assets; want none", recs, assets)
	}
	if err := svc.Ping(root); err != nil {
		t.Fatalf("Ping after the undo = %v, want nil", err)
	}
	if _, err := svc.Encrypt(root, kms.EncryptInput{RingName: "r", Asset: &kms.AssetInput{Data: map[string]any{"file": "b"}}}); err != nil {
		t.Fatalf("Encrypt once the trail takes records again = %v, want nil (no restart needed)", err)
	}
	svc.Close()

	svc, root = startOn(t, st, key, &secret)
	defer svc.Close()
	if _, err := svc.VerifyActivityChain(root); err != nil {
		t.Fatalf("VerifyActivityChain after a restart = %v", err)
	}
	if recs, assets := assetCount(t, svc, root); recs != 1 || assets != 1 {
		t.Fatalf("after a restart: %d records, %d Assets; want the one of the call that succeeded", recs, assets)
	}
}

// TestFullStoreWritesNothing: while the store says it cannot take writes,
// every call, reads too (each writes its record), is answered NoSpace and
// writes nothing; when it can again, calls succeed.
func TestFullStoreWritesNothing(t *testing.T) {
	st, svc, root := startFaulty(t)
	defer svc.Close()
	enc, err := svc.Encrypt(root, kms.EncryptInput{RingName: "r"})
	if err != nil {
		t.Fatal(err)
	}
	before := st.Trail().Len()
	st.full.Store(true)
	_, err = svc.Encrypt(root, kms.EncryptInput{RingName: "r", Asset: &kms.AssetInput{Data: map[string]any{"file": "a"}}})
	wantKind(t, "Encrypt on a full disk", err, kms.KindNoSpace)
	_, err = svc.Decrypt(root, kms.DecryptInput{Hash: enc.Hash, Header: enc.Header})
	wantKind(t, "Decrypt on a full disk", err, kms.KindNoSpace)
	_, err = svc.CreateKeyRing(root, kms.CreateKeyRingInput{Name: "r2"})
	wantKind(t, "CreateKeyRing on a full disk", err, kms.KindNoSpace)
	wantKind(t, "Ping on a full disk", svc.Ping(root), kms.KindNoSpace)
	if n := st.Trail().Len(); n != before {
		t.Fatalf("the trail went from %d to %d records on a full disk, want no change", before, n)
	}
	st.full.Store(false)
	if err := svc.Ping(root); err != nil {
		t.Fatalf("Ping once there is room = %v", err)
	}
	if _, err := svc.GetKeyRing(root, kms.RingRef{Name: "r2"}); !errors.Is(err, kms.ErrNotFound) {
		t.Fatalf("GetKeyRing(r2) = %v, want not found: its creation was refused", err)
	}
	if _, err := svc.Decrypt(root, kms.DecryptInput{Hash: enc.Hash, Header: enc.Header}); err != nil {
		t.Fatalf("Decrypt once there is room = %v", err)
	}
}

// TestDoubtSettledByAppend: when the trail refuses a batch and the undo of
// its writes fails too, the call waits, the Service answers others
// Unavailable and says so in Ping; once the trail takes records, the call
// succeeds and its Asset is there.
func TestDoubtSettledByAppend(t *testing.T) {
	st, svc, root := startFaulty(t)
	defer svc.Close()
	done := doubtfulEncrypt(t, st, svc, root)
	st.failAppend.Store(false)
	if err := <-done; err != nil {
		t.Fatalf("the Encrypt in doubt = %v, want nil once its records reached the trail", err)
	}
	if err := svc.Ping(root); err != nil {
		t.Fatalf("Ping once settled = %v", err)
	}
	if recs, assets := assetCount(t, svc, root); recs != 1 || assets != 1 {
		t.Fatalf("after settling by append: %d records, %d Assets; want 1 and 1", recs, assets)
	}
	if _, err := svc.VerifyActivityChain(root); err != nil {
		t.Fatalf("VerifyActivityChain = %v", err)
	}
}

// TestDoubtSettledByUndo: as TestDoubtSettledByAppend, but the store takes
// writes again first: the writes are undone and the call fails.
func TestDoubtSettledByUndo(t *testing.T) {
	st, svc, root := startFaulty(t)
	defer svc.Close()
	done := doubtfulEncrypt(t, st, svc, root)
	st.failUpdate.Store(false)
	if err := <-done; err == nil {
		t.Fatal("the Encrypt in doubt = nil, want the trail's error once its writes were undone")
	}
	st.failAppend.Store(false)
	if recs, assets := assetCount(t, svc, root); recs != 0 || assets != 0 {
		t.Fatalf("after settling by undo: %d records, %d Assets; want none", recs, assets)
	}
	if _, err := svc.Encrypt(root, kms.EncryptInput{RingName: "r"}); err != nil {
		t.Fatalf("Encrypt after the doubt = %v", err)
	}
}

// TestDoubtSettledByUndoInABatch: when the next batch settles a doubt by
// undoing its writes, the doubtful call fails and the batch commits, and
// the Observer hears of that batch as it went, not of the doubtful
// call's failure.
func TestDoubtSettledByUndoInABatch(t *testing.T) {
	st := newFaultStore(t)
	obs := &recordingObserver{actions: map[string]int{}}
	var secret string
	svc, root := startWith(t, st, kms.Options{MasterKey: kms.GenerateMasterKey(), Observer: obs}, &secret)
	defer svc.Close()
	if _, err := svc.CreateKeyRing(root, kms.CreateKeyRingInput{Name: "r"}); err != nil {
		t.Fatal(err)
	}
	done := doubtfulEncrypt(t, st, svc, root)
	// The settling Append fails, the undo and the batch's own Append
	// succeed.
	st.failNext.Store(1)
	st.failAppend.Store(false)
	st.failUpdate.Store(false)
	if _, err := svc.Encrypt(root, kms.EncryptInput{RingName: "r"}); err != nil {
		t.Fatalf("Encrypt that settles the doubt = %v", err)
	}
	if err := <-done; err == nil {
		t.Fatal("the Encrypt in doubt = nil, want the trail's error once its writes were undone")
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if len(obs.errs) == 0 || obs.errs[len(obs.errs)-1] != nil {
		t.Fatalf("batch errors observed: %v; want the last batch, which committed, without", obs.errs)
	}
}

// TestDoubtCompletesAtRestart: a Service closed with a batch in doubt
// answers it Unavailable, and the next start completes it from
// act/pending.
func TestDoubtCompletesAtRestart(t *testing.T) {
	st := newFaultStore(t)
	key := kms.GenerateMasterKey()
	var secret string
	svc, root := startWithRing(t, st, key, &secret)
	done := doubtfulEncrypt(t, st, svc, root)
	svc.Close()
	wantKind(t, "the Encrypt in doubt at Close", <-done, kms.KindUnavailable)
	st.failAppend.Store(false)
	st.failUpdate.Store(false)

	svc, root = startOn(t, st, key, &secret)
	defer svc.Close()
	if recs, assets := assetCount(t, svc, root); recs != 1 || assets != 1 {
		t.Fatalf("after a restart: %d records, %d Assets; want the call completed", recs, assets)
	}
	if _, err := svc.VerifyActivityChain(root); err != nil {
		t.Fatalf("VerifyActivityChain = %v", err)
	}
}

// doubtfulEncrypt starts an Encrypt with an Asset whose records the trail
// refuses and whose undo fails, checks that it waits while the Service
// answers other calls Unavailable, and returns the channel of its outcome.
func doubtfulEncrypt(t *testing.T, st *faultStore, svc *kms.Service, root context.Context) <-chan error {
	t.Helper()
	st.failAppend.Store(true)
	st.failUpdate.Store(false)
	st.undoFails.Store(true)
	done := make(chan error, 1)
	go func() {
		// The Update of the batch succeeds, then the Append fails; the
		// undo must fail too, so the faultTrail's Append sets failUpdate
		// between them (undoFails).
		_, err := svc.Encrypt(root, kms.EncryptInput{RingName: "r", Asset: &kms.AssetInput{Data: map[string]any{"file": "a"}}})
		done <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := svc.Ping(root)
		if kms.ErrorKind(err) == kms.KindUnavailable {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("Encrypt = %v before the batch was in doubt", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("Ping = %v, want Unavailable once the batch is in doubt", err)
		}
		time.Sleep(time.Millisecond)
	}
	_, err := svc.Encrypt(root, kms.EncryptInput{RingName: "r"})
	wantKind(t, "another Encrypt while a batch is in doubt", err, kms.KindUnavailable)
	select {
	case err := <-done:
		t.Fatalf("the Encrypt in doubt was answered %v while in doubt", err)
	default:
	}
	return done
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
