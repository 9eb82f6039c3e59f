package k8s_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/client"
	"github.com/ringkms/kms/integration/internal/harness"
	"github.com/ringkms/kms/internal/kmsdtest"
)

// TestPluginRecords: the API server's calls on the socket (Status,
// Encrypt of its DEK, Decrypt of another's) are in the activity trail
// under the plugin's actor, on the plugin's key, naming the key and
// version each used; no record, nor kmsd's log, nor its data directory
// holds the DEK or the Secret, in any encoding, though its log has a
// line for each call.
func TestPluginRecords(t *testing.T) {
	in := harness.New(t)
	n := startNode(t, in, socketPath(t), "-log-level", "debug") // a line per call
	api := loadAPIServer(t, n.socket)
	body, secret := secretOf(t, "audited")
	stored := api.mustWrite(t, etcdKey("audited"), body, secret)
	loadAPIServer(t, n.socket).mustRead(t, etcdKey("audited"), stored, body)
	seed := dek(t, n.socket, stored)

	list, err := harness.Client(t, n.p, in.Bootstrap).SearchActivity(context.Background(), client.ActivityFilter{KeyID: actor}, kms.PageRequest{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	b64, url, hexa := base64.RawStdEncoding.EncodeToString, base64.RawURLEncoding.EncodeToString, hex.EncodeToString
	secrets := map[string][]byte{
		"Secret's value":                secret,
		"Secret's value in base64":      []byte(b64(secret)),
		"DEK":                           seed,
		"DEK in base64":                 []byte(b64(seed)),
		"DEK in base64url":              []byte(url(seed)),
		"DEK in hexadecimal":            []byte(hexa(seed)),
		"DEK in upper-case hexadecimal": []byte(strings.ToUpper(hexa(seed))),
	}

	var actions []string
	for _, a := range list.Data {
		raw, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		for name, s := range secrets {
			if bytes.Contains(raw, s) {
				t.Errorf("record %s holds the %s: %s", a.Action, name, raw)
			}
		}
		if a.KeyID != actor || a.Ring != keyName || !a.Valid {
			t.Errorf("record %s", raw)
		}
		if id, _ := a.Props["keyId"].(string); id == "" || a.Props["version"] == nil {
			t.Errorf("record %s does not name the key and version used", raw)
		}
		if !slices.Contains(actions, a.Action) {
			actions = append(actions, a.Action)
		}
	}
	slices.Sort(actions)
	if !slices.Equal(actions, []string{"transit.decrypt", "transit.encrypt", "transit.key.read"}) {
		t.Errorf("the plugin's records are of %v, want transit.decrypt, transit.encrypt and transit.key.read", actions)
	}

	n.p.Stop(t)
	if !strings.Contains(n.p.Stderr.String(), `"method":"Decrypt"`) {
		t.Fatalf("kmsd's log at debug level has no line for the plugin's Decrypt: the check below would prove nothing:\n%s", n.p.Stderr)
	}
	for name, s := range secrets {
		if bytes.Contains([]byte(n.p.Stderr.String()), s) {
			t.Errorf("kmsd's log holds the %s", name)
		}
	}
	kmsdtest.NoSecretsIn(t, in.Data, secrets)
}
