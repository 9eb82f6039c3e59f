package main

import (
	"strings"
	"testing"

	"github.com/ringkms/kms"
)

// TestErrorsNameFlags: the errors of the service that name the members
// of its requests reach the user in kmsctl's flags; what kmsctl can check
// itself it checks before the call, as a usage error.
func TestErrorsNameFlags(t *testing.T) {
	s := newServer(t, kms.Options{})
	createRing(t, s, "payments")
	active := activeKey(t, s, "payments")

	tests := []struct {
		name    string
		args    []string
		code    int
		want    string // in stderr
		notWant string // not in stderr
	}{
		{"disable the active key", []string{"key", "disable", "-ring", "payments", active}, 1, "or give -rotate (invalid)", `"rotate"`},
		{"destroy the active key", []string{"key", "destroy", "-ring", "payments", active}, 1, "or give -rotate (invalid)", `"rotate"`},
		{"destroy too soon", []string{"key", "destroy", "-rotate", "-after", "1m", "-ring", "payments", active}, 1, "kmsctl: -after must be at least 1h0m0s (invalid)", ""},
		{"destroy after no duration", []string{"key", "destroy", "-after", "soon", "-ring", "payments", active}, 2, `invalid value "soon" for flag -after: want a duration such as 72h`, ""},
		{"negative encrypt limit", []string{"ring", "config", "payments", "-max-encrypt-count", "-1"}, 2, "-max-encrypt-count -1: want 0 (no limit) or more", "maxEncryptCount"},
		{"invite with a bad display name", []string{"user", "invite", "-email", "ada@example.com", "-first-name", "Ada", "-last-name", "Lovelace",
			"-display-name", "Ada\x01", "ada"}, 1, "\n  -display-name: -display-name must not contain control characters", "displayName"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := kmsctl(t, s.env, "", tt.args...).want(t, tt.code, strings.Join(tt.args, " "))
			if !strings.Contains(r.stderr, tt.want) || tt.notWant != "" && strings.Contains(r.stderr, tt.notWant) {
				t.Errorf("stderr = %q, want %q and not %q", r.stderr, tt.want, tt.notWant)
			}
		})
	}
	// The refused destruction changed nothing.
	var keys kms.List[*kms.Key]
	decodeJSON(t, kmsctl(t, s.env, "", "key", "list", "-ring", "payments", "-json").want(t, 0, "key list"), &keys)
	if len(keys.Data) != 1 || keys.Data[0].State != kms.KeyEnabled {
		t.Errorf("keys after refused changes: %+v", keys.Data)
	}
}

// TestKeyChangesShowEncryptCount: a key state change, a destruction and a
// rotation print the key's encrypt count, which their answers lack, as
// key list does; a caller who may change keys but not read them gets the
// change and a note instead of the count.
func TestKeyChangesShowEncryptCount(t *testing.T) {
	s, e := newRingServer(t, "files")
	for range 2 {
		kmsctl(t, e, "data", "encrypt", "-ring", "files").want(t, 0, "encrypt")
	}
	var keys kms.List[*kms.Key]
	decodeJSON(t, kmsctl(t, s.env, "", "key", "list", "-ring", "files", "-json").want(t, 0, "key list"), &keys)
	id := keys.Data[0].ID

	for _, args := range [][]string{
		{"key", "disable", "-rotate", "-ring", "files", id},
		{"key", "enable", "-ring", "files", id},
		{"key", "destroy", "-after", "48h", "-ring", "files", id},
		{"key", "cancel-destroy", "-ring", "files", id},
	} {
		r := kmsctl(t, s.env, "", args...).want(t, 0, strings.Join(args, " "))
		if !strings.Contains(r.stdout, "encrypt count:  2\n") {
			t.Errorf("%s printed:\n%s", strings.Join(args, " "), r.stdout)
		}
	}
	var changed struct{ Key kms.Key }
	decodeJSON(t, kmsctl(t, s.env, "", "key", "enable", "-ring", "files", id, "-json").want(t, 0, "key enable -json"), &changed)
	if changed.Key.EncryptCount == nil || *changed.Key.EncryptCount != 2 {
		t.Errorf("key enable -json: encryptCount %s, want 2", cell(changed.Key.EncryptCount))
	}
	r := kmsctl(t, s.env, "", "ring", "rotate", "files").want(t, 0, "ring rotate")
	if !strings.Contains(r.stdout, "encrypt count:  0\n") {
		t.Errorf("ring rotate printed:\n%s", r.stdout)
	}

	// An API key that may change the ring's keys, not read them.
	var key kms.APIKey
	decodeJSON(t, kmsctl(t, s.env, "", "-json", "apikey", "create", "-account-uid", "root", "-flag", "keyring.files.keys").want(t, 0, "apikey create"), &key)
	r = kmsctl(t, s.env.with("KMS_API_KEY", key.Key), "", "key", "disable", "-ring", "files", id).want(t, 0, "key disable without read")
	if !strings.Contains(r.stdout, "state:          disabled") || !strings.Contains(r.stdout, "encrypt count:  -\n") ||
		!strings.Contains(r.stderr, "encrypt count of key "+id+" could not be read") {
		t.Errorf("key disable without read: stdout\n%s\nstderr %q", r.stdout, r.stderr)
	}
}

// ring rotate -held rotates a held key (a transit key, or the Kubernetes
// KMS plugin's), which the service holds: no key material is printed.
func TestRingRotateHeld(t *testing.T) {
	s := newServer(t, kms.Options{})
	if _, err := s.Service.CreateHeldKey(s.RootCtx, kms.CreateHeldKeyInput{Name: "kubernetes"}); err != nil {
		t.Fatal(err)
	}
	r := kmsctl(t, s.env, "", "ring", "rotate", "-held", "kubernetes").want(t, 0, "ring rotate -held")
	if !strings.Contains(r.stdout, "version:  2\n") || !strings.Contains(r.stdout, "state:    enabled\n") {
		t.Errorf("ring rotate -held printed:\n%s", r.stdout)
	}
	var rotated struct{ Key kms.AsymKey }
	decodeJSON(t, kmsctl(t, s.env, "", "-json", "ring", "rotate", "-held", "kubernetes").want(t, 0, "ring rotate -held -json"), &rotated)
	if rotated.Key.Version != 3 || !rotated.Key.Held || rotated.Key.KeyData.Key != "" {
		t.Errorf("ring rotate -held -json = %+v, want version 3, held, without its key", rotated.Key)
	}
	key, err := s.Service.GetHeldKey(s.RootCtx, "kubernetes")
	if err != nil || key.LatestVersion != 3 {
		t.Fatalf("the held key after two rotations: %+v, %v", key, err)
	}
	// A /ks ring's name with -held: no such held key.
	s.Service.CreateKeyRing(s.RootCtx, kms.CreateKeyRingInput{Name: "files", KEM: "x25519"})
	kmsctl(t, s.env, "", "ring", "rotate", "-held", "files").want(t, 1, "ring rotate -held of a /ks ring")
}
