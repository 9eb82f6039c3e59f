package transit

import (
	"encoding/base64"
	"net/http"

	"github.com/julienschmidt/httprouter"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/vaultct"
)

// The crypto routes: encrypt, decrypt, rewrap, datakey. A call gives one
// item (plaintext or ciphertext at the top level) or batch_input
// (items.go), each with associated_data (base64) bound to its
// ciphertext.

// deriving are the parameters of the crypto routes for what ringkms's
// keys do not do; given, they answer 400.
var deriving = []string{"context", "nonce", "convergent_encryption", "padding_scheme"}

// associatedData returns an item's associated_data, decoded from base64
// (nil when absent).
func associatedData(p params) ([]byte, error) {
	text, err := p.str("associated_data")
	if err != nil || text == "" {
		return nil, err
	}
	ad, err := base64.StdEncoding.DecodeString(text)
	if err != nil {
		return nil, kms.Errorf(kms.KindInvalid, "associated_data: %v", err)
	}
	return ad, nil
}

// POST encrypt/:name: plaintext (base64) and key_version, or batch_input.
// A key that does not exist is made, with the type and settings given
// (newKeyParams), for a caller that may create it (keyring.<name>.create),
// as Vault's encrypt makes it.
func (a *api) encrypt(r *http.Request, ps httprouter.Params) (*answer, error) {
	c, err := a.readItems(r, "plaintext", "encrypt")
	if err != nil {
		return nil, err
	}
	newKey, err := c.p.newKeyParams(ps.ByName("name"))
	if err != nil {
		return nil, err
	}
	in, at := readEach(c, func(it item) (kms.HeldPlaintext, error) {
		var pt kms.HeldPlaintext
		var err error
		if pt.Plaintext, err = decoded(it.p, "plaintext", "encrypt"); err != nil {
			return pt, err
		}
		if pt.KeyVersion, err = it.p.integer("key_version"); err != nil {
			return pt, err
		}
		pt.AssociatedData, err = associatedData(it.p)
		return pt, err
	})
	if err := a.admit(r, max(len(in), 1)); err != nil {
		return nil, err
	}
	if len(in) > 0 {
		out, err := a.svc.EncryptWithHeldKey(r.Context(), kms.HeldEncryptInput{Name: ps.ByName("name"), Items: in, Create: true, NewKey: newKey})
		if err != nil {
			return nil, err
		}
		putCiphertexts(c, at, out)
	}
	return c.answer(ciphertextData)
}

// putCiphertexts puts the ciphertexts the Service answered into c's
// results, as Vault writes them.
func putCiphertexts(c *call, at []int, out []kms.HeldCiphertext) {
	putEach(c, at, out, func(o kms.HeldCiphertext) error { return o.Err }, func(res *result, o kms.HeldCiphertext) {
		res.Ciphertext, res.KeyVersion = vaultct.Format(o.KeyVersion, o.Ciphertext), o.KeyVersion
	})
}

// ciphertextData is the data of encrypt's and rewrap's answer to one
// item.
func ciphertextData(res result) map[string]any {
	return map[string]any{"ciphertext": res.Ciphertext, "key_version": res.KeyVersion}
}

// sealed reads an item's ciphertext (vault:v<N>:<base64>, read into its
// version and what the key made) with its associated data. A ciphertext
// that does not read goes to the service as unread, which fails and
// records it.
func sealed(it item, what string) (kms.HeldSealed, error) {
	var out kms.HeldSealed
	ct, err := it.p.required("ciphertext", what)
	if err != nil {
		return out, err
	}
	if out.AssociatedData, err = associatedData(it.p); err != nil {
		return out, err
	}
	out.KeyVersion, out.Ciphertext, out.Unread = vaultct.Parse(ct)
	return out, nil
}

// POST decrypt/:name: ciphertext, or batch_input; the plaintexts in
// base64.
func (a *api) decrypt(r *http.Request, ps httprouter.Params) (*answer, error) {
	c, err := a.readItems(r, "ciphertext", "decrypt")
	if err != nil {
		return nil, err
	}
	in, at := readEach(c, func(it item) (kms.HeldSealed, error) { return sealed(it, "decrypt") })
	if err := a.admit(r, max(len(in), 1)); err != nil {
		return nil, err
	}
	if len(in) > 0 {
		out, err := a.svc.DecryptWithHeldKey(r.Context(), kms.HeldDecryptInput{Name: ps.ByName("name"), Items: in})
		if err != nil {
			return nil, err
		}
		putEach(c, at, out, func(o kms.HeldDecrypted) error { return o.Err }, func(res *result, o kms.HeldDecrypted) {
			text := base64.StdEncoding.EncodeToString(o.Plaintext)
			clear(o.Plaintext)
			res.Plaintext = &text
		})
	}
	for i := range c.results {
		if c.results[i].Plaintext == nil {
			c.results[i].Plaintext = new(string) // Vault's items always carry it
		}
	}
	return c.answer(func(res result) map[string]any { return map[string]any{"plaintext": *res.Plaintext} })
}

// POST rewrap/:name: ciphertext and key_version, or batch_input; the new
// ciphertexts.
func (a *api) rewrap(r *http.Request, ps httprouter.Params) (*answer, error) {
	c, err := a.readItems(r, "ciphertext", "rewrap")
	if err != nil {
		return nil, err
	}
	in, at := readEach(c, func(it item) (kms.HeldRewrapItem, error) {
		s, err := sealed(it, "rewrap")
		if err != nil {
			return kms.HeldRewrapItem{}, err
		}
		v, err := it.p.integer("key_version")
		return kms.HeldRewrapItem{HeldSealed: s, NewVersion: v}, err
	})
	if err := a.admit(r, max(len(in), 1)); err != nil {
		return nil, err
	}
	if len(in) > 0 {
		out, err := a.svc.RewrapWithHeldKey(r.Context(), kms.HeldRewrapInput{Name: ps.ByName("name"), Items: in})
		if err != nil {
			return nil, err
		}
		putCiphertexts(c, at, out)
	}
	return c.answer(ciphertextData)
}

// POST datakey/:type/:name, type plaintext or wrapped: a new data key of
// bits bits (128, 256 or 512; 256 by default), encrypted with key_version
// (the latest by default), and in base64 in the clear for plaintext.
func (a *api) dataKey(r *http.Request, ps httprouter.Params) (*answer, error) {
	typ := ps.ByName("type")
	if typ != "plaintext" && typ != "wrapped" {
		return nil, kms.Errorf(kms.KindInvalid, "invalid type %q: use datakey/plaintext/:name or datakey/wrapped/:name", typ)
	}
	p, err := a.readParams(r)
	if err != nil {
		return nil, err
	}
	if err := p.unsupported(deriving...); err != nil {
		return nil, err
	}
	bits, err := p.integer("bits")
	if err != nil {
		return nil, err
	}
	v, err := p.integer("key_version")
	if err != nil {
		return nil, err
	}
	ad, err := associatedData(p)
	if err != nil {
		return nil, err
	}
	dk, err := a.svc.GenerateHeldDataKey(r.Context(), kms.HeldDataKeyInput{Name: ps.ByName("name"), Bits: bits, KeyVersion: v,
		AssociatedData: ad, Plaintext: typ == "plaintext"})
	if err != nil {
		return nil, err
	}
	data := map[string]any{"ciphertext": vaultct.Format(dk.KeyVersion, dk.Ciphertext), "key_version": dk.KeyVersion}
	if typ == "plaintext" {
		data["plaintext"] = base64.StdEncoding.EncodeToString(dk.Plaintext)
		clear(dk.Plaintext)
	}
	return &answer{data: data}, nil
}
