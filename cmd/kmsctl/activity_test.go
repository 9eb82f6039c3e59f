package main

import (
	"strings"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/kmstest"
)

// TestRefusedDecryptFound: a decrypt refused because its key is disabled
// is among the refused operations that activity search -valid false
// finds, next to one refused for want of a flag.
func TestRefusedDecryptFound(t *testing.T) {
	s, e := newRingServer(t, "files")
	envelope := kmsctl(t, e, "data", "encrypt", "-ring", "files").want(t, 0, "encrypt").stdout
	var keys kms.List[*kms.Key]
	decodeJSON(t, kmsctl(t, s.env, "", "key", "list", "-ring", "files", "-json").want(t, 0, "key list"), &keys)
	kmsctl(t, s.env, "", "key", "disable", "-rotate", "-ring", "files", keys.Data[0].ID).want(t, 0, "key disable")
	kmsctl(t, e, envelope, "decrypt").want(t, 1, "decrypt under the disabled key")
	var reader kms.APIKey
	decodeJSON(t, kmsctl(t, s.env, "", "-json", "apikey", "create", "-account-uid", "root", "-flag", "keyring.files.read").want(t, 0, "apikey create"), &reader)
	kmsctl(t, e.with("KMS_API_KEY", reader.Key), envelope, "decrypt").want(t, 1, "decrypt without the flag")

	var acts kms.List[*kms.Activity]
	decodeJSON(t, kmsctl(t, s.env, "", "activity", "search", "-valid", "false", "-action", "decrypt", "-json").want(t, 0, "activity search"), &acts)
	results := map[string]int{}
	for _, a := range acts.Data {
		results[a.Props["result"].(string)]++
	}
	if len(acts.Data) != 2 || results["disabled"] != 1 || results["permission_denied"] != 1 {
		t.Errorf("refused decrypts found, by result: %v; want one disabled, one permission_denied", results)
	}
	r := kmsctl(t, s.env, "", "activity", "search", "-valid", "false", "-action", "decrypt").want(t, 0, "activity search table")
	if !strings.Contains(r.stdout, " false  disabled\n") {
		t.Errorf("activity search -valid false printed:\n%s", r.stdout)
	}
}

// TestTableTimes: the times of tables are RFC 3339 in UTC, and those of
// activity records keep their milliseconds, so that a TIME given back to
// -until (or -from) finds its record.
func TestTableTimes(t *testing.T) {
	clock := kmstest.NewClock()
	clock.Advance(250 * time.Millisecond)
	s := newServer(t, kms.Options{Now: clock.Now})
	createRing(t, s, "files")

	r := kmsctl(t, s.env, "", "activity", "search", "-action", "keyring.create").want(t, 0, "activity search")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "SEQ  TIME") {
		t.Fatalf("activity search printed:\n%s", r.stdout)
	}
	at := strings.Fields(lines[1])[1]
	if want := "2026-03-04T05:06:07.250Z"; at != want {
		t.Errorf("activity TIME %q, want %q", at, want)
	}
	for _, f := range []string{"-until", "-from"} {
		r = kmsctl(t, s.env, "", "activity", "search", "-action", "keyring.create", f, at).want(t, 0, "activity search "+f)
		if strings.Count(r.stdout, "keyring.create") != 1 {
			t.Errorf("activity search %s %s printed:\n%s", f, at, r.stdout)
		}
	}

	r = kmsctl(t, s.env, "", "ring", "list").want(t, 0, "ring list")
	created := strings.Fields(strings.Split(r.stdout, "\n")[1])[3]
	if _, err := time.Parse(time.RFC3339, created); err != nil || !strings.HasSuffix(created, "Z") {
		t.Errorf("ring list CREATED %q is not RFC 3339 in UTC: %v", created, err)
	}
}
