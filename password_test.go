package kms_test

import (
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/ringkms/kms"
)

func TestCheckPassword(t *testing.T) {
	type counts struct{ length, upper, lower, special, number int }
	tests := []struct {
		name  string
		pw    string
		valid bool
		want  counts
	}{
		{"empty", "", false, counts{}},
		{"valid", "Passw0rd!", true, counts{9, 1, 6, 1, 1}},
		{"too short", "Pa0!abc", false, counts{7, 1, 4, 1, 1}},
		{"exactly the minimum", "Pa0!abcd", true, counts{8, 1, 5, 1, 1}},
		{"no upper-case letter", "passw0rd!", false, counts{9, 0, 7, 1, 1}},
		{"no lower-case letter", "PASSW0RD!", false, counts{9, 7, 0, 1, 1}},
		{"no digit", "Password!", false, counts{9, 1, 7, 1, 0}},
		{"no special character", "Passw0rdd", false, counts{9, 1, 7, 0, 1}},
		{"a space is special", "Pass w0rd", true, counts{9, 1, 6, 1, 1}},
		{"letters beyond ASCII", "Pässwörd1!", true, counts{10, 1, 7, 1, 1}},
		{"caseless letters count for length only", "漢字漢字A1a!", true, counts{8, 1, 1, 1, 1}},
		{"at the byte limit", "Aa1!" + strings.Repeat("x", kms.PasswordMaxLength-4), true, counts{kms.PasswordMaxLength, 1, kms.PasswordMaxLength - 3, 1, 1}},
		{"over the byte limit", "Aa1!" + strings.Repeat("x", kms.PasswordMaxLength-3), false, counts{kms.PasswordMaxLength + 1, 1, kms.PasswordMaxLength - 2, 1, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := kms.CheckPassword(tt.pw)
			want := kms.PasswordCheck{IsValid: tt.valid, Details: kms.PasswordCheckDetails{
				MinLength: 8, NewPasswordLength: tt.want.length,
				MinUppercase: 1, NewPasswordUppercase: tt.want.upper,
				MinLowercase: 1, NewPasswordLowercase: tt.want.lower,
				MinSpecialChar: 1, NewPasswordSpecialChar: tt.want.special,
				MinNumber: 1, NewPasswordNumber: tt.want.number,
			}}
			if got != want {
				t.Errorf("CheckPassword(%.20q) = %+v, want %+v", tt.pw, got, want)
			}
		})
	}
}

// The JSON of a PasswordCheck is the shape of the "results" of a
// malformed-password error (docs/openapi.json).
func TestPasswordCheckJSON(t *testing.T) {
	b, err := json.Marshal(kms.CheckPassword("Passw0rd!"))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if string(m["isValid"]) != "true" || len(m) != 2 {
		t.Fatalf("PasswordCheck JSON = %s, want isValid and details", b)
	}
	var details map[string]int
	if err := json.Unmarshal(m["details"], &details); err != nil {
		t.Fatal(err)
	}
	var names []string
	for k := range details {
		names = append(names, k)
	}
	sort.Strings(names)
	want := []string{"minLength", "minLowercase", "minNumber", "minSpecialChar", "minUppercase",
		"newPasswordLength", "newPasswordLowercase", "newPasswordNumber", "newPasswordSpecialChar", "newPasswordUppercase"}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("details members = %v, want %v", names, want)
	}
	if details["minLength"] != 8 || details["newPasswordLength"] != 9 {
		t.Fatalf("details = %v", details)
	}
}
