package kms_test

import (
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/commonpass"
)

// TestCheckPassword: a password needs a length and must not be one that
// guessing tries first; no kind of character is required, so a long
// passphrase of lower-case words is valid.
func TestCheckPassword(t *testing.T) {
	type counts struct{ length, upper, lower, special, number int }
	tests := []struct {
		name   string
		pw     string
		valid  bool
		want   counts
		common bool
	}{
		{"empty", "", false, counts{}, false},
		{"valid", "Passw0rd!", true, counts{9, 1, 6, 1, 1}, false},
		{"too short", "Pa0!abc", false, counts{7, 1, 4, 1, 1}, false},
		{"exactly the minimum", "Pa0!abcd", true, counts{8, 1, 5, 1, 1}, false},
		{"a passphrase without upper-case letter, digit or special", "correcthorsebatterystaple", true, counts{25, 0, 25, 0, 0}, false},
		{"a passphrase with spaces", "correct horse battery staple", true, counts{28, 0, 25, 3, 0}, false},
		{"no lower-case letter", "PASSW0RD!", true, counts{9, 7, 0, 1, 1}, false},
		{"no digit", "Lighthouse!", true, counts{11, 1, 9, 1, 0}, false},
		{"no special character", "Passw0rdd", true, counts{9, 1, 7, 0, 1}, false},
		{"digits only, not common", "20481024", true, counts{8, 0, 0, 0, 8}, false},
		{"common", "password123", false, counts{11, 0, 8, 0, 3}, true},
		{"common in another case", "Password123", false, counts{11, 1, 7, 0, 3}, true},
		{"common with specials", "P@ssw0rd", false, counts{8, 1, 5, 1, 1}, true},
		{"common digits", "12345678", false, counts{8, 0, 0, 0, 8}, true},
		{"one character repeated", "zzzzzzzzzzzzzzzzzzzz", false, counts{20, 0, 20, 0, 0}, true},
		{"letters beyond ASCII", "Pässwörd1!", true, counts{10, 1, 7, 1, 1}, false},
		{"caseless letters count for length only", "漢字漢字A1a!", true, counts{8, 1, 1, 1, 1}, false},
		{"at the byte limit", "Aa1!" + strings.Repeat("x", kms.PasswordMaxLength-4), true, counts{kms.PasswordMaxLength, 1, kms.PasswordMaxLength - 3, 1, 1}, false},
		{"over the byte limit", "Aa1!" + strings.Repeat("x", kms.PasswordMaxLength-3), false, counts{kms.PasswordMaxLength + 1, 1, kms.PasswordMaxLength - 2, 1, 1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := kms.CheckPassword(tt.pw)
			want := kms.PasswordCheck{IsValid: tt.valid, Details: kms.PasswordCheckDetails{
				MinLength: 8, NewPasswordLength: tt.want.length,
				MinUppercase: 0, NewPasswordUppercase: tt.want.upper,
				MinLowercase: 0, NewPasswordLowercase: tt.want.lower,
				MinSpecialChar: 0, NewPasswordSpecialChar: tt.want.special,
				MinNumber: 0, NewPasswordNumber: tt.want.number,
				Common: tt.common,
			}}
			if got != want {
				t.Errorf("CheckPassword(%.20q) = %+v, want %+v", tt.pw, got, want)
			}
			if (got.Reason() == "") != tt.valid {
				t.Errorf("CheckPassword(%.20q).Reason() = %q, want one exactly when it is invalid", tt.pw, got.Reason())
			}
		})
	}
}

// TestCheckPasswordCommonList: every password of the built-in list is
// refused, in any letter case, with a reason that says so.
func TestCheckPasswordCommonList(t *testing.T) {
	for _, pw := range commonpass.List() {
		for _, v := range []string{pw, strings.ToUpper(pw)} {
			if c := kms.CheckPassword(v); c.IsValid || !c.Details.Common || !strings.Contains(c.Reason(), "common") {
				t.Errorf("CheckPassword(%q) = %+v, %q; want refused as common", v, c, c.Reason())
			}
		}
	}
}

// The JSON of a PasswordCheck: isValid, and details with each rule's
// minimum and the password's count, and commonPassword.
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
	var details map[string]any
	if err := json.Unmarshal(m["details"], &details); err != nil {
		t.Fatal(err)
	}
	var names []string
	for k := range details {
		names = append(names, k)
	}
	sort.Strings(names)
	want := []string{"commonPassword", "minLength", "minLowercase", "minNumber", "minSpecialChar", "minUppercase",
		"newPasswordLength", "newPasswordLowercase", "newPasswordNumber", "newPasswordSpecialChar", "newPasswordUppercase"}
	if !reflect.DeepEqual(names, want) {
		t.Fatalf("details members = %v, want %v", names, want)
	}
	if details["minLength"] != 8.0 || details["newPasswordLength"] != 9.0 || details["commonPassword"] != false {
		t.Fatalf("details = %v", details)
	}
}
