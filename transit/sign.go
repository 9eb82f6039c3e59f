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
	var err error
	if o.Hash, err = hashParam(p, ps, "hash_algorithm"); err != nil {
		return o, err
	}
	if o.Prehashed, err = p.boolean("prehashed"); err != nil {
		return o, err
	}
	if o.Marshaling, err = p.str("marshaling_algorithm"); err != nil {
		return o, err
	}
	if o.Algorithm, err = p.str("signature_algorithm"); err != nil {
		return o, err
	}
	o.SaltLength, err = p.str("salt_length")
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

// inputs returns the input of each item, decoded from base64, failing
// those without one or whose input is not base64.
func inputs(items []item, results []result, errs []error, what string) (in [][]byte, at []int) {
	for i, it := range items {
		results[i].Reference = it.ref
		text, err := it.p.required("input", what)
		if err != nil {
			failed(results, errs, i, err)
			continue
		}
		b, err := base64.StdEncoding.DecodeString(text)
		if err != nil {
			failed(results, errs, i, kms.Errorf(kms.KindInvalid, "unable to decode input as base64: %v", err))
			continue
		}
		in, at = append(in, b), append(at, i)
	}
	return in, at
}

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
	in, at := inputs(c.items, c.results, c.errs, what)
	if err := a.admit(r, max(len(in), 1)); err != nil {
		return nil, err
	}
	if len(in) > 0 {
		out, enc, err := do(c, kms.HeldSignInput{Name: ps.ByName("name"), KeyVersion: v, Inputs: in})
		if err != nil {
			return nil, err
		}
		for j, o := range out {
			i := at[j]
			if o.Err != nil {
				failed(c.results, c.errs, i, o.Err)
				continue
			}
			text := vaultct.FormatWith(enc, o.KeyVersion, o.Signature)
			if what == "hmac" {
				c.results[i].HMAC = text
			} else {
				c.results[i].Signature = text
			}
			c.results[i].KeyVersion = o.KeyVersion
		}
	}
	if c.batched {
		return batchAnswer(c.partial, c.results, c.errs), nil
	}
	if c.errs[0] != nil {
		return nil, c.errs[0]
	}
	res := c.results[0]
	if what == "hmac" {
		return &answer{data: map[string]any{"hmac": res.HMAC, "key_version": res.KeyVersion}}, nil
	}
	return &answer{data: map[string]any{"signature": res.Signature, "key_version": res.KeyVersion}}, nil
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
	if field == "hmac" && opts.Hash == "" {
		if opts.Hash, err = p.str("algorithm"); err != nil {
			return nil, err
		}
	}
	in, at := inputs(c.items, c.results, c.errs, "verify")
	checks := make([]kms.HeldCheck, 0, len(in))
	valid := at[:0:0]
	for j, input := range in {
		i := at[j]
		text, err := c.items[i].p.required(field, "verify")
		if err != nil {
			failed(c.results, c.errs, i, err)
			continue
		}
		chk := kms.HeldCheck{Input: input}
		enc := base64.StdEncoding
		if field == "signature" {
			enc = encodingOf(opts)
		}
		chk.KeyVersion, chk.Signature, chk.Unread = vaultct.ParseWith(enc, text)
		checks, valid = append(checks, chk), append(valid, i)
	}
	if err := a.admit(r, max(len(checks), 1)); err != nil {
		return nil, err
	}
	if len(checks) > 0 {
		var out []kms.HeldVerified
		if field == "hmac" {
			out, err = a.svc.VerifyHMACWithHeldKey(r.Context(), ps.ByName("name"), opts.Hash, checks)
		} else {
			out, err = a.svc.VerifyWithHeldKey(r.Context(), kms.HeldVerifyInput{Name: ps.ByName("name"), Options: opts, Items: checks})
		}
		if err != nil {
			return nil, err
		}
		for j, o := range out {
			i := valid[j]
			if o.Err != nil {
				failed(c.results, c.errs, i, o.Err)
				continue
			}
			c.results[i].Valid = &o.Valid
		}
	}
	if c.batched {
		for i := range c.results {
			if c.results[i].Valid == nil {
				c.results[i].Valid = new(bool) // Vault's items always carry it
			}
		}
		return batchAnswer(c.partial, c.results, c.errs), nil
	}
	if c.errs[0] != nil {
		return nil, c.errs[0]
	}
	return &answer{data: map[string]any{"valid": *c.results[0].Valid}}, nil
}

// firstItemHas reports whether the first item of p's batch_input gives
// name.
func firstItemHas(p params, name string) bool {
	items, ok, err := p.batch()
	return err == nil && ok && items[0].has(name)
}
