package transit

import (
	"encoding/base64"
	"net/http"

	"github.com/julienschmidt/httprouter"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/vaultct"
)

// The signature routes: sign, verify, hmac. As the crypto routes, a call
// gives one input or batch_input (each item with its reference); the
// options (hash_algorithm, also as the path's last segment, prehashed,
// marshaling_algorithm, signature_algorithm, salt_length, key_version)
// are the call's. A signature or an HMAC is written vault:v<N>: and its
// bytes in base64, in base64url without padding for a JWS signature, as
// Vault writes them.

// signOptions reads the options of a sign or verify call; the path's
// hash_algorithm, when given, stands for the parameter.
func signOptions(p params, ps httprouter.Params) (kms.HeldSignOptions, error) {
	var o kms.HeldSignOptions
	err := p.into(map[string]any{"prehashed": &o.Prehashed, "marshaling_algorithm": &o.Marshaling,
		"signature_algorithm": &o.Algorithm, "salt_length": &o.SaltLength})
	if err == nil {
		o.Hash, err = hashParam(p, ps, "hash_algorithm")
	}
	return o, err
}

// hashParam is the hash the path's last segment names, else the
// parameter name (empty for the default).
func hashParam(p params, ps httprouter.Params, name string) (string, error) {
	if h := ps.ByName("hash"); h != "" {
		return h, nil
	}
	return p.str(name)
}

// encodingOf is the base64 a signature of o is written in.
func encodingOf(o kms.HeldSignOptions) *base64.Encoding {
	if o.Marshaling == "jws" {
		return base64.RawURLEncoding
	}
	return base64.StdEncoding
}

// input reads an item's input, in base64.
func input(it item, what string) ([]byte, error) { return decoded(it.p, "input", what) }

// POST sign/:name[/:hash]: input (base64), or batch_input; the
// signatures.
func (a *api) sign(r *http.Request, ps httprouter.Params) (*answer, error) {
	return a.produce(r, ps, "sign", func(c *call, in kms.HeldSignInput) ([]kms.HeldSigned, *base64.Encoding, error) {
		var err error
		if in.Options, err = signOptions(c.p, ps); err != nil {
			return nil, nil, err
		}
		out, err := a.svc.SignWithHeldKey(r.Context(), in)
		return out, encodingOf(in.Options), err
	})
}

// POST hmac/:name[/:hash]: input (base64), or batch_input, with
// algorithm (sha2-256 by default); the HMACs.
func (a *api) hmac(r *http.Request, ps httprouter.Params) (*answer, error) {
	return a.produce(r, ps, "hmac", func(c *call, in kms.HeldSignInput) ([]kms.HeldSigned, *base64.Encoding, error) {
		var err error
		if in.Options.Hash, err = hashParam(c.p, ps, "algorithm"); err != nil {
			return nil, nil, err
		}
		out, err := a.svc.HMACWithHeldKey(r.Context(), in)
		return out, base64.StdEncoding, err
	})
}

// produce serves sign and hmac (what): it reads the items' inputs and
// the call's key_version, has do make their signatures or HMACs, and
// answers them as Vault does (signature or hmac, and key_version).
func (a *api) produce(r *http.Request, ps httprouter.Params, what string,
	do func(c *call, in kms.HeldSignInput) ([]kms.HeldSigned, *base64.Encoding, error)) (*answer, error) {
	c, err := a.readItems(r, "input", what)
	if err != nil {
		return nil, err
	}
	v, err := c.p.integer("key_version")
	if err != nil {
		return nil, err
	}
	in, at := readEach(c, func(it item) ([]byte, error) { return input(it, what) })
	if err := a.admit(r, max(len(in), 1)); err != nil {
		return nil, err
	}
	field := map[string]string{"sign": "signature", "hmac": "hmac"}[what]
	if len(in) > 0 {
		out, enc, err := do(c, kms.HeldSignInput{Name: ps.ByName("name"), KeyVersion: v, Inputs: in})
		if err != nil {
			return nil, err
		}
		putEach(c, at, out, func(o kms.HeldSigned) error { return o.Err }, func(res *result, o kms.HeldSigned) {
			text := vaultct.FormatWith(enc, o.KeyVersion, o.Signature)
			if field == "hmac" {
				res.HMAC = text
			} else {
				res.Signature = text
			}
			res.KeyVersion = o.KeyVersion
		})
	}
	return c.answer(func(res result) map[string]any {
		return map[string]any{field: res.Signature + res.HMAC, "key_version": res.KeyVersion}
	})
}

// POST verify/:name[/:hash]: input with signature or hmac, or
// batch_input; valid for each.
func (a *api) verify(r *http.Request, ps httprouter.Params) (*answer, error) {
	p, err := a.readParams(r)
	if err != nil {
		return nil, err
	}
	field := "signature"
	if p.has("hmac") || firstItemHas(p, "hmac") {
		field = "hmac"
	}
	c, err := newCall(p, field, "verify")
	if err != nil {
		return nil, err
	}
	opts, err := signOptions(p, ps)
	if err != nil {
		return nil, err
	}
	enc := encodingOf(opts)
	if field == "hmac" {
		enc = base64.StdEncoding
		if opts.Hash == "" {
			if opts.Hash, err = p.str("algorithm"); err != nil {
				return nil, err
			}
		}
	}
	in, at := readEach(c, func(it item) (kms.HeldCheck, error) {
		var chk kms.HeldCheck
		var err error
		if chk.Input, err = input(it, "verify"); err != nil {
			return chk, err
		}
		text, err := it.p.required(field, "verify")
		if err != nil {
			return chk, err
		}
		chk.KeyVersion, chk.Signature, chk.Unread = vaultct.ParseWith(enc, text)
		return chk, nil
	})
	if err := a.admit(r, max(len(in), 1)); err != nil {
		return nil, err
	}
	if len(in) > 0 {
		verify := a.svc.VerifyWithHeldKey
		if field == "hmac" {
			verify = a.svc.VerifyHMACWithHeldKey
		}
		out, err := verify(r.Context(), kms.HeldVerifyInput{Name: ps.ByName("name"), Options: opts, Items: in})
		if err != nil {
			return nil, err
		}
		putEach(c, at, out, func(o kms.HeldVerified) error { return o.Err }, func(res *result, o kms.HeldVerified) { res.Valid = &o.Valid })
	}
	for i := range c.results {
		if c.results[i].Valid == nil {
			c.results[i].Valid = new(bool) // Vault's items always carry it
		}
	}
	return c.answer(func(res result) map[string]any { return map[string]any{"valid": *res.Valid} })
}

// firstItemHas reports whether the first item of p's batch_input gives
// name.
func firstItemHas(p params, name string) bool {
	items, ok, err := p.batch()
	return err == nil && ok && items[0].has(name)
}
