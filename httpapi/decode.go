package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"reflect"
	"strings"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/internal/httpedge"
)

// decode reads the JSON body of r into v. The body is required, must come
// with Content-Type application/json (parameters such as charset allowed),
// must be one JSON value with nothing after it, and must not exceed the
// cap that the pipeline put on it (413). Members that v does not know are ignored.
func (a *api) decode(r *http.Request, v any) error {
	if err := a.edge.CheckLength(r); err != nil {
		return err
	}
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return errBodyRequired
	}
	if err := checkContentType(r.Header.Get("Content-Type")); err != nil {
		return err
	}
	// Whatever decoding keeps, it copies (strings, json.RawMessage): the
	// buffer is free again once decode returns.
	buf := httpedge.Buffer()
	defer httpedge.PutBuffer(buf)
	if err := httpedge.ReadBody(buf, r.Body); err != nil {
		return err
	}
	data := buf.Bytes()
	if len(bytes.TrimSpace(data)) == 0 {
		return errBodyRequired
	}
	if decodeFast(data, v) {
		return nil
	}
	if err := json.Unmarshal(data, v); err != nil {
		return jsonError(err)
	}
	return nil
}

// decodeOptional is decode for a request whose body may be absent (a
// search with no filter): no body leaves v as it is.
func (a *api) decodeOptional(r *http.Request, v any) error {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return nil
	}
	return a.decode(r, v)
}

var errBodyRequired = kms.Errorf(kms.KindInvalid, "a JSON request body is required")

func checkContentType(value string) error {
	switch value {
	case "":
		return kms.Errorf(kms.KindInvalid, "missing Content-Type: send Content-Type: application/json")
	case "application/json", "application/json; charset=utf-8":
		return nil // the common forms, without the parser's map
	}
	mt, _, err := mime.ParseMediaType(value)
	if err != nil || mt != "application/json" {
		return kms.Errorf(kms.KindInvalid, "unsupported Content-Type %q: send Content-Type: application/json", value)
	}
	return nil
}

// jsonError turns an error of encoding/json into an Invalid error that
// names the problem, and the member for a value of the wrong type.
func jsonError(err error) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		return kms.Errorf(kms.KindInvalid, "invalid JSON body: %v (at byte %d)", syntax, syntax.Offset)
	case errors.As(err, &typ) && typ.Field == "":
		return kms.Errorf(kms.KindInvalid, "invalid JSON body: it must be %s, not %s", jsonType(typ.Type), typ.Value)
	case errors.As(err, &typ):
		return kms.Errorf(kms.KindInvalid, "invalid JSON body: member %q must be %s, not %s", typ.Field, jsonType(typ.Type), typ.Value)
	}
	return kms.Errorf(kms.KindInvalid, "invalid JSON body: %s", strings.TrimPrefix(err.Error(), "json: "))
}

// jsonType names the JSON type that decodes into t.
func jsonType(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "another type"
}
