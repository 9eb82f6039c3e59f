package kms_test

import (
	"bytes"
	"testing"

	"github.com/ringkms/kms"
)

// GenerateRandom answers fresh bytes to a caller with random.generate,
// recorded with their count only.
func TestGenerateRandom(t *testing.T) {
	e := newEnv(t)
	as := e.as(t, kms.Flags{kms.FlagRandom: true})
	a, err := e.svc.GenerateRandom(as, 32)
	if err != nil || len(a) != 32 {
		t.Fatalf("GenerateRandom(32) = %d bytes, %v", len(a), err)
	}
	b, _ := e.svc.GenerateRandom(as, 32)
	if bytes.Equal(a, b) {
		t.Fatal("two calls answered the same bytes")
	}
	for _, n := range []int{0, -1, kms.MaxRandomBytes + 1} {
		if _, err := e.svc.GenerateRandom(as, n); kms.ErrorKind(err) != kms.KindInvalid {
			t.Errorf("GenerateRandom(%d) = %v, want Invalid", n, err)
		}
	}
	if _, err := e.svc.GenerateRandom(e.as(t, kms.Flags{"keyring.*.encrypt": true}), 8); kms.ErrorKind(err) != kms.KindPermissionDenied {
		t.Errorf("GenerateRandom without the flag = %v", err)
	}
	recs, err := e.svc.SearchActivity(e.root, kms.ActivityFilter{Action: "random.generate"}, kms.PageRequest{})
	if err != nil || len(recs.Data) != 6 || recs.Data[0].Props["bytes"] != float64(32) && recs.Data[0].Props["bytes"] != 32 {
		t.Fatalf("the records of GenerateRandom = %+v, %v", recs, err)
	}
}
