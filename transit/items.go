package transit

import (
	"encoding/base64"
	"net/http"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/httpedge"
)

// Calls of items: the crypto and signature routes take one item (its
// fields at the top level) or batch_input, each item with its reference;
// each item is read, worked on by the Service and answered on its own,
// and a batch is answered in batch_results with Vault's status: 200 when
// every item succeeded, else 400 when an item's input was at fault (500
// when only the service was), or the partial_failure_response_code given
// when some items succeeded.

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

// readEach reads each item of c with read, failing those it refuses; it
// answers what it read, with the index of the item of each.
func readEach[T any](c *call, read func(it item) (T, error)) (out []T, at []int) {
	for i, it := range c.items {
		c.results[i].Reference = it.ref
		v, err := read(it)
		if err != nil {
			failed(c.results, c.errs, i, err)
			continue
		}
		out, at = append(out, v), append(at, i)
	}
	return out, at
}

// putEach puts the Service's answer of each item read (out, for the
// items at the indexes at) into c's results: put fills in what an answer
// that errOf finds no error in holds; one with an error fails its item.
func putEach[T any](c *call, at []int, out []T, errOf func(T) error, put func(res *result, o T)) {
	for j, o := range out {
		i := at[j]
		if err := errOf(o); err != nil {
			failed(c.results, c.errs, i, err)
			continue
		}
		put(&c.results[i], o)
	}
}

// answer answers c: its one item's data (single) or its error, or the
// batch's results.
func (c *call) answer(single func(res result) map[string]any) (*answer, error) {
	if c.batched {
		return batchAnswer(c.partial, c.results, c.errs), nil
	}
	if c.errs[0] != nil {
		return nil, c.errs[0]
	}
	return &answer{data: single(c.results[0])}, nil
}

// decoded returns an item's base64 field name, required (what names the
// call in the error), decoded.
func decoded(p params, name, what string) ([]byte, error) {
	text, err := p.required(name, what)
	if err != nil {
		return nil, err
	}
	b, err := base64.StdEncoding.DecodeString(text)
	if err != nil {
		return nil, kms.Errorf(kms.KindInvalid, "unable to decode %s as base64: %v", name, err)
	}
	return b, nil
}
