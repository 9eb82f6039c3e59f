package transit_test

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/ringkms/kms/integration/internal/harness"
)

// previousRelease is the last commit before held keys had types: its
// kmsd wrote every transit key as an aes256-gcm96 key, with no type in
// its record.
const previousRelease = "8e3b2d7"

// TestUpgradeKeepsTransitKeys: a store that the previous release's kmsd
// wrote through Vault's transit interface keeps working under this
// tree's kmsd, on the same data directory and master key: its
// ciphertexts decrypt, its key reads as the aes256-gcm96 key it was with
// its versions, rotates, encrypts with the new version and rewraps an
// old ciphertext to it; its export answers keys that open the old
// ciphertexts offline; and the activity chain that both releases wrote
// verifies.
func TestUpgradeKeepsTransitKeys(t *testing.T) {
	old := harness.Release(t, previousRelease)
	in := harness.New(t)

	p := in.StartBinary(t, old, "-transit")
	c := vaultAPI{vaultClient(t, p, in.Bootstrap)}
	must(t, "create the key with the previous release")(c.write("transit/keys/app", nil))
	encrypt := func(plain string) string {
		t.Helper()
		ct, _ := must(t, "encrypt")(c.write("transit/encrypt/app", map[string]any{"plaintext": b64(plain)}))["ciphertext"].(string)
		return ct
	}
	ct1 := encrypt("sealed by version 1")
	must(t, "rotate with the previous release")(c.write("transit/keys/app/rotate", nil))
	ct2 := encrypt("sealed by version 2")
	if !strings.HasPrefix(ct1, "vault:v1:") || !strings.HasPrefix(ct2, "vault:v2:") {
		t.Fatalf("ciphertexts of the previous release = %q, %q", ct1, ct2)
	}
	must(t, "make the key exportable with the previous release")(c.write("transit/keys/app/config", map[string]any{"exportable": true}))
	p.Stop(t)

	p = in.Start(t, "-transit")
	c = vaultAPI{vaultClient(t, p, in.Bootstrap)}
	decrypt := func(ct, want string) {
		t.Helper()
		got, _ := must(t, "decrypt")(c.write("transit/decrypt/app", map[string]any{"ciphertext": ct}))["plaintext"].(string)
		if got != b64(want) {
			t.Fatalf("decrypt of %.12s... = %q, want %q", ct, got, b64(want))
		}
	}
	decrypt(ct1, "sealed by version 1")
	decrypt(ct2, "sealed by version 2")
	key := must(t, "read the key")(c.read("transit/keys/app"))
	if key["type"] != "aes256-gcm96" || number(t, key["latest_version"]) != 2 || key["exportable"] != true {
		t.Fatalf("the previous release's key reads as %v; want aes256-gcm96, latest_version 2, exportable", key)
	}
	rotated := must(t, "rotate")(c.write("transit/keys/app/rotate", nil))
	if number(t, rotated["latest_version"]) != 3 || rotated["type"] != "aes256-gcm96" {
		t.Fatalf("rotate = %v; want version 3 of an aes256-gcm96 key", rotated)
	}
	ct3 := encrypt("sealed by version 3")
	if !strings.HasPrefix(ct3, "vault:v3:") {
		t.Fatalf("encrypt after the rotation = %q, want version 3's", ct3)
	}
	decrypt(ct3, "sealed by version 3")
	rewrapped, _ := must(t, "rewrap")(c.write("transit/rewrap/app", map[string]any{"ciphertext": ct1}))["ciphertext"].(string)
	if !strings.HasPrefix(rewrapped, "vault:v3:") {
		t.Fatalf("rewrap of version 1's ciphertext = %q, want version 3's", rewrapped)
	}
	decrypt(rewrapped, "sealed by version 1")

	exported := must(t, "export the encryption keys")(c.read("transit/export/encryption-key/app"))
	for v, ct := range map[string]string{"1": ct1, "2": ct2, "3": ct3} {
		k, err := base64.StdEncoding.DecodeString(exportedKey(exported, v))
		if err != nil || !opensVaultCiphertext(ct, k) {
			t.Errorf("exported key of version %s (%v) does not open its ciphertext offline", v, err)
		}
	}
	if k, _ := base64.StdEncoding.DecodeString(exportedKey(exported, "2")); opensVaultCiphertext(ct1, k) {
		t.Error("version 2's exported key opens version 1's ciphertext")
	}
	p.Stop(t)
	in.VerifyAudit(t)
}
