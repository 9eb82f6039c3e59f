package httpapi

import (
	_ "embed"
	"encoding/json"
	"net/http"

	"github.com/julienschmidt/httprouter"
)

// openAPIDoc is the OpenAPI 3.1 document of the interface: every route of
// the route table with its parameters, bodies and answers. It is the one
// source; docs/openapi.json is a copy that a test keeps identical, and the
// end-to-end suite (package e2e) validates every request and answer of the
// real kmsd against it.
//
//go:embed openapi.json
var openAPIDoc []byte

// OpenAPI returns the OpenAPI 3.1 document that GET /openapi.json serves.
// The slice is a copy.
func OpenAPI() []byte { return append([]byte(nil), openAPIDoc...) }

// GET /openapi.json
func (a *api) openAPI(*http.Request, httprouter.Params) (any, error) {
	return json.RawMessage(openAPIDoc), nil
}
