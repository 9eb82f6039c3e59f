package keytype

import (
	"errors"
	"sync"
	"testing"
)

// specs are a Spec of every type and parameter set a test runs over.
var specs = func() []Spec {
	var out []Spec
	for _, t := range types {
		switch t {
		case HMAC:
			for _, n := range []int{0, 48, MaxHMACKeySize} {
				out = append(out, mustSpec(t, Params{KeySize: n}))
			}
		case MLDSA:
			for _, p := range parameterSets {
				out = append(out, mustSpec(t, Params{ParameterSet: p}))
			}
		default:
			out = append(out, mustSpec(t, Params{}))
		}
	}
	return out
}()

func mustSpec(t Type, p Params) Spec {
	s, err := NewSpec(t, p)
	if err != nil {
		panic(err)
	}
	return s
}

// name names a spec for a subtest.
func name(s Spec) string {
	switch s.t {
	case HMAC:
		return string(s.t) + "-" + itoa(s.params.KeySize)
	case MLDSA:
		return string(s.t) + "-" + string(s.params.ParameterSet)
	}
	return string(s.t)
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}

// keys caches one generated key per spec: RSA keys take long to make.
var keys sync.Map // name(spec) -> *Key

// testKey returns a key of spec, generated once per test binary.
func testKey(t testing.TB, s Spec) *Key {
	t.Helper()
	if k, ok := keys.Load(name(s)); ok {
		return k.(*Key)
	}
	m, err := Generate(s)
	if err != nil {
		t.Fatalf("Generate(%s) = %v", name(s), err)
	}
	k, err := Load(s, m)
	if err != nil {
		t.Fatalf("Load(%s, Generate()) = %v", name(s), err)
	}
	got, _ := keys.LoadOrStore(name(s), k)
	return got.(*Key)
}

// wantErr fails t unless err wraps kind.
func wantErr(t testing.TB, what string, err, kind error) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Errorf("%s: err = %v, want %v", what, err, kind)
	}
}
