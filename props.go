package kms

import "encoding/json"

// MaxPropsBytes caps one props object, as JSON: the props of API keys,
// Users, Accounts, key rings and their keys, and the props of an activity
// that POST /auth/validate records. A larger one is an Invalid error, so
// that no record, and no page of a list, grows with what a caller sends.
const MaxPropsBytes = 16 << 10

// checkProps refuses a props object that is larger than MaxPropsBytes as
// JSON, or that cannot be encoded; field names it in the error. Every
// props object that a caller gives goes through it before it is stored.
func checkProps(field string, props map[string]any) error {
	if len(props) == 0 {
		return nil
	}
	b, err := json.Marshal(props)
	if err != nil {
		return Errorf(KindInvalid, "%s cannot be encoded: %v", field, err)
	}
	if len(b) > MaxPropsBytes {
		return Errorf(KindInvalid, "%s is %d bytes as JSON, more than the %d allowed", field, len(b), MaxPropsBytes)
	}
	return nil
}

func orEmpty(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}
