package commonpass

import (
	"strings"
	"testing"
)

// TestList: the list's entries are in lower case, once each, and of 8
// characters or more (a shorter password fails the length rule).
func TestList(t *testing.T) {
	seen := map[string]bool{}
	for _, pw := range List() {
		if pw != strings.ToLower(pw) || seen[pw] || len(pw) < 8 {
			t.Errorf("list entry %q: want lower case, once, 8 characters or more", pw)
		}
		seen[pw] = true
	}
	if len(seen) < 100 {
		t.Errorf("the list has %d entries", len(seen))
	}
}

func TestContains(t *testing.T) {
	for _, c := range []struct {
		pw   string
		want bool
	}{
		{"password123", true},
		{"PassWord123", true},
		{"QWERTYUIOP", true},
		{"aaaaaaaaaaaaaaaa", true},
		{"ÄÄÄÄÄÄÄÄ", true},
		{"", false},
		{"password1234567", false},
		{"correct horse battery staple", false},
		{"aaaaaaaaaaaaaaab", false},
		{" password123", false},
	} {
		if got := Contains(c.pw); got != c.want {
			t.Errorf("Contains(%q) = %v, want %v", c.pw, got, c.want)
		}
	}
}
