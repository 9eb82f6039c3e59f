package k8s_test

import (
	"bytes"
	"context"
	"crypto/rand"
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
	kmsapi "k8s.io/kms/apis/v2"
)

// TestPluginRecords: the API server's calls on the socket (Status,
// Encrypt of its DEK, Decrypt of another's) are in the activity trail
// under the plugin's actor, on the plugin's key, naming the key and
// version each used; no record, nor kmsd's log, nor its data directory
// holds the DEK or the Secret, in any encoding, though its log has a
// line for each call.
func TestPluginRecords(t *testing.T) {
	t.Parallel()
	in := harness.New(t)
	n := startNode(t, in, socketPath(t), "-log-level", "debug") // a line per call
	api := loadAPIServer(t, n.socket)
	body, secret := secretOf(t, "audited")
	stored := api.mustWrite(t, etcdKey("audited"), body, secret)
	loadAPIServer(t, n.socket).mustRead(t, etcdKey("audited"), stored, body)
	seed := dek(t, n.socket, stored)
	// A DEK of printable bytes shows in a log or record however it is
	// written there (as a string, escaped, in base64 or hexadecimal).
	printable := []byte("dek-" + rand.Text() + "--")
	sealed, err := plugin(t, n.socket).Encrypt(callCtx(t), &kmsapi.EncryptRequest{Uid: "printable", Plaintext: printable})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := plugin(t, n.socket).Decrypt(callCtx(t), &kmsapi.DecryptRequest{Uid: "printable", Ciphertext: sealed.Ciphertext, KeyId: sealed.KeyId}); err != nil || !bytes.Equal(out.Plaintext, printable) {
		t.Fatalf("Decrypt of Encrypt = %v, %v", out, err)
	}

	list, err := harness.Client(t, n.p, in.Bootstrap).SearchActivity(context.Background(), client.ActivityFilter{KeyID: actor}, kms.PageRequest{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	secrets := map[string][]byte{}
	for name, b := range map[string][]byte{"Secret's value": secret, "DEK": seed, "printable DEK": printable} {
		escaped, _ := json.Marshal(string(b))
		for enc, v := range map[string]string{
			"":                           string(b),
			" as a JSON string":          string(escaped[1 : len(escaped)-1]),
			" in base64":                 base64.RawStdEncoding.EncodeToString(b),
			" in base64url":              base64.RawURLEncoding.EncodeToString(b),
			" in hexadecimal":            hex.EncodeToString(b),
			" in upper-case hexadecimal": strings.ToUpper(hex.EncodeToString(b)),
		} {
			secrets[name+enc] = []byte(v)
		}
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
