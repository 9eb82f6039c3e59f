package hsm

import (
	"os"
	"slices"
	"strconv"
	"strings"
)

// PINEnv names the environment variable a caller reads a token's PIN
// from when the URI has no pin-source. The package never reads the
// environment itself: the caller passes the value to ReadPIN.
const PINEnv = "KMS_PKCS11_PIN"

// URI is a parsed PKCS#11 URI (RFC 7512) naming a key on a token:
//
//	pkcs11:token=kms;object=kms-master?module-path=/usr/lib/softhsm/libsofthsm2.so&pin-source=file:/etc/kms/pin
//
// The path attributes select the token (token, manufacturer, serial,
// model, slot-*, library-*) and the object on it (object, id, type); the
// query names the module to load (module-path) and where the PIN is
// (pin-source). A URI never holds a PIN: ParseURI refuses pin-value.
type URI struct {
	// Token selection; an empty field matches any token.
	Token        string // token: the token's label
	Manufacturer string // manufacturer: the token's manufacturer ID
	Serial       string // serial: the token's serial number
	Model        string // model: the token's model

	LibraryManufacturer string // library-manufacturer: the module's manufacturer ID
	LibraryDescription  string // library-description: the module's description
	LibraryVersion      string // library-version: "major" or "major.minor"

	SlotDescription  string // slot-description
	SlotManufacturer string // slot-manufacturer
	SlotID           *uint  // slot-id; nil matches any slot

	// Object selection: at least one of Object and ID.
	Object string // object: the key's CKA_LABEL
	ID     []byte // id: the key's CKA_ID; nil when absent
	Type   string // type: public, private, cert, secret-key or data; empty for any

	// Query attributes.
	ModulePath string // module-path: the PKCS#11 library to load (required)
	ModuleName string // module-name: kept, but module-path is what is loaded
	PINFile    string // pin-source: the file holding the PIN (file:PATH or PATH)
}

// attribute names, in the order String writes them.
var pathAttrs = []string{
	"token", "manufacturer", "serial", "model",
	"library-manufacturer", "library-description", "library-version",
	"slot-description", "slot-manufacturer", "slot-id",
	"object", "id", "type",
}

var queryAttrs = []string{"module-name", "module-path", "pin-source"}

// uriPart is a part of a URI: the path or the query.
type uriPart struct {
	name  string   // "path" or "query"
	sep   string   // what separates its attributes
	attrs []string // the attributes it holds
	where string   // where it lies, for an attribute given in the other
}

// uriParts are a URI's path and query, in that order.
var uriParts = [2]uriPart{
	{name: "path", sep: ";", attrs: pathAttrs, where: "path, before '?'"},
	{name: "query", sep: "&", attrs: queryAttrs, where: "query, after '?'"},
}

// ParseURI parses a PKCS#11 URI. Beyond RFC 7512 it requires module-path
// and one of object and id, refuses pin-value (a PIN on the command line
// or in a configuration file is readable by too many), and refuses
// attributes it does not know except the vendor ones (x-...), which it
// ignores.
func ParseURI(s string) (URI, error) {
	var u URI
	const scheme = "pkcs11:"
	if len(s) < len(scheme) || !strings.EqualFold(s[:len(scheme)], scheme) {
		return u, invalid("a PKCS#11 URI starts with %q", scheme)
	}
	rest := s[len(scheme):]
	if strings.Contains(rest, "#") {
		return u, invalid("a PKCS#11 URI has no fragment (#)")
	}
	path, query, _ := strings.Cut(rest, "?")
	seen := map[string]bool{}
	for i, text := range []string{path, query} {
		if text == "" {
			continue
		}
		n := 0
		for attr := range strings.SplitSeq(text, uriParts[i].sep) {
			n++
			if err := u.set(uriParts[i], uriParts[1-i], attr, n, seen); err != nil {
				return URI{}, err
			}
		}
	}
	if u.ModulePath == "" {
		return URI{}, invalid("the URI names no module-path: add ?module-path=/path/to/the/pkcs11-library.so")
	}
	if u.Object == "" && u.ID == nil {
		return URI{}, invalid("the URI names no key: add object=LABEL or id=%%XX... to its path")
	}
	return u, nil
}

// split cuts attr, the n-th attribute of the URI's part ("path" or
// "query"), into its name and its percent-decoded value. An attribute
// that is not name=value is not echoed in the error, in either part: it
// could be a secret pasted in the wrong place (a PIN); its position
// says which it is.
func split(attr, part string, n int, seen map[string]bool) (name, value string, err error) {
	name, raw, ok := strings.Cut(attr, "=")
	if !ok || name == "" {
		return "", "", invalid("the %s %s attribute of the URI is not name=value (not shown: it could be a secret, such as a PIN, put in the wrong place)", ordinal(n), part)
	}
	if seen[name] {
		return "", "", invalid("attribute %s appears more than once", name)
	}
	seen[name] = true
	value, err = unescape(raw)
	if err != nil {
		return "", "", invalid("attribute %s: %v", name, err)
	}
	if value == "" && !strings.HasPrefix(name, "x-") {
		return "", "", invalid("attribute %s has no value", name)
	}
	return name, value, nil
}

// set sets attr, the n-th attribute of the URI's part p; other is the
// other part, whose attributes are out of place in p.
func (u *URI) set(p, other uriPart, attr string, n int, seen map[string]bool) error {
	if name, _, _ := strings.Cut(attr, "="); name == "pin-value" {
		return errPINValue() // before anything that could echo the value
	}
	name, v, err := split(attr, p.name, n, seen)
	if err != nil {
		return err
	}
	switch {
	case slices.Contains(p.attrs, name):
		return u.setAttr(name, v)
	case strings.HasPrefix(name, "x-"):
		return nil // a vendor's attribute: RFC 7512 lets consumers ignore it
	case slices.Contains(other.attrs, name):
		return invalid("%s belongs in the URI's %s", name, other.where)
	}
	return invalid("unknown %s attribute %q", p.name, name)
}

// textField returns the field that holds the attribute name's decoded
// value as it is, or nil for slot-id, id and pin-source, whose fields
// hold it otherwise.
func (u *URI) textField(name string) *string {
	return map[string]*string{
		"token": &u.Token, "manufacturer": &u.Manufacturer, "serial": &u.Serial, "model": &u.Model,
		"library-manufacturer": &u.LibraryManufacturer, "library-description": &u.LibraryDescription,
		"library-version":  &u.LibraryVersion,
		"slot-description": &u.SlotDescription, "slot-manufacturer": &u.SlotManufacturer,
		"object": &u.Object, "type": &u.Type,
		"module-path": &u.ModulePath, "module-name": &u.ModuleName,
	}[name]
}

// setAttr sets the attribute name, of pathAttrs or queryAttrs, to its
// decoded value v.
func (u *URI) setAttr(name, v string) error {
	switch name {
	case "library-version":
		if !validVersion(v) {
			return invalid("library-version %q is not MAJOR or MAJOR.MINOR", v)
		}
	case "type":
		switch v {
		case "public", "private", "cert", "secret-key", "data":
		default:
			return invalid("type %q is none of public, private, cert, secret-key, data", v)
		}
	case "slot-id":
		n, err := strconv.ParseUint(v, 10, strconv.IntSize)
		if err != nil || !allDigits(v) {
			return invalid("slot-id %q is not a decimal number", v)
		}
		id := uint(n)
		u.SlotID = &id
		return nil
	case "id":
		u.ID = []byte(v)
		return nil
	case "pin-source":
		p, err := pinFile(v)
		if err != nil {
			return err
		}
		u.PINFile = p
		return nil
	}
	*u.textField(name) = v
	return nil
}

// ordinal writes n as an English ordinal: 1st, 2nd, 3rd, 4th, 11th...
func ordinal(n int) string {
	suffix := "th"
	if n%100 < 11 || n%100 > 13 {
		switch n % 10 {
		case 1:
			suffix = "st"
		case 2:
			suffix = "nd"
		case 3:
			suffix = "rd"
		}
	}
	return strconv.Itoa(n) + suffix
}

func errPINValue() error {
	return invalid("the URI carries the PIN (pin-value), which would show it to anyone who can read the command line or the configuration: use pin-source=file:PATH in the URI, or the environment variable %s", PINEnv)
}

// pinFile returns the path a pin-source names: file:PATH, file://PATH
// with an empty or localhost authority, or a plain path. Other schemes
// (a command to run, say) are refused.
func pinFile(src string) (string, error) {
	if rest, ok := strings.CutPrefix(src, "file:"); ok {
		if after, ok := strings.CutPrefix(rest, "//"); ok {
			host, path, found := strings.Cut(after, "/")
			if !found || (host != "" && host != "localhost") {
				return "", invalid("pin-source %q names a file on another host", src)
			}
			rest = "/" + path
		}
		if rest == "" {
			return "", invalid("pin-source %q names no file", src)
		}
		return rest, nil
	}
	if i := strings.IndexByte(src, ':'); i > 0 && isScheme(src[:i]) && !strings.Contains(src[:i], "/") {
		return "", invalid("pin-source %q is not a file: only file:PATH (or a plain path) is read", src)
	}
	return src, nil
}

// ReadPIN returns the PIN for the token: the content of the pin-source
// file, less one trailing newline, when the URI has one; else envPIN,
// which the caller read from the environment (PINEnv); else an error
// naming both ways to give it.
func (u URI) ReadPIN(envPIN string) (string, error) {
	if u.PINFile != "" {
		b, err := os.ReadFile(u.PINFile)
		if err != nil {
			return "", errorf(ReasonNoPIN, err, "read the PIN from pin-source")
		}
		defer clear(b)
		pin := string(b)
		if s, ok := strings.CutSuffix(pin, "\n"); ok {
			pin = strings.TrimSuffix(s, "\r")
		}
		if pin == "" {
			return "", errorf(ReasonNoPIN, nil, "pin-source file %s is empty", u.PINFile)
		}
		return pin, nil
	}
	if envPIN != "" {
		return envPIN, nil
	}
	return "", errorf(ReasonNoPIN, nil, "no PIN for the token: add pin-source=file:PATH to the URI's query, or set %s", PINEnv)
}

// String returns the URI in RFC 7512 form, attributes in a fixed order.
// It holds no PIN: a URI never carries one.
func (u URI) String() string {
	var b strings.Builder
	b.WriteString("pkcs11:")
	// The attributes of a part go apart by its separator; the query
	// starts with a '?'.
	sep, next := "", ""
	put := func(name, value string) {
		if value == "" {
			return
		}
		b.WriteString(sep)
		b.WriteString(name)
		b.WriteByte('=')
		b.WriteString(value)
		sep = next
	}
	for _, part := range uriParts {
		safe := pathSafe
		next = part.sep
		if part.name == "query" {
			sep, safe = "?", querySafe
		}
		for _, name := range part.attrs {
			switch name {
			case "slot-id":
				if u.SlotID != nil {
					put(name, strconv.FormatUint(uint64(*u.SlotID), 10))
				}
			case "id":
				if u.ID != nil {
					put(name, escapeAll(u.ID))
				}
			case "pin-source":
				if u.PINFile != "" {
					src := "file:"
					if strings.HasPrefix(u.PINFile, "//") {
						src = "file://" // an empty authority, so that the path's // is not read as one
					}
					put(name, src+escape(u.PINFile, safe))
				}
			case "library-version", "type": // values checked by ParseURI, written as they are
				put(name, *u.textField(name))
			default:
				put(name, escape(*u.textField(name), safe))
			}
		}
	}
	return b.String()
}

// tokenDesc lists the attributes by which the URI selects its token,
// for messages: token="kms" serial="...", or (any) when there are none.
func (u URI) tokenDesc() string {
	var parts []string
	for _, a := range [][2]string{
		{"token", u.Token}, {"manufacturer", u.Manufacturer}, {"serial", u.Serial}, {"model", u.Model},
		{"slot-description", u.SlotDescription}, {"slot-manufacturer", u.SlotManufacturer},
	} {
		if a[1] != "" {
			parts = append(parts, a[0]+"="+strconv.Quote(a[1]))
		}
	}
	if u.SlotID != nil {
		parts = append(parts, "slot-id="+strconv.FormatUint(uint64(*u.SlotID), 10))
	}
	if len(parts) == 0 {
		return "(any)"
	}
	return strings.Join(parts, " ")
}

// objectDesc names the key the URI selects, for messages.
func (u URI) objectDesc() string {
	var parts []string
	if u.Object != "" {
		parts = append(parts, "labelled "+strconv.Quote(u.Object))
	}
	if u.ID != nil {
		parts = append(parts, "with id "+escapeAll(u.ID))
	}
	return strings.Join(parts, " and ")
}

func invalid(format string, args ...any) error {
	return errorf(ReasonInvalid, nil, format, args...)
}

// Characters that stand for themselves in a path or a query value
// (RFC 7512 pk11-pchar and pk11-qchar, besides the unreserved ones).
const (
	pathSafe  = ":[]@!$'()*+,=&"
	querySafe = ":[]@!$'()*+,=/?|"
)

func escape(s, safe string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isUnreserved(c) || strings.IndexByte(safe, c) >= 0 {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&15])
	}
	return b.String()
}

// escapeAll percent-encodes every byte, as RFC 7512 advises for id.
func escapeAll(p []byte) string {
	b := make([]byte, 0, 3*len(p))
	for _, c := range p {
		b = append(b, '%', hexDigits[c>>4], hexDigits[c&15])
	}
	return string(b)
}

const hexDigits = "0123456789ABCDEF"

func unescape(s string) (string, error) {
	if !strings.Contains(s, "%") {
		return s, nil
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b = append(b, s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", errorf(ReasonInvalid, nil, "truncated percent-encoding %q", s[i:])
		}
		hi, ok1 := unhex(s[i+1])
		lo, ok2 := unhex(s[i+2])
		if !ok1 || !ok2 {
			return "", errorf(ReasonInvalid, nil, "bad percent-encoding %q", s[i:i+3])
		}
		b = append(b, hi<<4|lo)
		i += 2
	}
	return string(b), nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

func isUnreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

// isScheme reports whether s is a URI scheme (RFC 3986: ALPHA *( ALPHA /
// DIGIT / "+" / "-" / "." )).
func isScheme(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		alpha := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
		if !alpha && (i == 0 || !('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.')) {
			return false
		}
	}
	return s != ""
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func validVersion(v string) bool {
	major, minor, dot := strings.Cut(v, ".")
	return allDigits(major) && (!dot || allDigits(minor))
}
