// Package commonpass tells whether a password is one of those that
// guessing tries first: on a short list of the most common passwords
// (list.txt, in any letter case), or one character repeated. NIST SP
// 800-63B asks a verifier to refuse such passwords when they are chosen,
// instead of rules on the kinds of characters a password holds.
package commonpass

import (
	_ "embed"
	"strings"
	"sync"
	"unicode/utf8"
)

//go:embed list.txt
var list string

// set is the list, read once.
var set = sync.OnceValue(func() map[string]struct{} {
	m := map[string]struct{}{}
	for _, line := range List() {
		m[line] = struct{}{}
	}
	return m
})

// List returns the passwords of the list, in lower case.
func List() []string {
	var out []string
	for line := range strings.Lines(list) {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	return out
}

// Contains reports whether pw is a password that guessing tries first:
// one of the list in any letter case, or a single character repeated.
func Contains(pw string) bool {
	if first, size := utf8.DecodeRuneInString(pw); size > 0 && strings.Count(pw, string(first)) == utf8.RuneCountInString(pw) {
		return true
	}
	_, ok := set()[strings.ToLower(pw)]
	return ok
}
