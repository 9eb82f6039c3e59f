package main

import (
	"strings"
	"testing"

	"github.com/ringkms/kms"
)

// TestRefusedDecryptFound: a decrypt refused because its key is disabled
// is among the refused operations that activity search -valid false
// finds, next to one refused for want of a flag.
func TestRefusedDecryptFound(t *testing.T) {
	s := newServer(t, kms.Options{})
	keyFile := createRing(t, s, "files")
	e := s.env.with("KMS_PRIVATE_KEY_FILE", keyFile)
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
