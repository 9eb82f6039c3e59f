//go:build cgo

package hsm

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"unsafe"

	"github.com/miekg/pkcs11"
)

// className names a CKO_ class for messages.
func className(class uint) string {
	switch class {
	case pkcs11.CKO_SECRET_KEY:
		return "secret key"
	case pkcs11.CKO_PRIVATE_KEY:
		return "private key"
	case pkcs11.CKO_PUBLIC_KEY:
		return "public key"
	case pkcs11.CKO_CERTIFICATE:
		return "certificate"
	case pkcs11.CKO_DATA:
		return "data object"
	}
	return fmt.Sprintf("object of class %#x", class)
}

// selectors returns the template that matches u's object and id.
func selectors(u URI) []*pkcs11.Attribute {
	var a []*pkcs11.Attribute
	if u.Object != "" {
		a = append(a, pkcs11.NewAttribute(pkcs11.CKA_LABEL, u.Object))
	}
	if u.ID != nil {
		a = append(a, pkcs11.NewAttribute(pkcs11.CKA_ID, u.ID))
	}
	return a
}

// find returns up to max handles of the objects matching template.
func (t *Token) find(template []*pkcs11.Attribute, max int) ([]pkcs11.ObjectHandle, error) {
	var found []pkcs11.ObjectHandle
	err := t.do(func(sh pkcs11.SessionHandle) error {
		if err := t.mod.ctx.FindObjectsInit(sh, template); err != nil {
			return err
		}
		hs, _, err := t.mod.ctx.FindObjects(sh, max)
		ferr := t.mod.ctx.FindObjectsFinal(sh)
		if err != nil {
			return err
		}
		found = hs
		return ferr
	})
	if err != nil {
		return nil, t.fail(err, "search token %q", t.label)
	}
	return found, nil
}

// findKey returns the one object of class that u names, in this token:
// a URI that gives a type must give typ, and why says what else is wrong.
func (t *Token) findKey(u URI, class uint, typ, why string) (pkcs11.ObjectHandle, error) {
	if u.Type != "" && u.Type != typ {
		return 0, invalid("the URI names type=%s, but %s", u.Type, why)
	}
	if err := t.holds(u); err != nil {
		return 0, err
	}
	return t.findOne(class, u)
}

// findOne returns the one object of class that u selects. When none is of
// that class, it says what the URI names instead, if anything.
func (t *Token) findOne(class uint, u URI) (pkcs11.ObjectHandle, error) {
	sel := selectors(u)
	hs, err := t.find(append([]*pkcs11.Attribute{pkcs11.NewAttribute(pkcs11.CKA_CLASS, class)}, sel...), 2)
	if err != nil {
		return 0, err
	}
	switch len(hs) {
	case 1:
		return hs[0], nil
	case 2:
		return 0, errorf(ReasonAmbiguous, nil, "more than one %s %s on token %q: name one by id as well", className(class), u.objectDesc(), t.label)
	}
	if others := t.classesOf(sel); len(others) > 0 {
		return 0, errorf(ReasonKeyType, nil, "what is %s on token %q is %s, not a %s", u.objectDesc(), t.label, strings.Join(others, " and "), className(class))
	}
	return 0, errorf(ReasonNoObject, nil, "no %s %s on token %q", className(class), u.objectDesc(), t.label)
}

// classesOf names the classes of the objects matching sel ("a private
// key", "a public key"), in a fixed order.
func (t *Token) classesOf(sel []*pkcs11.Attribute) []string {
	hs, err := t.find(sel, 8)
	if err != nil {
		return nil
	}
	var classes []uint
	for _, h := range hs {
		if a, err := t.attrs(h, pkcs11.CKA_CLASS); err == nil && !slices.Contains(classes, ulong(a[0])) {
			classes = append(classes, ulong(a[0]))
		}
	}
	slices.Sort(classes)
	names := make([]string, len(classes))
	for i, c := range classes {
		names[i] = "a " + className(c)
	}
	return names
}

// attrs reads the values of types on object h, in order. Asking for an
// attribute the object does not have fails the whole read.
func (t *Token) attrs(h pkcs11.ObjectHandle, types ...uint) ([][]byte, error) {
	template := make([]*pkcs11.Attribute, len(types))
	for i, typ := range types {
		template[i] = pkcs11.NewAttribute(typ, nil)
	}
	var got []*pkcs11.Attribute
	err := t.do(func(sh pkcs11.SessionHandle) (err error) {
		got, err = t.mod.ctx.GetAttributeValue(sh, h, template)
		return err
	})
	if err != nil {
		return nil, t.fail(err, "read the attributes of a key on token %q", t.label)
	}
	out := make([][]byte, len(types))
	for i, a := range got {
		out[i] = a.Value
	}
	return out, nil
}

// allowsMechanism reports whether h's CKA_ALLOWED_MECHANISMS, when the
// token keeps it and it is not empty, lists mech.
func (t *Token) allowsMechanism(h pkcs11.ObjectHandle, mech uint) bool {
	a, err := t.attrs(h, pkcs11.CKA_ALLOWED_MECHANISMS)
	if err != nil || len(a[0]) == 0 {
		return true // not kept, or no restriction
	}
	const size = int(unsafe.Sizeof(uint(0))) // a CK_ULONG, on the platforms kmsd runs on
	for b := a[0]; len(b) >= size; b = b[size:] {
		if ulong(b[:size]) == mech {
			return true
		}
	}
	return false
}

// ulong decodes a CK_ULONG (in the machine's byte order); malformed
// values decode to an impossible one.
func ulong(b []byte) uint {
	switch len(b) {
	case 8:
		return uint(binary.NativeEndian.Uint64(b))
	case 4:
		return uint(binary.NativeEndian.Uint32(b))
	}
	return ^uint(0)
}

// boolean decodes a CK_BBOOL.
func boolean(b []byte) bool { return len(b) == 1 && b[0] != 0 }
