package httpapi_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
)

// bodyRoutes are the routes that read a JSON body: FuzzBodies sends each
// of them arbitrary bodies.
var bodyRoutes = []struct{ method, path string }{
	{"POST", "/ks/decrypt"},
	{"POST", "/ks/encrypt"},
	{"POST", "/ks/rotate"},
	{"POST", "/ks/keyrings"},
	{"PUT", "/ks/config"},
	{"POST", "/asym/keyrings"},
	{"POST", "/asym/rotate"},
	{"POST", "/assets/search"},
}

// FuzzBodies checks that no request body, on any route that reads one,
// makes the service panic or answer 500.
func FuzzBodies(f *testing.F) {
	e := newEnv(f)
	e.createRing(f, "fuzz")
	enc := e.encrypt(f, "fuzz")
	seeds := []string{
		`{}`, `[]`, `null`, `"x"`, `{"ringname":"fuzz"}`, `{"name":"fuzz2","kem":"x25519"}`,
		`{"ringname":"fuzz","asset":{"data":{"a":1},"parents":["01a2000000000000000000000000beef"]}}`,
		`{"hash":"` + enc.Hash + `","header":"` + enc.Header + `"}`,
		`{"ringname":"fuzz","config":{"algos":{"aes256":{"maxEncryptCount":-1}}}}`,
		`{"parents":["x"],"start":1,"end":0,"data":{"a":[1,2]}}`,
		`{"name":"bad name","publicKey":"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----"}`,
		`{"ringname":` + "\x00" + `}`,
	}
	for i := range bodyRoutes {
		for _, s := range seeds {
			f.Add(uint8(i), []byte(s))
		}
	}
	h := e.srv.Config.Handler
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		rt := bodyRoutes[int(route)%len(bodyRoutes)]
		r := httptest.NewRequest(rt.method, rt.path, bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Authorization", "Bearer "+e.root)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code >= http.StatusInternalServerError {
			t.Fatalf("%s %s with body %q = %d: %s", rt.method, rt.path, body, w.Code, w.Body.Bytes())
		}
	})
}
