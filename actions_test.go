package kms

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ringkms/kms/internal/docblock"
)

// TestActions keeps the list of Actions in step with the code that
// records them and with docs/PERMISSIONS.md: every action that the
// package's code names is on the list, and every action on the list is
// named somewhere, so that neither a new action (a metrics label "other")
// nor a stale one goes unnoticed.
func TestActions(t *testing.T) {
	list := Actions()
	if !slices.IsSorted(list) || len(slices.Compact(slices.Clone(list))) != len(list) {
		t.Fatalf("Actions() is not sorted without duplicates: %q", list)
	}
	named := recordedActions(t)
	for a, at := range named {
		if !IsAction(a) {
			t.Errorf("%s records the action %q, which Actions() lacks: add it to actions.go and docs/PERMISSIONS.md", at, a)
		}
	}
	for _, a := range list {
		if _, ok := named[a]; !ok {
			t.Errorf("Actions() has %q, which no code records", a)
		}
	}

	doclist := strings.Fields(docblock.Fenced(t, "docs/PERMISSIONS.md", "text actions"))
	for _, a := range list {
		if !slices.Contains(doclist, a) {
			t.Errorf("docs/PERMISSIONS.md does not list the action %q", a)
		}
	}
	for _, a := range doclist {
		if !IsAction(a) {
			t.Errorf("docs/PERMISSIONS.md lists %q, which Actions() lacks", a)
		}
	}
	if len(doclist) != len(list) {
		t.Errorf("docs/PERMISSIONS.md lists %d actions, Actions() has %d", len(doclist), len(list))
	}
}

// TestIsAction: the service's own actions, exactly as recorded, and no
// others.
func TestIsAction(t *testing.T) {
	for _, c := range []struct {
		action string
		want   bool
	}{
		{"encrypt", true},
		{"keyring.rotate", true},
		{"validate", true},
		{"user.reset.mail", true},
		{"", false},
		{"Encrypt", false},
		{"encrypt ", false},
		{"rotate", false}, // a ring operation a validation may report, not an action of the service
		{"made.up.action", false},
	} {
		if got := IsAction(c.action); got != c.want {
			t.Errorf("IsAction(%q) = %v, want %v", c.action, got, c.want)
		}
	}
}

// recordedActions reads the package's code (tests aside) for the actions
// it records, with where it names each: the string literals passed for a
// parameter named action (newActivity, record, refuse, authorize and the
// helpers that pass theirs on), assigned to a variable or constant named
// action or ...Action, or to an Activity's Action, and the actions that
// keyAction makes of the literals it is given.
func recordedActions(t *testing.T) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, e := range entries {
		if name := e.Name(); strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") {
			f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
	}
	// The position of the parameter named action of each function.
	param := map[string]int{}
	for _, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Name.Name == "keyAction" {
				continue
			}
			i := 0
			for _, field := range fd.Type.Params.List {
				for _, n := range field.Names {
					if n.Name == "action" {
						param[fd.Name.Name] = i
					}
					i++
				}
				if len(field.Names) == 0 {
					i++
				}
			}
		}
	}
	if len(param) < 10 {
		t.Fatalf("found %d functions with a parameter named action; has the code changed shape?", len(param))
	}

	named := map[string]string{}
	add := func(e ast.Expr) {
		if s, ok := stringLit(e); ok {
			named[s] = fset.Position(e.Pos()).String()
			return
		}
		// keyAction(group, "op"): the action of either group.
		if call, ok := e.(*ast.CallExpr); ok && calleeName(call) == "keyAction" && len(call.Args) == 2 {
			if op, ok := stringLit(call.Args[1]); ok {
				at := fset.Position(e.Pos()).String()
				named[keyAction(groupKS, op)] = at
				named[keyAction(groupAsym, op)] = at
			}
		}
	}
	isActionName := func(e ast.Expr) bool {
		switch e := e.(type) {
		case *ast.Ident:
			return e.Name == "action" || strings.HasSuffix(e.Name, "Action")
		case *ast.SelectorExpr:
			return e.Sel.Name == "Action"
		}
		return false
	}
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if i, ok := param[calleeName(n)]; ok && i < len(n.Args) {
					add(n.Args[i])
				}
			case *ast.AssignStmt:
				for i, l := range n.Lhs {
					if isActionName(l) && len(n.Rhs) == len(n.Lhs) {
						add(n.Rhs[i])
					}
				}
			case *ast.ValueSpec:
				for i, name := range n.Names {
					if isActionName(name) && len(n.Values) == len(n.Names) {
						add(n.Values[i])
					}
				}
			}
			return true
		})
	}
	return named
}

func calleeName(call *ast.CallExpr) string {
	fn := call.Fun
	if ix, ok := fn.(*ast.IndexExpr); ok { // audited[T](...)
		fn = ix.X
	}
	switch fn := fn.(type) {
	case *ast.Ident:
		return fn.Name
	case *ast.SelectorExpr:
		return fn.Sel.Name
	}
	return ""
}

func stringLit(e ast.Expr) (string, bool) {
	b, ok := e.(*ast.BasicLit)
	if !ok || b.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(b.Value)
	return s, err == nil
}
