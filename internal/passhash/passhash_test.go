package passhash

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ringkms/kms/internal/base"
)

func TestHashVerify(t *testing.T) {
	ctx := context.Background()
	h, err := Hash(ctx, "Correct-horse-1")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h, "$argon2id$v=19$m=65536,t=1,p=2$") {
		t.Errorf("Hash = %q, want the PHC string of argon2id with the set parameters", h)
	}
	if h2, _ := Hash(ctx, "Correct-horse-1"); h2 == h {
		t.Error("two hashes of one password are equal: the salt is not random")
	}
	for pw, want := range map[string]bool{"Correct-horse-1": true, "correct-horse-1": false, "": false} {
		if got, err := Verify(ctx, h, pw); err != nil || got != want {
			t.Errorf("Verify(%q) = %v, %v; want %v", pw, got, err, want)
		}
	}
	if ok, err := Verify(ctx, Dummy(), "anything"); err != nil || ok {
		t.Errorf("Verify(Dummy()) = %v, %v; want false", ok, err)
	}
}

// TestVerifyRefusesMalformed: a hash that does not parse, or whose
// parameters would cost unbounded time or memory, is an internal error,
// never a match.
func TestVerifyRefusesMalformed(t *testing.T) {
	for _, h := range []string{
		"", "plain", "$argon2i$v=19$m=65536,t=1,p=2$c2FsdHNhbHRzYWx0$a2V5a2V5a2V5a2V5a2V5a2V5",
		"$argon2id$v=18$m=65536,t=1,p=2$c2FsdHNhbHRzYWx0$a2V5a2V5a2V5a2V5a2V5a2V5",
		"$argon2id$v=19$m=4194304,t=1,p=2$c2FsdHNhbHRzYWx0$a2V5a2V5a2V5a2V5a2V5a2V5", // 4 GiB
		"$argon2id$v=19$m=65536,t=100,p=2$c2FsdHNhbHRzYWx0$a2V5a2V5a2V5a2V5a2V5a2V5",
		"$argon2id$v=19$m=65536,t=1,p=2$c2Fs$a2V5a2V5a2V5a2V5a2V5a2V5",                  // short salt
		"$argon2id$v=19$m=65536,t=1,p=2$c2FsdHNhbHRzYWx0$a2V5",                          // short key
		"$argon2id$v=19$m=65536,t=1,p=2$c2FsdHNhbHRzYWx0$a2V5a2V5a2V5a2V5a2V5a2V5$more", // extra part
	} {
		ok, err := Verify(context.Background(), h, "pw")
		if ok || !errors.Is(err, base.ErrInternal) {
			t.Errorf("Verify(%q) = %v, %v; want an internal error", h, ok, err)
		}
	}
}

// TestHashWaitsForItsContext: with every slot taken, a hash waits, and
// gives up when its context ends.
func TestHashWaitsForItsContext(t *testing.T) {
	var releases []func()
	for range cap(argonSlots) {
		r, err := acquireArgon(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		releases = append(releases, r)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Hash(ctx, "pw"); !errors.Is(err, context.Canceled) {
		t.Errorf("Hash with every slot taken and its context ended = %v, want context.Canceled", err)
	}
	for _, r := range releases {
		r()
	}
}
