package jsonenc

import (
	"encoding/json"
	"testing"
)

// TestAppendMatchesMarshal holds every appender to what json.Marshal
// writes for the same value.
func TestAppendMatchesMarshal(t *testing.T) {
	values := []any{
		"", "plain", `quote " and \ backslash`, "<html>&", "tab\there", "ünïcödé", "\x00\x1f", "\u2028",
		true, false, 0, -1, 1 << 40, int64(-5), uint64(1<<63 + 1), 1.5, nil, []any{1, "a"},
		map[string]any{"b": 1, "a": "x", "c": map[string]any{"z": true}},
	}
	for _, v := range values {
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := AppendValue([]byte("prefix"), v)
		if err != nil || string(got) != "prefix"+string(want) {
			t.Errorf("AppendValue(%#v) = %s, %v; want prefix%s", v, got, err, want)
		}
		if s, ok := v.(string); ok {
			if got := AppendString(nil, s); string(got) != string(want) {
				t.Errorf("AppendString(%q) = %s, want %s", s, got, want)
			}
			if Plain(s) && string(want) != `"`+s+`"` { // false is safe: AppendString then asks json.Marshal
				t.Errorf("Plain(%q) = true, but json.Marshal writes %s", s, want)
			}
		}
	}
	for _, m := range []map[string]any{nil, {}, {"b": 2, "a": []any{}, "é": "<"}} {
		want, _ := json.Marshal(m)
		if got, err := AppendObject(nil, m); err != nil || string(got) != string(want) {
			t.Errorf("AppendObject(%v) = %s, %v; want %s", m, got, err, want)
		}
	}
	if _, err := AppendValue(nil, func() {}); err == nil {
		t.Error("AppendValue(func) = nil error, want json.Marshal's")
	}
}

func TestScalarAndCanonical(t *testing.T) {
	for in, want := range map[string]bool{`"a"`: true, `1`: true, `-2`: true, `true`: true, `false`: true, `null`: false, `{}`: false, `[]`: false, ``: false} {
		if got := Scalar([]byte(in)); got != want {
			t.Errorf("Scalar(%s) = %v, want %v", in, got, want)
		}
	}
	for in, want := range map[string]string{
		`{"b":1,"a":2}`:        `{"a":2,"b":1}`,
		`1.50`:                 `1.50`,
		` "x" `:                `"x"`,
		`not json`:             `not json`,
		`{"n":1e3,"a":[2, 1]}`: `{"a":[2,1],"n":1e3}`,
	} {
		if got := Canonical([]byte(in)); string(got) != want {
			t.Errorf("Canonical(%s) = %s, want %s", in, got, want)
		}
	}
}
