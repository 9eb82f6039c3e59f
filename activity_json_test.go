package kms

import (
	"encoding/json"
	"testing"
)

// TestActivityJSONMatchesEncodingJSON checks that the journal's encoder
// writes what json.Marshal writes, for records with every kind of prop
// and string that needs escaping.
func TestActivityJSONMatchesEncodingJSON(t *testing.T) {
	acts := []*Activity{
		{ID: "01a2", KeyID: "k", CreatedAt: 1, Action: "encrypt", Valid: true, Props: map[string]any{}, Seq: 1},
		{ID: "01a2", KeyID: "k", AccountID: "a", CreatedAt: -5, Action: "decrypt", Ring: "r", Props: nil, Seq: 2, Prev: "ab", Digest: "cd"},
		{KeyID: `quote " back \ slash`, Action: "<script>&", Ring: "é\u2028\x01", Valid: true, Seq: 3,
			Props: map[string]any{
				"b": true, "i": 42, "i64": int64(-7), "u": uint64(1 << 63), "f": 1.5, "big": 1e21, "small": 1e-7,
				"s": "plain", "esc": "tab\there \"q\" <b>", "nil": nil, "list": []any{1, "x"}, "map": map[string]any{"z": 1, "a": "b"},
				"num": json.Number("12.50"), "strs": []string{"a"}, "zz\u00e9": "k", "": "empty name",
				"p1": 1, "p2": 2, "p3": 3, "p4": 4, "p5": 5, "p6": 6, "p7": 7, "p8": 8, "p9": 9,
			}},
	}
	for _, a := range acts {
		wantMarshalJSON(t, a, a.appendJSON, "")
	}
	if _, err := (&Activity{Props: map[string]any{"c": make(chan int)}}).appendJSON(nil); err == nil {
		t.Error("appendJSON of a channel prop = nil error, want json's error")
	}
}

// TestActivityQueryScope: the JSON of an activityQuery, which binds
// cursors to their filters, holds the filter's members in their order,
// with props as canonical JSON in place of the filter's own.
func TestActivityQueryScope(t *testing.T) {
	start, end, valid := int64(1), int64(2), false
	q := &activityQuery{ActivityFilter: ActivityFilter{AccountUID: "u", AccountID: "a", Action: "encrypt", Ring: "r",
		KeyID: "k", Start: &start, End: &end, Valid: &valid, Props: map[string]any{"ignored": true}},
		Props: map[string]json.RawMessage{"n": json.RawMessage(`1`)}, scope: "x", served: "y", none: true}
	got, err := json.Marshal(q)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"accountUid":"u","accountId":"a","action":"encrypt","ring":"r","keyid":"k","start":1,"end":2,"valid":false,"props":{"n":1}}`
	if string(got) != want {
		t.Errorf("json.Marshal(activityQuery) = %s, want %s", got, want)
	}
}
