package kms_test

import (
	"sync"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/kmstest"
)

// recordingObserver keeps what a Service reports.
type recordingObserver struct {
	mu      sync.Mutex
	batches int
	calls   int
	append  time.Duration
	errs    []error        // each batch's error
	actions map[string]int // action/result -> records
}

func (o *recordingObserver) ObserveBatch(calls int, commit, appendTime time.Duration, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.batches++
	o.calls += calls
	o.append += appendTime
	o.errs = append(o.errs, err)
	if commit < appendTime {
		panic("a batch's commit took less than its append")
	}
}

func (o *recordingObserver) ObserveRecords(recs []*kms.Activity) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, a := range recs {
		o.actions[a.Action+"/"+a.Props["result"].(string)]++
	}
}

// TestObserver: the Observer hears of every batch and of every record it
// committed, with its result.
func TestObserver(t *testing.T) {
	obs := &recordingObserver{actions: map[string]int{}}
	e := newEnvOn(t, kmstest.MemoryStore(t), kms.Options{MasterKey: kms.GenerateMasterKey(), Observer: obs})
	e.ring(t, "r")
	for range 3 {
		if _, err := e.svc.Encrypt(e.root, kms.EncryptInput{RingName: "r"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.svc.Encrypt(e.as(t, kms.Flags{}), kms.EncryptInput{RingName: "r"}); kms.ErrorKind(err) != kms.KindPermissionDenied {
		t.Fatalf("Encrypt without the flag = %v", err)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.actions["encrypt/ok"] != 3 || obs.actions["encrypt/permission_denied"] != 1 || obs.actions["keyring.create/ok"] != 1 {
		t.Fatalf("records observed: %v", obs.actions)
	}
	if obs.batches == 0 || obs.calls < 5 || obs.append <= 0 {
		t.Fatalf("batches observed: %d with %d calls, append time %v", obs.batches, obs.calls, obs.append)
	}
}

// TestCacheStats: a look-up that finds its entry is a hit, one that reads
// the store a miss.
func TestCacheStats(t *testing.T) {
	e := newEnv(t)
	e.ring(t, "r")
	stat := func(name string) kms.CacheStat {
		for _, s := range e.svc.CacheStats() {
			if s.Name == name {
				return s
			}
		}
		t.Fatalf("no cache %q in %+v", name, e.svc.CacheStats())
		return kms.CacheStat{}
	}
	before := stat("keys")
	for range 4 {
		if _, err := e.svc.Encrypt(e.root, kms.EncryptInput{RingName: "r"}); err != nil {
			t.Fatal(err)
		}
	}
	after := stat("keys")
	if after.Hits+after.Misses-before.Hits-before.Misses != 4 || after.Hits <= before.Hits {
		t.Fatalf("keys cache: %+v then %+v after 4 encrypts", before, after)
	}
	for _, name := range []string{"rings", "ring_names", "credentials"} {
		if s := stat(name); s.Hits+s.Misses == 0 {
			t.Fatalf("cache %s counted no look-up", name)
		}
	}
}
