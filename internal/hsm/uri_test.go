package hsm_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ringkms/kms/internal/hsm"
)

const softhsm = "module-path=/usr/lib/softhsm/libsofthsm2.so"

func slot(n uint) *uint { return &n }

var uriTests = []struct {
	name string
	in   string
	want hsm.URI
}{
	{
		name: "the example",
		in:   "pkcs11:token=kms;object=kms-master?module-path=/usr/lib/softhsm/libsofthsm2.so&pin-source=file:/etc/kms/pin",
		want: hsm.URI{Token: "kms", Object: "kms-master", ModulePath: "/usr/lib/softhsm/libsofthsm2.so", PINFile: "/etc/kms/pin"},
	},
	{
		name: "percent-encoding",
		in:   "pkcs11:token=My%20Token;object=kms%3Bmaster%25;id=%01%02%FF%fe?" + softhsm,
		want: hsm.URI{Token: "My Token", Object: "kms;master%", ID: []byte{1, 2, 0xff, 0xfe}, ModulePath: "/usr/lib/softhsm/libsofthsm2.so"},
	},
	{
		name: "id alone",
		in:   "pkcs11:id=%4b%4d%53?" + softhsm,
		want: hsm.URI{ID: []byte("KMS"), ModulePath: "/usr/lib/softhsm/libsofthsm2.so"},
	},
	{
		name: "every path attribute",
		in: "PKCS11:token=kms;manufacturer=SoftHSM%20project;serial=4c22c7cb49c75939;model=SoftHSM%20v2;" +
			"library-manufacturer=SoftHSM;library-description=Implementation%20of%20PKCS11;library-version=2.6;" +
			"slot-description=SoftHSM%20slot;slot-manufacturer=SoftHSM%20project;slot-id=1237801273;" +
			"object=kms-master;id=%01;type=secret-key?module-name=softhsm2&" + softhsm,
		want: hsm.URI{
			Token: "kms", Manufacturer: "SoftHSM project", Serial: "4c22c7cb49c75939", Model: "SoftHSM v2",
			LibraryManufacturer: "SoftHSM", LibraryDescription: "Implementation of PKCS11", LibraryVersion: "2.6",
			SlotDescription: "SoftHSM slot", SlotManufacturer: "SoftHSM project", SlotID: slot(1237801273),
			Object: "kms-master", ID: []byte{1}, Type: "secret-key",
			ModuleName: "softhsm2", ModulePath: "/usr/lib/softhsm/libsofthsm2.so",
		},
	},
	{
		name: "vendor attributes ignored",
		in:   "pkcs11:x-acme-partition=3;object=k;x-empty=?" + softhsm + "&x-acme-mode=fips",
		want: hsm.URI{Object: "k", ModulePath: "/usr/lib/softhsm/libsofthsm2.so"},
	},
	{
		name: "pin-source as a plain path",
		in:   "pkcs11:object=k?" + softhsm + "&pin-source=/run/secrets/pin",
		want: hsm.URI{Object: "k", ModulePath: "/usr/lib/softhsm/libsofthsm2.so", PINFile: "/run/secrets/pin"},
	},
	{
		name: "pin-source with an empty authority",
		in:   "pkcs11:object=k?" + softhsm + "&pin-source=file:///etc/kms/pin",
		want: hsm.URI{Object: "k", ModulePath: "/usr/lib/softhsm/libsofthsm2.so", PINFile: "/etc/kms/pin"},
	},
	{
		name: "pin-source on localhost",
		in:   "pkcs11:object=k?" + softhsm + "&pin-source=file://localhost/etc/kms/pin",
		want: hsm.URI{Object: "k", ModulePath: "/usr/lib/softhsm/libsofthsm2.so", PINFile: "/etc/kms/pin"},
	},
	{
		name: "a module path with query characters",
		in:   "pkcs11:object=k?module-path=/opt/hsm%20lib/lib%26p11.so",
		want: hsm.URI{Object: "k", ModulePath: "/opt/hsm lib/lib&p11.so"},
	},
}

func TestParseURI(t *testing.T) {
	for _, tc := range uriTests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := hsm.ParseURI(tc.in)
			if err != nil {
				t.Fatalf("ParseURI(%q) = %v", tc.in, err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ParseURI(%q) = %#v, want %#v", tc.in, got, tc.want)
			}
			again, err := hsm.ParseURI(got.String())
			if err != nil || !reflect.DeepEqual(again, got) {
				t.Fatalf("ParseURI(%q) = %#v, %v; want %#v", got.String(), again, err, got)
			}
		})
	}
}

func TestURIString(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{uriTests[0].in, uriTests[0].in},
		{"pkcs11:object=a%20b;token=t;id=KMS?pin-source=/p&" + softhsm,
			"pkcs11:token=t;object=a%20b;id=%4B%4D%53?" + softhsm + "&pin-source=file:/p"},
		{"pkcs11:object=k?" + softhsm + "&pin-source=file:////srv/pin", "pkcs11:object=k?" + softhsm + "&pin-source=file:////srv/pin"},
	} {
		u, err := hsm.ParseURI(tc.in)
		if err != nil {
			t.Fatalf("ParseURI(%q) = %v", tc.in, err)
		}
		if got := u.String(); got != tc.want {
			t.Errorf("ParseURI(%q).String() = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestParseURIRefused(t *testing.T) {
	for _, tc := range []struct {
		name, in, says string
	}{
		{"another scheme", "pkcs12:object=k?" + softhsm, `starts with "pkcs11:"`},
		{"pin-value", "pkcs11:object=k?" + softhsm + "&pin-value=123456", "use pin-source=file:PATH in the URI, or the environment variable KMS_PKCS11_PIN"},
		{"pin-value badly encoded", "pkcs11:object=k?" + softhsm + "&pin-value=1234%zz56", "KMS_PKCS11_PIN"},
		{"pin-value in the path", "pkcs11:object=k;pin-value=123456?" + softhsm, "KMS_PKCS11_PIN"},
		{"unknown path attribute", "pkcs11:object=k;colour=red?" + softhsm, `unknown path attribute "colour"`},
		{"unknown query attribute", "pkcs11:object=k?" + softhsm + "&colour=red", `unknown query attribute "colour"`},
		{"query attribute in the path", "pkcs11:object=k;" + softhsm, "module-path belongs in the URI's query"},
		{"path attribute in the query", "pkcs11:token=t?object=k&" + softhsm, "object belongs in the URI's path"},
		{"no module-path", "pkcs11:token=kms;object=k", "names no module-path"},
		{"module-name alone", "pkcs11:object=k?module-name=softhsm2", "names no module-path"},
		{"no object", "pkcs11:token=kms?" + softhsm, "names no key"},
		{"twice", "pkcs11:object=k;object=l?" + softhsm, "object appears more than once"},
		{"twice in the query", "pkcs11:object=k?" + softhsm + "&" + softhsm, "module-path appears more than once"},
		{"bad percent-encoding", "pkcs11:object=k%zz?" + softhsm, "bad percent-encoding"},
		{"truncated percent-encoding", "pkcs11:object=k%4?" + softhsm, "truncated percent-encoding"},
		{"empty value", "pkcs11:token=;object=k?" + softhsm, "token has no value"},
		{"no value", "pkcs11:token;object=k?" + softhsm, "1st path attribute of the URI is not name=value"},
		{"empty path attribute", "pkcs11:object=k;;token=t?" + softhsm, "2nd path attribute of the URI is not name=value"},
		{"PIN pasted in the path", "pkcs11:token=kms;123456;object=k?" + softhsm, "2nd path attribute of the URI is not name=value"},
		{"PIN pasted in the path with no name", "pkcs11:token=kms;object=k;=123456?" + softhsm, "3rd path attribute of the URI is not name=value"},
		{"PIN pasted in the query", "pkcs11:token=kms;object=k?" + softhsm + "&123456", "2nd query attribute of the URI is not name=value"},
		{"slot-id not a number", "pkcs11:slot-id=abc;object=k?" + softhsm, "slot-id"},
		{"slot-id signed", "pkcs11:slot-id=+3;object=k?" + softhsm, "slot-id"},
		{"library-version", "pkcs11:library-version=2.x;object=k?" + softhsm, "library-version"},
		{"type", "pkcs11:type=key;object=k?" + softhsm, `type "key"`},
		{"fragment", "pkcs11:object=k?" + softhsm + "#frag", "no fragment"},
		{"pin-source command", "pkcs11:object=k?" + softhsm + "&pin-source=%7Cecho%201234", ""},
		{"pin-source another scheme", "pkcs11:object=k?" + softhsm + "&pin-source=https://example.com/pin", "only file:PATH"},
		{"pin-source on another host", "pkcs11:object=k?" + softhsm + "&pin-source=file://vault/pin", "another host"},
		{"pin-source empty file", "pkcs11:object=k?" + softhsm + "&pin-source=file:", "names no file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := hsm.ParseURI(tc.in)
			if tc.name == "pin-source command" {
				// Not a scheme: a plain (relative) path, read as a file, never run.
				if err != nil || u.PINFile != "|echo 1234" {
					t.Fatalf("ParseURI(%q) = %#v, %v; want the file %q", tc.in, u, err, "|echo 1234")
				}
				return
			}
			if !errors.Is(err, hsm.ErrInvalid) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("ParseURI(%q) = %v, want ErrInvalid saying %q", tc.in, err, tc.says)
			}
			if strings.Contains(err.Error(), "123456") || strings.Contains(err.Error(), "1234%zz56") {
				t.Errorf("ParseURI(%q) = %v: the error holds the PIN", tc.in, err)
			}
			if !reflect.DeepEqual(u, hsm.URI{}) {
				t.Errorf("ParseURI(%q) returned %#v with its error", tc.in, u)
			}
		})
	}
}

func TestReadPIN(t *testing.T) {
	dir := t.TempDir()
	file := func(content string) hsm.URI {
		p := filepath.Join(dir, strings.NewReplacer("\n", "n", "\r", "r").Replace(content)+".pin")
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return hsm.URI{PINFile: p}
	}
	for _, tc := range []struct {
		name string
		u    hsm.URI
		env  string
		want string
		err  error
	}{
		{"file", file("1234"), "", "1234", nil},
		{"one newline trimmed", file("1234\n"), "", "1234", nil},
		{"CRLF trimmed", file("1234\r\n"), "", "1234", nil},
		{"only one newline trimmed", file("1234\n\n"), "", "1234\n", nil},
		{"spaces kept", file(" 1234 \n"), "", " 1234 ", nil},
		{"file before environment", file("1234\n"), "5678", "1234", nil},
		{"environment", hsm.URI{}, "5678", "5678", nil},
		{"empty file", file(""), "5678", "", hsm.ErrNoPIN},
		{"newline alone", file("\n"), "5678", "", hsm.ErrNoPIN},
		{"missing file, no fallback", hsm.URI{PINFile: filepath.Join(dir, "missing")}, "5678", "", hsm.ErrNoPIN},
		{"neither", hsm.URI{}, "", "", hsm.ErrNoPIN},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.u.ReadPIN(tc.env)
			if got != tc.want || !errors.Is(err, tc.err) && !(tc.err == nil && err == nil) {
				t.Fatalf("ReadPIN(%q) = %q, %v; want %q, %v", tc.env, got, err, tc.want, tc.err)
			}
			if err != nil && (strings.Contains(err.Error(), "1234") || strings.Contains(err.Error(), "5678")) {
				t.Errorf("ReadPIN() = %v: the error holds a PIN", err)
			}
		})
	}
	_, err := hsm.URI{}.ReadPIN("")
	if err == nil || !strings.Contains(err.Error(), "pin-source=file:PATH") || !strings.Contains(err.Error(), hsm.PINEnv) {
		t.Errorf("ReadPIN() with neither = %v, want it to name pin-source and %s", err, hsm.PINEnv)
	}
}

// FuzzParseURI: ParseURI never panics, and what it accepts prints to a
// URI that parses back to the same value (and so holds no pin-value).
func FuzzParseURI(f *testing.F) {
	for _, tc := range uriTests {
		f.Add(tc.in)
	}
	f.Add("pkcs11:object=k?" + softhsm + "&pin-value=1234")
	f.Add("pkcs11:object=%00%ff;id=?" + softhsm + "&pin-source=file:////x")
	f.Fuzz(func(t *testing.T, in string) {
		u, err := hsm.ParseURI(in)
		if err != nil {
			return
		}
		s := u.String() // ParseURI refuses pin-value: so s has none
		again, err := hsm.ParseURI(s)
		if err != nil || !reflect.DeepEqual(again, u) {
			t.Fatalf("ParseURI(%q) = %#v, %v; want %#v (from %q)", s, again, err, u, in)
		}
	})
}
