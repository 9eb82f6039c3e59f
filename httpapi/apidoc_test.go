package httpapi

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestAPIDocErrorCodes: docs/API.md's list of error codes names every
// kind the service answers with, with the status the one table gives it.
func TestAPIDocErrorCodes(t *testing.T) {
	b, err := os.ReadFile("../docs/API.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.Join(strings.Fields(string(b)), " ")
	for kind, status := range kindStatus {
		if want := fmt.Sprintf("`%s` (%d", kind, status); !strings.Contains(doc, want) {
			t.Errorf("docs/API.md does not list %s as %s...)", kind, want)
		}
	}
}
