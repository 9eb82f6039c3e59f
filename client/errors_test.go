package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/client"
)

// TestErrors checks that error answers come back as the server's kind,
// message and details, and that errors.Is matches the sentinels.
func TestErrors(t *testing.T) {
	e := newEnv(t, "")
	c, ctx := e.c, context.Background()
	check(c.CreateKeyRing(ctx, kms.CreateKeyRingInput{Name: "orders", KEM: "x25519"}))(t, "CreateKeyRing")
	check(c.CreateUser(ctx, kms.UserInput{Username: "ada", Email: "ada@example.com", FirstName: "Ada", LastName: "Lovelace"}))(t, "CreateUser")
	inv := check(c.Invite(ctx, kms.InviteInput{Username: "alan", Email: "alan@example.com", FirstName: "Alan", LastName: "Turing"}))(t, "Invite")
	invToken := tokenOf(t, inv.LoginURL)
	limited := e.keyClient(t, "keyring.orders.encrypt")
	stranger := c.WithBearer("rk_not-a-real-key-000000000000000000000000")

	cases := []struct {
		name     string
		call     func() error
		kind     kms.Kind
		sentinel error
		check    func(t *testing.T, e *kms.Error)
	}{
		{name: "404 unknown ring", kind: kms.KindNotFound, sentinel: kms.ErrNotFound,
			call: func() error { _, err := c.GetKeyRing(ctx, kms.RingRef{Name: "nope"}); return err }},
		{name: "404 unknown user", kind: kms.KindNotFound, sentinel: kms.ErrNotFound,
			call: func() error { _, err := c.GetUser(ctx, kms.UserRef{Value: "nobody"}); return err }},
		{name: "403 missing flag", kind: kms.KindPermissionDenied, sentinel: kms.ErrPermissionDenied,
			call: func() error { _, err := limited.Rotate(ctx, kms.RotateInput{RingName: "orders"}); return err }},
		{name: "401 unknown API key", kind: kms.KindUnauthenticated, sentinel: kms.ErrUnauthenticated,
			call: func() error { _, err := stranger.ListKeyRings(ctx, kms.PageRequest{}); return err }},
		{name: "401 no credential", kind: kms.KindUnauthenticated, sentinel: kms.ErrUnauthenticated,
			call: func() error { _, err := c.WithBearer("").ListKeyRings(ctx, kms.PageRequest{}); return err }},
		{name: "400 missing name", kind: kms.KindInvalid, sentinel: kms.ErrInvalid,
			call: func() error { _, err := c.CreateKeyRing(ctx, kms.CreateKeyRingInput{}); return err },
			check: func(t *testing.T, e *kms.Error) {
				if !strings.Contains(e.Message, "name") {
					t.Errorf("Message = %q, want it to name the member", e.Message)
				}
			}},
		{name: "400 conflict existing ring", kind: kms.KindConflict, sentinel: kms.ErrConflict,
			call: func() error { _, err := c.CreateKeyRing(ctx, kms.CreateKeyRingInput{Name: "ORDERS"}); return err }},
		{name: "400 negative limit", kind: kms.KindInvalid, sentinel: kms.ErrInvalid,
			call: func() error { _, err := c.ListKeyRings(ctx, kms.PageRequest{Limit: -1}); return err }},
		{name: "400 with fields", kind: kms.ErrorKind(userTakenErr(t, e)), sentinel: nil,
			call: func() error {
				_, err := c.CreateUser(ctx, kms.UserInput{Username: "ADA", Email: "ada@example.com", FirstName: "A", LastName: "L"})
				return err
			},
			check: func(t *testing.T, got *kms.Error) {
				want := kms.AsError(userTakenErr(t, e))
				if !reflect.DeepEqual(got.Fields, want.Fields) || got.Message != want.Message {
					t.Errorf("error = %q %v, want the Service's %q %v", got.Message, got.Fields, want.Message, want.Fields)
				}
				if got.Fields["username"] == "" || got.Fields["email"] == "" {
					t.Errorf("Fields = %v, want username and email", got.Fields)
				}
			}},
		{name: "401 invitation state invalid", kind: kms.KindUnauthenticated, sentinel: kms.ErrUnauthenticated,
			call: func() error { _, err := c.ValidateInvite(ctx, "rki_forged"); return err },
			check: func(t *testing.T, e *kms.Error) {
				if e.State != kms.InviteInvalid {
					t.Errorf("State = %q, want %q", e.State, kms.InviteInvalid)
				}
			}},
		{name: "400 malformed password", kind: kms.KindInvalid, sentinel: kms.ErrInvalid,
			call: func() error { _, err := c.CompleteInvite(ctx, invToken, "short"); return err },
			check: func(t *testing.T, e *kms.Error) {
				if e.State != "malformed-password" {
					t.Errorf("State = %q, want malformed-password", e.State)
				}
				if got, want := e.Details, kms.CheckPassword("short"); !reflect.DeepEqual(got, want) {
					t.Errorf("Details = %#v, want %#v", got, want)
				}
			}},
		{name: "400 empty answer of reset completion", kind: kms.KindInvalid, sentinel: kms.ErrInvalid,
			call: func() error { return c.CompletePasswordReset(ctx, "rkr_forged", "N3w-password") }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			got := wantKind(t, tc.name, err, tc.kind)
			if got.Message == "" {
				t.Errorf("%s: no message", tc.name)
			}
			if tc.sentinel != nil && !errors.Is(err, tc.sentinel) {
				t.Errorf("errors.Is(%v, %v) = false", err, tc.sentinel)
			}
			if !strings.HasPrefix(err.Error(), "kms: ") {
				t.Errorf("Error() = %q, want the kms: prefix", err.Error())
			}
			if tc.check != nil {
				tc.check(t, got)
			}
		})
	}
}

// userTakenErr is the Service's own error for a username and an email
// already taken, to compare the client's with.
func userTakenErr(t testing.TB, e *env) error {
	t.Helper()
	_, err := e.svc.CreateUser(e.rootCtx, kms.UserInput{Username: "ADA", Email: "ada@example.com", FirstName: "A", LastName: "L"})
	if err == nil {
		t.Fatal("CreateUser(taken) via the Service = nil error")
	}
	return err
}

// TestDecryptUnprocessable checks that a decrypt that fails verification
// returns the 422 result and an Unprocessable error, as the Service does.
func TestDecryptUnprocessable(t *testing.T) {
	e := newEnv(t, "")
	c, ctx := e.c, context.Background()
	check(c.CreateKeyRing(ctx, kms.CreateKeyRingInput{Name: "orders", KEM: "x25519"}))(t, "CreateKeyRing")
	enc := check(c.Encrypt(ctx, kms.EncryptInput{RingName: "orders", Asset: &kms.AssetInput{Data: map[string]any{"v": 1}}}))(t, "Encrypt")
	// The Asset changes after the header signed it.
	check(c.Encrypt(ctx, kms.EncryptInput{RingName: "orders", Asset: &kms.AssetInput{AssetID: enc.Asset.ID, Data: map[string]any{"v": 2}}}))(t, "Encrypt (update)")
	in := kms.DecryptInput{Hash: enc.Hash, Header: enc.Header}

	got, err := c.Decrypt(ctx, in)
	want, wantErr := e.svc.Decrypt(e.rootCtx, in)
	if wantErr == nil {
		t.Fatal("Service.Decrypt(changed Asset) = nil error")
	}
	ge := wantKind(t, "Decrypt(changed Asset)", err, kms.KindUnprocessable)
	if !errors.Is(err, kms.ErrUnprocessable) {
		t.Errorf("errors.Is(%v, ErrUnprocessable) = false", err)
	}
	if got == nil {
		t.Fatal("Decrypt(changed Asset) = nil result, want the 422 result")
	}
	if got.Asset.Valid || got.Key != nil || got.Asset.ID != enc.Asset.ID || got.RingName != "orders" {
		t.Errorf("Decrypt(changed Asset) = %+v, want asset.valid false, no key", got)
	}
	same(t, "Decrypt(changed Asset)", got, want)
	if ge.Message != kms.ErrorMessage(wantErr) {
		t.Errorf("message = %q, want the Service's %q", ge.Message, kms.ErrorMessage(wantErr))
	}

	// Another error of decrypt has no result.
	res, err := c.Decrypt(ctx, kms.DecryptInput{Hash: enc.Hash})
	wantKind(t, "Decrypt(no header)", err, kms.KindInvalid)
	if res != nil {
		t.Errorf("Decrypt(no header) = %+v, want no result", res)
	}
}

// answer is a handler that answers status with a body of type ctype
// ("" for no Content-Type).
func answer(status int, ctype, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		if ctype != "" {
			w.Header().Set("Content-Type", ctype)
		}
		w.WriteHeader(status)
		fmt.Fprint(w, body)
	}
}

// TestTransportErrors checks answers that do not come from httpapi: 5xx,
// answers that are not JSON, unknown codes, oversize answers, a server
// that is gone.
func TestTransportErrors(t *testing.T) {
	cases := []struct {
		name    string
		handler http.HandlerFunc
		kind    kms.Kind
		msg     string // part of the message
	}{
		{"502 HTML", answer(http.StatusBadGateway, "text/html", "<html>bad gateway</html>"), kms.KindUnavailable, "502"},
		{"504 from a proxy", answer(http.StatusGatewayTimeout, "", ""), kms.KindUnavailable, "504"},
		{"507 no space", answer(http.StatusInsufficientStorage, "application/json", `{"message":"insufficient storage","code":"insufficient_storage"}`), kms.KindNoSpace, "insufficient storage"},
		{"500 JSON", answer(http.StatusInternalServerError, "application/json", `{"message":"internal error","code":"internal"}`), kms.KindInternal, "internal error"},
		{"503 unavailable", answer(http.StatusServiceUnavailable, "application/json", `{"message":"service unavailable","code":"unavailable"}`), kms.KindUnavailable, "service unavailable"},
		{"500 JSON without a code", answer(http.StatusInternalServerError, "application/json", `{"message":"boom"}`), kms.KindInternal, "boom (HTTP 500)"},
		{"200 not JSON", answer(http.StatusOK, "text/plain", "ok"), kms.KindInternal, "200"},
		{"200 bad JSON", answer(http.StatusOK, "application/json", `{"id":`), kms.KindInternal, "200"},
		{"404 plain text", func(w http.ResponseWriter, _ *http.Request) {
			http.NotFound(w, nil)
		}, kms.KindInternal, "404"},
		{"429 rate limited", answer(http.StatusTooManyRequests, "application/json", `{"message":"too many attempts","code":"rate_limited"}`), kms.KindRateLimited, "too many"},
		{"unknown code, status decides", answer(http.StatusNotFound, "application/json", `{"message":"gone fishing","code":"some_new_code"}`), kms.KindNotFound, "gone fishing"},
		{"405 method not allowed", answer(http.StatusMethodNotAllowed, "application/json", `{"message":"method GET is not allowed on this endpoint; allowed: PUT","code":"method_not_allowed"}`), kms.KindInvalid, "not allowed"},
		{"oversize answer", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			chunk := strings.Repeat(" ", 1<<20)
			for range client.MaxResponseBytes>>20 + 1 {
				fmt.Fprint(w, chunk)
			}
		}, kms.KindInternal, "larger than"},
	}
	coded := map[string]bool{"507 no space": true, "500 JSON": true, "503 unavailable": true}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			c := check(client.New(srv.URL))(t, "client.New")
			_, err := c.GetAccount(context.Background(), kms.AccountRef{Value: "x"})
			got := wantKind(t, tc.name, err, tc.kind)
			if !strings.Contains(got.Message, tc.msg) {
				t.Errorf("message = %q, want it to contain %q", got.Message, tc.msg)
			}
			// An answer with a code of the service's says its status
			// once, by the code: the message is the service's alone.
			if coded[tc.name] && got.Message != tc.msg {
				t.Errorf("message = %q, want the service's %q alone", got.Message, tc.msg)
			}
		})
	}

	t.Run("server gone", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		base := srv.URL
		srv.Close()
		c := check(client.New(base))(t, "client.New")
		err := c.Healthz(context.Background())
		got := wantKind(t, "Healthz(closed server)", err, kms.KindUnavailable)
		if got.Err == nil {
			t.Error("Err = nil, want the network error")
		}
		// A secret in the path stays out of the error.
		const secret = "rk_do-not-show-me-0000000000000000000000"
		_, err = c.DeleteAPIKey(context.Background(), kms.APIKeyRef{Value: secret, BySecret: true})
		wantKind(t, "DeleteAPIKey(closed server)", err, kms.KindUnavailable)
		if strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "/auth/apikey/{apikey}") {
			t.Errorf("DeleteAPIKey(closed server) = %q, want the route's pattern and no secret", err)
		}
	})

	t.Run("context canceled", func(t *testing.T) {
		srv := httptest.NewServer(http.NotFoundHandler())
		defer srv.Close()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := check(client.New(srv.URL))(t, "client.New").Healthz(ctx)
		wantKind(t, "Healthz(canceled)", err, kms.KindInternal)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("errors.Is(%v, context.Canceled) = false", err)
		}
	})
}

// TestNew checks base URLs.
func TestNew(t *testing.T) {
	for _, base := range []string{"", "kms.example.com", "ftp://kms.example.com", "http://", "http://h/?q=1", "http://h/#f", "http://u:p@h/", "http://h/%zz"} {
		if _, err := client.New(base); !errors.Is(err, kms.ErrInvalid) {
			t.Errorf("New(%q) = %v, want an Invalid error", base, err)
		}
	}
	// An address without its scheme: the error says what to write.
	for _, base := range []string{"127.0.0.1:8200", "localhost:8200", "kms.example.com"} {
		_, err := client.New(base)
		if msg := kms.ErrorMessage(err); !strings.Contains(msg, "write http://"+base+", or https://"+base) {
			t.Errorf("New(%q) = %v, want it to say to write http://%s or https://%s", base, err, base, base)
		}
	}
	for base, want := range map[string]string{
		"http://127.0.0.1:8200":      "http://127.0.0.1:8200",
		"http://127.0.0.1:8200/":     "http://127.0.0.1:8200",
		"https://kms.example/kms/":   "https://kms.example/kms",
		"https://kms.example/a/kms/": "https://kms.example/a/kms",
	} {
		c, err := client.New(base)
		if err != nil || c.BaseURL() != want {
			t.Errorf("New(%q) = %v, %v; want base URL %q", base, c, err, want)
		}
	}
}

// TestMountedUnderPrefix runs the handler under /kms/ of a mux, beside
// the app's own route, with the prefix in the client's base URL.
func TestMountedUnderPrefix(t *testing.T) {
	e := newEnv(t, "/kms/")
	c, ctx := e.c, context.Background()
	if !strings.HasSuffix(c.BaseURL(), "/kms") {
		t.Fatalf("BaseURL() = %q, want the /kms prefix", c.BaseURL())
	}
	check(struct{}{}, c.Healthz(ctx))(t, "Healthz")
	made := check(c.CreateKeyRing(ctx, kms.CreateKeyRingInput{Name: "mounted", KEM: "x25519"}))(t, "CreateKeyRing")
	got := check(c.GetKeyRing(ctx, kms.RingRef{Name: made.Ring.ID, ByID: true}))(t, "GetKeyRing")
	same(t, "GetKeyRing", got, made.Ring)
	_, err := c.GetKey(ctx, kms.RingRef{Name: "mounted"}, "0123456789abcdef0123456789abcdef")
	wantKind(t, "GetKey(unknown)", err, kms.KindNotFound)

	// Without the prefix the app answers, not the KMS: not JSON.
	bare := check(client.New(e.srv.URL))(t, "client.New")
	err = bare.Healthz(ctx)
	if got := wantKind(t, "Healthz without the prefix", err, kms.KindInternal); !strings.Contains(got.Message, "418") {
		t.Errorf("message = %q, want the status 418", got.Message)
	}
}

// TestConcurrent shares one client among goroutines (run with -race).
func TestConcurrent(t *testing.T) {
	e := newEnv(t, "")
	ctx := context.Background()
	check(e.c.CreateKeyRing(ctx, kms.CreateKeyRingInput{Name: "busy", KEM: "x25519"}))(t, "CreateKeyRing")
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() {
			c := e.c
			enc, err := c.Encrypt(ctx, kms.EncryptInput{RingName: "busy"})
			if err != nil {
				errs <- err
				return
			}
			if _, err := c.Decrypt(ctx, kms.DecryptInput{Hash: enc.Hash, Header: enc.Header}); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestMethodsMatchService checks that every method the Client shares with
// kms.Service has the Service's results, and its arguments but for the
// documented differences.
func TestMethodsMatchService(t *testing.T) {
	ct, st := reflect.TypeFor[*client.Client](), reflect.TypeFor[*kms.Service]()
	for _, name := range []string{
		"CreateKeyRing", "GetKeyRing", "ListKeyRings", "DeleteKeyRing", "ListKeys", "GetKey", "Rotate", "GetConfig", "SetConfig",
		"Encrypt", "Decrypt", "EncryptBatch", "DecryptBatch", "LookupHash", "LookupHeader", "SigningKeys", "CreateAsymKeyRing", "GetAsymKey", "RotateAsym",
		"SetKeyState", "DestroyKey", "CancelDestroyKey", "SetAsymKeyState", "DestroyAsymKey", "CancelDestroyAsymKey", "KeyUsage", "ListKeyHashes",
		"GetAsset", "DeleteAsset", "SearchAssets", "GetLineage",
		"CreateAccount", "GetAccount", "ListAccounts", "UpdateAccount", "DeleteAccount", "ListAccountAPIKeys",
		"CreateAPIKey", "ListAPIKeys", "GetAPIKey", "UpdateAPIKey", "DeleteAPIKey", "SearchAPIKeysByRing", "ValidateAPIKey",
		"CreateUser", "GetUser", "UpdateUser", "DeleteUser", "ListUsers", "Invite", "ValidateInvite", "CompleteInvite",
		"Login", "Refresh", "Logout", "StartPasswordReset", "ValidatePasswordReset", "CompletePasswordReset", "SearchActivity", "GetActivity", "Healthz",
	} {
		if _, ok := ct.MethodByName(name); !ok {
			t.Errorf("Client has no method %s", name)
		}
	}
	clientOnly := map[string]bool{"Healthz": true, "BaseURL": true, "WithBearer": true, "NewVerifier": true}
	// Refresh and Logout take the client's own bearer secret instead of a
	// token argument.
	ownToken := map[string]bool{"Refresh": true, "Logout": true}
	for i := range ct.NumMethod() {
		cm := ct.Method(i)
		if clientOnly[cm.Name] {
			continue
		}
		sm, ok := st.MethodByName(cm.Name)
		if !ok {
			if cm.Name == "SearchActivity" {
				continue // POST /auth/search/activity; the Service has no SearchActivity yet
			}
			t.Errorf("Client.%s: kms.Service has no such method", cm.Name)
			continue
		}
		if !sameTypes(outs(cm.Type), outs(sm.Type)) {
			t.Errorf("Client.%s returns %v, Service.%s %v", cm.Name, outs(cm.Type), sm.Name, outs(sm.Type))
		}
		sin := ins(sm.Type)
		if ownToken[cm.Name] {
			sin = sin[:len(sin)-1]
		}
		if !sameTypes(ins(cm.Type), sin) {
			t.Errorf("Client.%s takes %v, Service.%s %v", cm.Name, ins(cm.Type), sm.Name, sin)
		}
	}
}

func ins(f reflect.Type) []reflect.Type {
	var out []reflect.Type
	for i := 1; i < f.NumIn(); i++ { // after the receiver
		out = append(out, f.In(i))
	}
	return out
}

func outs(f reflect.Type) []reflect.Type {
	var out []reflect.Type
	for i := range f.NumOut() {
		out = append(out, f.Out(i))
	}
	return out
}

func sameTypes(a, b []reflect.Type) bool { return reflect.DeepEqual(a, b) }
