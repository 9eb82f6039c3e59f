package transit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/httpedge"
)

// params are the parameters of a request's body by name, as Vault reads
// them: a JSON object, with any Content-Type (Vault's clients send none),
// and an empty body for none. Values are read as Vault's field types
// read them: an integer may come as a number or a string of digits, a
// boolean as true/false or a string strconv.ParseBool takes, a duration
// as seconds or a duration string. A parameter given null is absent.
type params map[string]json.RawMessage

// readParams reads the parameters of r's body.
func (a *api) readParams(r *http.Request) (params, error) {
	if err := a.edge.CheckLength(r); err != nil {
		return nil, err
	}
	var body bytes.Buffer
	if r.Body != nil && r.Body != http.NoBody {
		if err := httpedge.ReadBody(&body, r.Body); err != nil {
			return nil, err
		}
	}
	out := params{}
	if len(bytes.TrimSpace(body.Bytes())) == 0 {
		return out, nil
	}
	if err := json.Unmarshal(body.Bytes(), &out); err != nil {
		return nil, kms.Errorf(kms.KindInvalid, "failed to parse JSON input: %v", err)
	}
	return out, nil
}

// has reports whether name is given (and not null).
func (p params) has(name string) bool {
	v, ok := p[name]
	return ok && string(v) != "null"
}

// str returns the string name ("" when absent).
func (p params) str(name string) (string, error) {
	if !p.has(name) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(p[name], &s); err != nil {
		return "", kms.Errorf(kms.KindInvalid, "parameter %q: want a string", name)
	}
	return s, nil
}

// required returns the string name of an item, which a call to what
// (encrypt, decrypt) needs: missing, it is an error.
func (p params) required(name, what string) (string, error) {
	if !p.has(name) {
		return "", kms.Errorf(kms.KindInvalid, "missing %s to %s", name, what)
	}
	return p.str(name)
}

// integer returns the integer name (0 when absent).
func (p params) integer(name string) (int, error) {
	if !p.has(name) {
		return 0, nil
	}
	raw := p[name]
	var s string
	if json.Unmarshal(raw, &s) == nil {
		raw = []byte(strings.TrimSpace(s))
	}
	n, err := strconv.Atoi(string(raw))
	if err != nil {
		return 0, kms.Errorf(kms.KindInvalid, "parameter %q: want an integer", name)
	}
	return n, nil
}

// boolean returns the boolean name (false when absent).
func (p params) boolean(name string) (bool, error) {
	if !p.has(name) {
		return false, nil
	}
	raw := p[name]
	var s string
	if json.Unmarshal(raw, &s) == nil {
		raw = []byte(s)
	}
	b, err := strconv.ParseBool(strings.TrimSpace(string(raw)))
	if err != nil {
		return false, kms.Errorf(kms.KindInvalid, "parameter %q: want a boolean", name)
	}
	return b, nil
}

// setting is a parameter that a call leaves as it is unless given: its
// name, and where its value goes.
type setting[T any] struct {
	name string
	dst  **T
}

// readGiven reads with get each setting that p gives into its dst, and
// leaves the others nil.
func readGiven[T any](p params, get func(name string) (T, error), settings ...setting[T]) error {
	for _, s := range settings {
		if !p.has(s.name) {
			continue
		}
		v, err := get(s.name)
		if err != nil {
			return err
		}
		*s.dst = &v
	}
	return nil
}

// seconds returns the duration name, given as whole seconds (a number or
// a string of digits) or as a duration string ("720h", "90m", "30d"), as
// Vault's duration fields take it; ok is false when absent.
func (p params) seconds(name string) (d time.Duration, ok bool, err error) {
	if !p.has(name) {
		return 0, false, nil
	}
	bad := kms.Errorf(kms.KindInvalid, "parameter %q: want a duration, in seconds or as \"720h\"", name)
	raw := p[name]
	var s string
	if json.Unmarshal(raw, &s) != nil {
		s = string(raw) // a number
	}
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 || n > int64(time.Duration(1<<62)/time.Second) {
			return 0, false, bad
		}
		return time.Duration(n) * time.Second, true, nil
	}
	if days, found := strings.CutSuffix(s, "d"); found {
		n, err := strconv.ParseInt(days, 10, 64)
		if err != nil || n < 0 || n > 100_000 {
			return 0, false, bad
		}
		return time.Duration(n) * 24 * time.Hour, true, nil
	}
	d, err = time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, false, bad
	}
	return d, true, nil
}

// batch returns the items of batch_input; ok is false when it is absent.
func (p params) batch() (items []params, ok bool, err error) {
	if !p.has("batch_input") {
		return nil, false, nil
	}
	if err := json.Unmarshal(p["batch_input"], &items); err != nil {
		return nil, false, kms.Errorf(kms.KindInvalid, "failed to parse batch input: want an array of objects")
	}
	for i, it := range items {
		if it == nil {
			return nil, false, kms.Errorf(kms.KindInvalid, "failed to parse batch input: [%d] expected a map", i)
		}
	}
	if len(items) == 0 {
		return nil, false, kms.Errorf(kms.KindInvalid, "missing batch input to process")
	}
	if len(items) > kms.MaxBatchItems {
		return nil, false, kms.Errorf(kms.KindInvalid, "a batch has at most %d items, not %d", kms.MaxBatchItems, len(items))
	}
	return items, true, nil
}

// unsupported refuses the parameters of Vault's engine that ringkms does
// not serve when they ask for something: a non-empty string or a true
// boolean among names.
func (p params) unsupported(names ...string) error {
	for _, name := range names {
		if !p.has(name) {
			continue
		}
		switch v := strings.TrimSpace(string(p[name])); v {
		case `""`, "false", `"false"`, "0", `"0"`:
			continue
		}
		return kms.Errorf(kms.KindInvalid, "%s is not supported: ringkms's transit keys have no key derivation, convergent encryption or plaintext backup; bind data to a ciphertext with associated_data (docs/TRANSIT.md)", name)
	}
	return nil
}

// into reads the parameters fields names into the variables they point
// to, each as its type reads (a *string with str, an *int with integer, a
// *bool with boolean, a *time.Duration with seconds), and stops at the
// first that does not read, in name order.
func (p params) into(fields map[string]any) error {
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		dst := fields[name]
		var err error
		switch v := dst.(type) {
		case *string:
			*v, err = p.str(name)
		case *int:
			*v, err = p.integer(name)
		case *bool:
			*v, err = p.boolean(name)
		case *time.Duration:
			*v, _, err = p.seconds(name)
		default:
			panic(fmt.Sprintf("transit: parameter %s read into a %T", name, dst))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// newKeyParams reads, for a call that may make a key (create, and
// encrypt's upsert), the key's type and parameters: type (aes256-gcm96
// when absent), key_size, parameter_set, exportable, auto_rotate_period.
// The Service checks them.
func (p params) newKeyParams(name string) (kms.CreateHeldKeyInput, error) {
	in := kms.CreateHeldKeyInput{Name: name}
	err := p.into(map[string]any{"type": &in.Type, "key_size": &in.KeySize, "parameter_set": &in.ParameterSet,
		"exportable": &in.Exportable, "auto_rotate_period": &in.RotationPeriod})
	return in, err
}
