package transit_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tink-crypto/tink-go-hcvault/v2/integration/hcvault"
	"github.com/tink-crypto/tink-go/v2/aead"
	"github.com/tink-crypto/tink-go/v2/tink"

	"github.com/ringkms/kms/integration/internal/harness"
	"github.com/ringkms/kms/internal/kmsdtest"
)

// TestTink: Tink's AEAD over Vault's transit (tink-go-hcvault), on a key
// URI hcvault://<kmsd>/transit/keys/<name> of an aes256-gcm96 key and of
// a chacha20-poly1305 key, against the real kmsd -transit: it encrypts
// and decrypts with associated data (sent as Vault's associated_data) and
// with none (sent as an empty associated_data), and decryption with other
// associated data, or none, fails with Vault's 400; an encrypt-only
// credential encrypts but its decryption is refused (403) while one that
// may decrypt opens what it sealed. Tink's envelope AEAD with it as the
// key-encryption key makes and opens envelopes, also after the key
// rotates, binds their associated data, and an encrypt-only KEK seals
// envelopes it cannot open. The AEAD of Tink's deprecated client, which
// sends associated data as Vault's context, works with none, and
// associated data given as context is refused (400) rather than left
// unbound as Vault leaves it on a key without derivation.
func TestTink(t *testing.T) {
	in := harness.New(t)
	p := in.Start(t, "-transit")
	root := vaultClient(t, p, in.Bootstrap)
	host := strings.TrimPrefix(p.URL, "http://")
	for _, typ := range []string{"aes256-gcm96", "chacha20-poly1305"} {
		t.Run(typ, func(t *testing.T) {
			name := "tink-" + strings.Split(typ, "-")[0]
			if _, err := root.Logical().Write("transit/keys/"+name, map[string]any{"type": typ}); err != nil {
				t.Fatalf("create = %v", err)
			}
			uri := "hcvault://" + host + "/transit/keys/" + name
			both := tinkAEAD(t, p, in.APIKey(t, p, "keyring."+name+".encrypt", "keyring."+name+".decrypt"), uri)
			encOnly := tinkAEAD(t, p, in.APIKey(t, p, "keyring."+name+".encrypt"), uri)
			remote := aeadCheck{t: t, what: "Tink's hcvault AEAD", both: both, encOnly: encOnly, remote: true}
			remote.roundTrip([]byte("card 4111"), []byte("tenant=1"), "vault:v1:")
			remote.roundTrip([]byte("no associated data"), nil, "vault:v1:")

			envelope := aeadCheck{t: t, what: "Tink's envelope AEAD", both: aead.NewKMSEnvelopeAEAD2(aead.AES256GCMKeyTemplate(), both),
				encOnly: aead.NewKMSEnvelopeAEAD2(aead.AES256GCMKeyTemplate(), encOnly)}
			sealed := envelope.roundTrip([]byte("a large record"), []byte("row 7"), "")
			// The envelope: the length of the encrypted data key, the
			// data key as kmsd's transit encrypted it, the payload.
			if len(sealed) < 4 || !bytes.HasPrefix(sealed[4:], []byte("vault:v1:")) {
				t.Errorf("the envelope %q does not hold a data key that kmsd encrypted", sealed)
			}
			if _, err := root.Logical().Write("transit/keys/"+name+"/rotate", nil); err != nil {
				t.Fatal(err)
			}
			envelope.opens(sealed, []byte("row 7"), []byte("a large record"))
			remote.roundTrip([]byte("after rotation"), []byte("tenant=1"), "vault:v2:")

			logical := vaultClient(t, p, in.Bootstrap).Logical()
			legacy, err := hcvault.NewAEAD("/transit/keys/"+name, logical, hcvault.WithLegacyContextParamater())
			if err != nil {
				t.Fatal(err)
			}
			aeadCheck{t: t, what: "Tink's AEAD with Vault's context", both: legacy}.roundTrip([]byte("legacy"), nil, "vault:v2:")
			if _, err := legacy.Encrypt([]byte("x"), []byte("tenant=1")); !refused(vaultAPI{root}, err, 400, "context") {
				t.Errorf("encrypt with associated data as context = %v, want 400 naming context", err)
			}
		})
	}
	p.Stop(t)
	in.VerifyAudit(t)
}

// tinkAEAD is the AEAD of tink-go-hcvault's KMS client for the key URI
// uri, over HashiCorp's client of p acting with secret.
func tinkAEAD(t *testing.T, p *kmsdtest.Proc, secret, uri string) tink.AEAD {
	t.Helper()
	kc, err := hcvault.NewClientWithAEADOptions(uri, vaultClient(t, p, secret).Logical())
	if err != nil {
		t.Fatalf("hcvault.NewClientWithAEADOptions(%s) = %v", uri, err)
	}
	a, err := kc.GetAEAD(uri)
	if err != nil {
		t.Fatalf("GetAEAD(%s) = %v", uri, err)
	}
	return a
}

// aeadCheck checks an AEAD: both may encrypt and decrypt, encOnly (nil
// when none) encrypts only; remote when kmsd decrypts with the
// associated data, so that a decryption with other associated data is
// kmsd's 400 saying the message authentication failed.
type aeadCheck struct {
	t             *testing.T
	what          string
	both, encOnly tink.AEAD
	remote        bool
}

// roundTrip encrypts plain bound to ad, checks that the ciphertext starts
// with prefix, opens with ad alone, and what encOnly seals opens with
// both but not with encOnly (403); it returns the ciphertext.
func (a aeadCheck) roundTrip(plain, ad []byte, prefix string) []byte {
	t := a.t
	t.Helper()
	ct, err := a.both.Encrypt(plain, ad)
	if err != nil {
		t.Fatalf("%s: Encrypt = %v", a.what, err)
	}
	if !bytes.HasPrefix(ct, []byte(prefix)) {
		t.Errorf("%s: Encrypt = %q, want it to start with %q", a.what, ct, prefix)
	}
	a.opens(ct, ad, plain)
	if a.encOnly == nil {
		return ct
	}
	sealed, err := a.encOnly.Encrypt(plain, ad)
	if err != nil {
		t.Fatalf("%s: Encrypt with an encrypt-only credential = %v", a.what, err)
	}
	if _, err := a.encOnly.Decrypt(sealed, ad); !refused(vaultAPI{}, err, 403, "missing permission flag") {
		t.Errorf("%s: Decrypt with an encrypt-only credential = %v, want 403", a.what, err)
	}
	a.opens(sealed, ad, plain)
	return ct
}

// opens checks that both opens ct with ad to plain, and not with other
// associated data or without any (with none, not with some).
func (a aeadCheck) opens(ct, ad, plain []byte) {
	t := a.t
	t.Helper()
	if got, err := a.both.Decrypt(ct, ad); err != nil || !bytes.Equal(got, plain) {
		t.Errorf("%s: Decrypt = %q, %v; want %q", a.what, got, err, plain)
	}
	wrong := [][]byte{[]byte("tenant=2")}
	if len(ad) != 0 {
		wrong = append(wrong, nil)
	}
	for _, w := range wrong {
		if got, err := a.both.Decrypt(ct, w); err == nil || a.remote && !refused(vaultAPI{}, err, 400, "message authentication failed") {
			t.Errorf("%s: Decrypt with associated data %q of a ciphertext bound to %q = %q, %v; want an error (400 from kmsd)", a.what, w, ad, got, err)
		}
	}
}
