package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"mime"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/ringkms/kms/httpapi"
)

// The OpenAPI document lives in httpapi/openapi.json, embedded in the
// binary and served at GET /openapi.json. docs/openapi.json is a copy for
// readers: TestOpenAPICopy fails when the two differ, and
//
//	go test ./httpapi -run TestOpenAPICopy -update-openapi
//
// rewrites the copy from the source. The end-to-end suite (package e2e)
// validates every request and answer of the real kmsd against the document.

const (
	openAPISource = "openapi.json"
	openAPICopy   = "../docs/openapi.json"
)

var updateOpenAPI = flag.Bool("update-openapi", false, "rewrite docs/openapi.json from httpapi/openapi.json")

// loadOpenAPI parses and validates the embedded document.
func loadOpenAPI(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(httpapi.OpenAPI())
	if err != nil {
		t.Fatalf("load the OpenAPI document: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("the OpenAPI document is not valid: %v", err)
	}
	return doc
}

func TestOpenAPIValid(t *testing.T) {
	doc := loadOpenAPI(t)
	if !doc.IsOpenAPI31OrLater() {
		t.Errorf("openapi = %q, want 3.1.x", doc.OpenAPI)
	}
	if doc.Info == nil || doc.Info.Version != "0.1.0" {
		t.Errorf("info.version is not the interface's 0.1.0")
	}
	// Every operation answers JSON for each status it lists (but 304,
	// which has no body), and names a unique operationId.
	ids := map[string]string{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			name := method + " " + path
			if op.OperationID == "" {
				t.Errorf("%s has no operationId", name)
			} else if other, dup := ids[op.OperationID]; dup {
				t.Errorf("%s and %s share the operationId %s", name, other, op.OperationID)
			}
			ids[op.OperationID] = name
			if op.Responses.Value("200") == nil {
				t.Errorf("%s documents no 200 answer", name)
			}
			for status, r := range op.Responses.Map() {
				if status == "304" {
					if r.Value == nil || len(r.Value.Content) > 0 {
						t.Errorf("%s: answer 304 is documented with a body", name)
					}
					continue
				}
				if r.Value == nil || r.Value.Content.Get("application/json") == nil {
					t.Errorf("%s: answer %s is not documented as application/json", name, status)
				}
			}
		}
	}
}

// TestOpenAPICopy keeps docs/openapi.json identical to the embedded
// source.
func TestOpenAPICopy(t *testing.T) {
	src, err := os.ReadFile(openAPISource)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(src, httpapi.OpenAPI()) {
		t.Fatalf("%s differs from the embedded document", openAPISource)
	}
	if *updateOpenAPI {
		if err := os.WriteFile(openAPICopy, src, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cp, err := os.ReadFile(openAPICopy)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(cp, src) {
		t.Errorf("%s differs from httpapi/%s, its source: edit the source and run\n\tgo test ./httpapi -run TestOpenAPICopy -update-openapi", openAPICopy, openAPISource)
	}
}

// pathShape writes a router pattern (:name) or a document path ({name})
// with every parameter as {}: the document may name a parameter otherwise
// than the router (GET and DELETE /auth/apikey/{apikey} are one path
// there, as OpenAPI wants, and two patterns in the router).
func pathShape(p string) string {
	p = regexp.MustCompile(`:\w+`).ReplaceAllString(p, "{}")
	return regexp.MustCompile(`\{\w+\}`).ReplaceAllString(p, "{}")
}

// TestOpenAPIRoutes checks that the document has one operation per route
// of the route table, no more, and that exactly the public routes need no
// credential.
func TestOpenAPIRoutes(t *testing.T) {
	doc := loadOpenAPI(t)
	if len(doc.Security) != 1 || doc.Security[0]["bearer"] == nil {
		t.Fatalf("the document's default security is %v, want bearer", doc.Security)
	}
	type opInfo struct {
		public bool
		seen   bool
	}
	ops := map[string]*opInfo{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			// security: [] (public) is an empty, non-nil requirement list.
			public := op.Security != nil && len(*op.Security) == 0
			if op.Security != nil && !public {
				t.Errorf("%s %s overrides the default security; use the default or []", method, path)
			}
			ops[method+" "+pathShape(path)] = &opInfo{public: public}
		}
	}
	for _, rt := range httpapi.Routes() {
		key := rt.Method + " " + pathShape(rt.Path)
		o, ok := ops[key]
		if !ok {
			t.Errorf("route %s %s is not in the OpenAPI document", rt.Method, rt.Path)
			continue
		}
		o.seen = true
		if o.public != rt.Public {
			t.Errorf("route %s %s: public = %v in the router, %v in the OpenAPI document (security: [])", rt.Method, rt.Path, rt.Public, o.public)
		}
	}
	var extra []string
	for key, o := range ops {
		if !o.seen {
			extra = append(extra, key)
		}
	}
	slices.Sort(extra)
	for _, key := range extra {
		t.Errorf("the OpenAPI document describes %s, which the router does not serve", key)
	}
}

// TestOpenAPIServed checks GET /openapi.json: public, JSON, the document.
func TestOpenAPIServed(t *testing.T) {
	e := newEnv(t)
	r := e.do(t, "GET", "/openapi.json", "", nil)
	body := r.body
	if r.status != http.StatusOK {
		t.Fatalf("GET /openapi.json = %d %s, want 200", r.status, body)
	}
	if mt, _, _ := mime.ParseMediaType(r.header.Get("Content-Type")); mt != "application/json" {
		t.Errorf("GET /openapi.json: Content-Type %q, want application/json", r.header.Get("Content-Type"))
	}
	var got, want any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatalf("GET /openapi.json is not JSON: %v", err)
	}
	if err := json.Unmarshal(httpapi.OpenAPI(), &want); err != nil {
		t.Fatal(err)
	}
	g, _ := json.Marshal(got)
	w, _ := json.Marshal(want)
	if !bytes.Equal(g, w) {
		t.Errorf("GET /openapi.json answers another document than the embedded one")
	}
	if !strings.Contains(string(body), `"openapi":"3.1.0"`) {
		t.Errorf("GET /openapi.json does not start an OpenAPI 3.1.0 document")
	}
}
