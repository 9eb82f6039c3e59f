package transit_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// caller calls a transit engine over HTTP in Vault's wire protocol,
// acting with a credential: a JSON body, the credential in X-Vault-Token,
// and the answer read from Vault's envelope whatever its status. The
// clients themselves (HashiCorp's, OpenBao's) are driven against kmsd by
// the integration module.
type caller struct {
	url   string // the server's address and the prefix the engine is served under
	token string
}

// answer is what the engine answered: the status and headers, and the
// body's data (numbers as json.Number), warnings and errors.
type answer struct {
	status   int
	header   http.Header
	data     map[string]any
	warnings []string
	errors   []string
}

func (a *answer) String() string {
	return fmt.Sprintf("%d data %v warnings %q errors %q", a.status, a.data, a.warnings, a.errors)
}

// do sends method on path (below /v1/, query included) with data as its
// JSON body (no body if nil) and returns the answer.
func (c *caller) do(t *testing.T, method, path string, data map[string]any) *answer {
	t.Helper()
	var body io.Reader
	if data != nil {
		b, err := json.Marshal(data)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.url+"/v1/"+path, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	req.Header.Set("X-Vault-Token", c.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var envelope struct {
		Data     map[string]any `json:"data"`
		Warnings []string       `json:"warnings"`
		Errors   []string       `json:"errors"`
	}
	dec := json.NewDecoder(resp.Body)
	dec.UseNumber()
	if err := dec.Decode(&envelope); err != nil && !errors.Is(err, io.EOF) { // io.EOF: no body
		t.Fatalf("%s %s answered %d, not in Vault's envelope: %v", method, path, resp.StatusCode, err)
	}
	return &answer{status: resp.StatusCode, header: resp.Header, data: envelope.Data, warnings: envelope.Warnings, errors: envelope.Errors}
}

// write, read, list and delete send what Vault's clients send for them:
// PUT with the data, GET, GET with list=true, DELETE.
func (c *caller) write(t *testing.T, path string, data map[string]any) *answer {
	t.Helper()
	return c.do(t, http.MethodPut, path, data)
}

func (c *caller) read(t *testing.T, path string) *answer {
	t.Helper()
	return c.do(t, http.MethodGet, path, nil)
}

func (c *caller) list(t *testing.T, path string) *answer {
	t.Helper()
	return c.do(t, http.MethodGet, path+"?list=true", nil)
}

func (c *caller) delete(t *testing.T, path string) *answer {
	t.Helper()
	return c.do(t, http.MethodDelete, path, nil)
}

// mustWrite writes and fails t unless the answer is 200 with data.
func (c *caller) mustWrite(t *testing.T, path string, data map[string]any) *answer {
	t.Helper()
	a := c.write(t, path, data)
	if a.status != http.StatusOK || a.data == nil {
		t.Fatalf("write(%s, %v) = %v", path, data, a)
	}
	return a
}

// errs is the answer's errors, joined.
func (a *answer) errs() string { return strings.Join(a.errors, "; ") }

// str is the string data name of the answer ("" if none).
func (a *answer) str(name string) string {
	v, _ := a.data[name].(string)
	return v
}

// num is the number data name of the answer; t fails if it is none.
func (a *answer) num(t *testing.T, name string) int64 {
	t.Helper()
	n, ok := a.data[name].(json.Number)
	if !ok {
		t.Fatalf("data %s = %#v, want a number", name, a.data[name])
	}
	v, err := n.Int64()
	if err != nil {
		t.Fatal(err)
	}
	return v
}
