package transit

import (
	"encoding/base64"
	"net/http"

	"github.com/julienschmidt/httprouter"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/httpedge"
	"github.com/ringkms/kms/internal/vaultct"
)

// The crypto routes: encrypt, decrypt, rewrap, datakey. A call gives one
// item (plaintext or ciphertext at the top level) or batch_input, each
// with associated_data (base64) bound to its ciphertext; a batch
// is answered in batch_results, each item with its result or its error,
// and with Vault's status: 200 when every item succeeded, else 400 when an
// item's input was at fault (500 when only the service was), or the
// partial_failure_response_code given when some items succeeded.

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

// item is one item of a call: its parameters, and the reference Vault
// echoes back.
type item struct {
	p   params
	ref string
}

// itemsOf returns the items of a call: batch_input, or the call's own
// parameters as its one item (batched false), and the status its
// partial_failure_response_code asks for (0 when absent). Every item's
// deriving parameters are refused, and so is a status the answer cannot
// take (partialFailureCode): all before any item is worked on.
func itemsOf(p params) (items []item, batched bool, partial int, err error) {
	if partial, err = partialFailureCode(p); err != nil {
		return nil, false, 0, err
	}
	list, batched, err := p.batch()
	if err != nil {
		return nil, false, 0, err
	}
	if !batched {
		list = []params{p}
	}
	items = make([]item, len(list))
	for i, ip := range list {
		if err := ip.unsupported(deriving...); err != nil {
			return nil, false, 0, err
		}
		ref, err := ip.str("reference")
		if err != nil {
			return nil, false, 0, err
		}
		items[i] = item{p: ip, ref: ref}
	}
	return items, batched, partial, nil
}

// partialFailureCode returns the status of p's
// partial_failure_response_code (0 when absent): one that Vault documents
// for it, a 2xx, 4xx or 5xx, and that carries the batch's results. Any
// other (an informational 1xx, 101 Switching Protocols among them, a
// redirect, 204 and 205, which have no body, or no status at all) is
// refused: the answer of a batch whose items were worked on must reach
// the caller.
func partialFailureCode(p params) (int, error) {
	if !p.has("partial_failure_response_code") {
		return 0, nil
	}
	code, err := p.integer("partial_failure_response_code")
	if err != nil {
		return 0, err
	}
	if code < 200 || code > 599 || code/100 == 3 || code == http.StatusNoContent || code == http.StatusResetContent {
		return 0, kms.Errorf(kms.KindInvalid,
			"partial_failure_response_code %d is not served: give a 2xx status with a body (200, 207...), a 4xx or a 5xx", code)
	}
	return code, nil
}

// result is one item of batch_results.
type result struct {
	Ciphertext string  `json:"ciphertext,omitempty"`
	Plaintext  *string `json:"plaintext,omitempty"`
	Signature  string  `json:"signature,omitempty"`
	HMAC       string  `json:"hmac,omitempty"`
	Valid      *bool   `json:"valid,omitempty"`
	KeyVersion int     `json:"key_version,omitempty"`
	Error      string  `json:"error,omitempty"`
	Reference  string  `json:"reference"`
}

// batchAnswer answers a batch's results: 200 when no item failed, else
// Vault's status for the failures (400 when an input was at fault, 500
// when only the service was), or partial, the
// partial_failure_response_code the call gave (itemsOf), when some items
// succeeded.
func batchAnswer(partial int, results []result, errs []error) *answer {
	status, ok := 0, false
	for _, err := range errs {
		switch {
		case err == nil:
			ok = true
		case statusOf(err, false) >= 500:
			if status == 0 {
				status = http.StatusInternalServerError
			}
		default:
			status = http.StatusBadRequest
		}
	}
	if status != 0 && ok && partial != 0 {
		status = partial
	}
	return &answer{status: status, data: map[string]any{"batch_results": results}}
}

// failed fills results[i] with err, and notes it.
func failed(results []result, errs []error, i int, err error) {
	results[i].Error = httpedge.Message(err, statusOf(err, false))
	errs[i] = err
}

// POST encrypt/:name: plaintext (base64) and key_version, or batch_input.
// A key that does not exist is made, for a caller that may create it
// (keyring.<name>.create), as Vault's encrypt makes it.
func (a *api) encrypt(r *http.Request, ps httprouter.Params) (*answer, error) {
	p, err := a.readParams(r)
	if err != nil {
		return nil, err
	}
	newKey, err := p.newKeyParams(ps.ByName("name"))
	if err != nil {
		return nil, err
	}
	items, batched, partial, err := itemsOf(p)
	if err != nil {
		return nil, err
	}
	if !batched && !p.has("plaintext") {
		return nil, kms.Errorf(kms.KindInvalid, "missing plaintext to encrypt")
	}
	results, errs := make([]result, len(items)), make([]error, len(items))
	var in []kms.HeldPlaintext
	var at []int // the item of each entry of in
	for i, it := range items {
		results[i].Reference = it.ref
		text, err := it.p.required("plaintext", "encrypt")
		if err != nil {
			failed(results, errs, i, err)
			continue
		}
		plain, err := base64.StdEncoding.DecodeString(text)
		if err != nil {
			failed(results, errs, i, kms.Errorf(kms.KindInvalid, "%v", err))
			continue
		}
		v, err := it.p.integer("key_version")
		if err != nil {
			failed(results, errs, i, err)
			continue
		}
		ad, err := associatedData(it.p)
		if err != nil {
			failed(results, errs, i, err)
			continue
		}
		in = append(in, kms.HeldPlaintext{Plaintext: plain, KeyVersion: v, AssociatedData: ad})
		at = append(at, i)
	}
	if err := a.admit(r, max(len(in), 1)); err != nil {
		return nil, err
	}
	if len(in) > 0 {
		out, err := a.svc.EncryptWithHeldKey(r.Context(), kms.HeldEncryptInput{Name: ps.ByName("name"), Items: in, Create: true, NewKey: newKey})
		if err != nil {
			return nil, err
		}
		putCiphertexts(results, errs, at, out)
	}
	return ciphertextAnswer(partial, batched, results, errs)
}

// putCiphertexts puts the answers out of the service, for the items at
// the indexes at, into results (or errs).
func putCiphertexts(results []result, errs []error, at []int, out []kms.HeldCiphertext) {
	for j, o := range out {
		i := at[j]
		if o.Err != nil {
			failed(results, errs, i, o.Err)
			continue
		}
		results[i].Ciphertext, results[i].KeyVersion = vaultct.Format(o.KeyVersion, o.Ciphertext), o.KeyVersion
	}
}

// ciphertextAnswer is the answer of encrypt and rewrap: the one
// ciphertext, or the batch's (partial: batchAnswer).
func ciphertextAnswer(partial int, batched bool, results []result, errs []error) (*answer, error) {
	if !batched {
		if errs[0] != nil {
			return nil, errs[0]
		}
		return &answer{data: map[string]any{"ciphertext": results[0].Ciphertext, "key_version": results[0].KeyVersion}}, nil
	}
	return batchAnswer(partial, results, errs), nil
}

// ciphertexts returns the ciphertext of each item (vault:v<N>:<base64>,
// read into its version and what the key made) with its associated
// data, failing those without one. A ciphertext that does not read goes
// to the service as unread, which fails and records it.
func ciphertexts(items []item, results []result, errs []error, what string) (cts []kms.HeldSealed, at []int) {
	for i, it := range items {
		results[i].Reference = it.ref
		ct, err := it.p.required("ciphertext", what)
		if err != nil {
			failed(results, errs, i, err)
			continue
		}
		ad, err := associatedData(it.p)
		if err != nil {
			failed(results, errs, i, err)
			continue
		}
		sealed := kms.HeldSealed{AssociatedData: ad}
		sealed.KeyVersion, sealed.Ciphertext, sealed.Unread = vaultct.Parse(ct)
		cts, at = append(cts, sealed), append(at, i)
	}
	return cts, at
}

// call is a request of items: its parameters, its items (batch_input,
// or the request itself), its partial_failure_response_code (itemsOf),
// and room for the items' results.
type call struct {
	p       params
	partial int
	items   []item
	batched bool
	results []result
	errs    []error
}

// readItems reads a request of items, which must name field when there
// is no batch; what names the call in the error.
func (a *api) readItems(r *http.Request, field, what string) (*call, error) {
	p, err := a.readParams(r)
	if err != nil {
		return nil, err
	}
	return newCall(p, field, what)
}

// newCall is the call of items of the parameters p (readItems).
func newCall(p params, field, what string) (*call, error) {
	c := &call{p: p}
	var err error
	if c.items, c.batched, c.partial, err = itemsOf(p); err != nil {
		return nil, err
	}
	if !c.batched && !p.has(field) {
		return nil, kms.Errorf(kms.KindInvalid, "missing %s to %s", field, what)
	}
	c.results, c.errs = make([]result, len(c.items)), make([]error, len(c.items))
	return c, nil
}

// POST decrypt/:name: ciphertext, or batch_input; the plaintexts in
// base64.
func (a *api) decrypt(r *http.Request, ps httprouter.Params) (*answer, error) {
	c, err := a.readItems(r, "ciphertext", "decrypt")
	if err != nil {
		return nil, err
	}
	partial, items, batched, results, errs := c.partial, c.items, c.batched, c.results, c.errs
	cts, at := ciphertexts(items, results, errs, "decrypt")
	if err := a.admit(r, max(len(cts), 1)); err != nil {
		return nil, err
	}
	if len(cts) > 0 {
		out, err := a.svc.DecryptWithHeldKey(r.Context(), kms.HeldDecryptInput{Name: ps.ByName("name"), Items: cts})
		if err != nil {
			return nil, err
		}
		for j, o := range out {
			i := at[j]
			if o.Err != nil {
				failed(results, errs, i, o.Err)
				continue
			}
			text := base64.StdEncoding.EncodeToString(o.Plaintext)
			clear(o.Plaintext)
			results[i].Plaintext = &text
		}
	}
	if !batched {
		if errs[0] != nil {
			return nil, errs[0]
		}
		return &answer{data: map[string]any{"plaintext": *results[0].Plaintext}}, nil
	}
	empty := ""
	for i := range results {
		if results[i].Plaintext == nil {
			results[i].Plaintext = &empty // Vault's items always carry it
		}
	}
	return batchAnswer(partial, results, errs), nil
}

// POST rewrap/:name: ciphertext and key_version, or batch_input; the new
// ciphertexts.
func (a *api) rewrap(r *http.Request, ps httprouter.Params) (*answer, error) {
	c, err := a.readItems(r, "ciphertext", "rewrap")
	if err != nil {
		return nil, err
	}
	partial, items, batched, results, errs := c.partial, c.items, c.batched, c.results, c.errs
	cts, at := ciphertexts(items, results, errs, "rewrap")
	in := make([]kms.HeldRewrapItem, 0, len(cts))
	valid := at[:0:0]
	for j, ct := range cts {
		v, err := items[at[j]].p.integer("key_version")
		if err != nil {
			failed(results, errs, at[j], err)
			continue
		}
		in, valid = append(in, kms.HeldRewrapItem{HeldSealed: ct, NewVersion: v}), append(valid, at[j])
	}
	if err := a.admit(r, max(len(in), 1)); err != nil {
		return nil, err
	}
	if len(in) > 0 {
		out, err := a.svc.RewrapWithHeldKey(r.Context(), kms.HeldRewrapInput{Name: ps.ByName("name"), Items: in})
		if err != nil {
			return nil, err
		}
		putCiphertexts(results, errs, valid, out)
	}
	return ciphertextAnswer(partial, batched, results, errs)
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
