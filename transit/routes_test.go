package transit

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/ringkms/kms/internal/docblock"
)

// TestPermissionsDoc keeps the table of docs/PERMISSIONS.md's section on
// transit in step with the route tables (the engine's and Vault's token
// and AppRole paths): every route, its method and its flag, and no other.
func TestPermissionsDoc(t *testing.T) {
	section := docblock.Section(t, "docs/PERMISSIONS.md", "## Transit (Vault's interface)")
	var documented []string
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 5 || !strings.HasPrefix(strings.TrimSpace(cells[2]), "`/v1/") {
			continue
		}
		path := strings.Trim(strings.TrimSpace(cells[2]), "`")
		path = strings.NewReplacer("{name}", ":name", "{type}", ":type", "{version}", ":version", "{hash}", ":hash").Replace(strings.TrimPrefix(path, "/v1"))
		documented = append(documented, strings.TrimSpace(cells[1])+" "+path+" "+strings.Trim(strings.TrimSpace(cells[3]), "`"))
	}
	var routes []string
	for _, rt := range (&api{}).routes() {
		routes = append(routes, rt.method+" /transit"+rt.path+" "+rt.flag)
	}
	for _, rt := range (&api{}).authRoutes() {
		routes = append(routes, rt.method+" /auth"+rt.path+" "+rt.flag)
	}
	slices.Sort(documented)
	slices.Sort(routes)
	if !slices.Equal(documented, routes) {
		t.Errorf("docs/PERMISSIONS.md lists\n\t%s\nthe route table has\n\t%s", strings.Join(documented, "\n\t"), strings.Join(routes, "\n\t"))
	}
	for _, rt := range append((&api{}).routes(), (&api{}).authRoutes()...) {
		if rt.method == http.MethodPut {
			t.Errorf("route %s %s: PUT is served for every POST, and listed as POST", rt.method, rt.path)
		}
	}
}
