package awskms_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/awskms"
	"github.com/ringkms/kms/internal/sigv4"
	"github.com/ringkms/kms/kmstest"
)

// client calls the handler as AWS's SDKs do: POST / signed with an API
// key's ID and secret. AWS's own SDK and CLI drive kmsd from the
// integration module.
type client struct {
	url, id, secret string
	session         string // X-Amz-Security-Token, when set
}

func newClient(t *testing.T, flags kms.Flags) (*client, *kmstest.Env) {
	t.Helper()
	env := kmstest.New(t, kmstest.MemoryStore(t), kms.Options{})
	_, url := kmstest.Serve(t, awskms.New(env.Service, awskms.Options{}), "")
	key, err := env.Service.CreateAPIKey(env.RootCtx, kms.APIKeyInput{AccountID: kms.BootstrapAccountUID, AccountByUID: true, Flags: flags})
	if err != nil {
		t.Fatal(err)
	}
	return &client{url: url, id: key.KeyID, secret: key.Key}, env
}

// do calls op with in and decodes the answer into out (nil: none),
// answering the status and AWS's __type of an error.
func (c *client) do(t *testing.T, op string, in, out any) (int, string) {
	t.Helper()
	body, _ := json.Marshal(in)
	r, _ := http.NewRequest("POST", c.url+"/", bytes.NewReader(body))
	r.Header.Set("Content-Type", awskms.ContentType)
	r.Header.Set("X-Amz-Target", awskms.TargetPrefix+op)
	if c.session != "" {
		r.Header.Set("X-Amz-Security-Token", c.session)
	}
	if err := sigv4.Sign(r, body, c.id, c.secret, "eu-west-3", "kms", time.Now()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		var e struct {
			Type string `json:"__type"`
		}
		json.Unmarshal(b, &e)
		return resp.StatusCode, e.Type
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s answered %s: %v", op, b, err)
		}
	}
	return 200, ""
}

func TestEncryptDecrypt(t *testing.T) {
	c, env := newClient(t, kms.Flags{"*": true})
	var made struct {
		KeyMetadata struct{ KeyId, Arn, KeySpec, KeyState string }
	}
	if code, typ := c.do(t, "CreateKey", map[string]any{}, &made); code != 200 {
		t.Fatalf("CreateKey: %d %s", code, typ)
	}
	m := made.KeyMetadata
	if len(m.KeyId) != 32 || m.Arn != "arn:aws:kms:eu-west-3:000000000000:key/"+m.KeyId || m.KeySpec != "SYMMETRIC_DEFAULT" || m.KeyState != "Enabled" {
		t.Fatalf("CreateKey's metadata = %+v", m)
	}
	ctx := map[string]string{"purpose": "test", "tenant": "a"}
	var enc struct {
		CiphertextBlob []byte
		KeyId          string
	}
	if code, typ := c.do(t, "Encrypt", map[string]any{"KeyId": m.Arn, "Plaintext": []byte("hello"), "EncryptionContext": ctx}, &enc); code != 200 || enc.KeyId != m.Arn {
		t.Fatalf("Encrypt: %d %s %+v", code, typ, enc)
	}
	var dec struct {
		Plaintext []byte
		KeyId     string
	}
	if code, typ := c.do(t, "Decrypt", map[string]any{"CiphertextBlob": enc.CiphertextBlob, "EncryptionContext": ctx}, &dec); code != 200 || string(dec.Plaintext) != "hello" || dec.KeyId != m.Arn {
		t.Fatalf("Decrypt without KeyId: %d %s %+v", code, typ, dec)
	}
	for name, in := range map[string]map[string]any{
		"another context": {"CiphertextBlob": enc.CiphertextBlob, "EncryptionContext": map[string]string{"purpose": "test"}},
		"no context":      {"CiphertextBlob": enc.CiphertextBlob},
		"altered":         {"CiphertextBlob": append(bytes.Clone(enc.CiphertextBlob[:len(enc.CiphertextBlob)-1]), enc.CiphertextBlob[len(enc.CiphertextBlob)-1]^1), "EncryptionContext": ctx},
		"not a blob":      {"CiphertextBlob": []byte("nope"), "EncryptionContext": ctx},
	} {
		if code, typ := c.do(t, "Decrypt", in, nil); code != 400 || typ != "InvalidCiphertextException" {
			t.Errorf("Decrypt, %s: %d %s, want InvalidCiphertextException", name, code, typ)
		}
	}
	var dk struct {
		CiphertextBlob, Plaintext []byte
	}
	if code, typ := c.do(t, "GenerateDataKey", map[string]any{"KeyId": m.KeyId, "KeySpec": "AES_256"}, &dk); code != 200 || len(dk.Plaintext) != 32 {
		t.Fatalf("GenerateDataKey: %d %s", code, typ)
	}
	if c.do(t, "Decrypt", map[string]any{"CiphertextBlob": dk.CiphertextBlob}, &dec); !bytes.Equal(dec.Plaintext, dk.Plaintext) {
		t.Fatal("the data key does not decrypt to its plaintext")
	}
	recs, err := env.Service.SearchActivity(env.RootCtx, kms.ActivityFilter{KeyID: c.id, Action: "transit.encrypt"}, kms.PageRequest{})
	if err != nil || len(recs.Data) != 1 || recs.Data[0].Props["call"] != "aws.Encrypt" || recs.Data[0].Props["version"] == nil {
		t.Errorf("the record of Encrypt: %+v, %v; want it named aws.Encrypt, with the version", recs, err)
	}
	if code, typ := c.do(t, "GetParametersForImport", map[string]any{}, nil); code != 400 || typ != "UnsupportedOperationException" {
		t.Errorf("an operation not served: %d %s", code, typ)
	}
}

// A request signed with another secret, or not signed, or by a key
// without the flag, is refused with AWS's exceptions.
func TestRefusals(t *testing.T) {
	c, env := newClient(t, kms.Flags{"keyring.*.read": true})
	bad := *c
	bad.secret = c.secret + "x"
	if code, typ := bad.do(t, "ListKeys", map[string]any{}, nil); code != 400 || typ != "InvalidSignatureException" {
		t.Errorf("a wrong secret: %d %s", code, typ)
	}
	unknown := *c
	unknown.id = "0123456789abcdef0123456789abcdef"
	if code, typ := unknown.do(t, "ListKeys", map[string]any{}, nil); code != 400 || typ != "UnrecognizedClientException" {
		t.Errorf("an unknown access key: %d %s", code, typ)
	}
	if code, typ := c.do(t, "CreateKey", map[string]any{}, nil); code != 400 || typ != "AccessDeniedException" {
		t.Errorf("CreateKey without the flag: %d %s", code, typ)
	}
	// The operation is the one signed: a body signed for one operation
	// is not answered as another's.
	body := []byte(`{"KeyId":"alias/x"}`)
	r, _ := http.NewRequest("POST", c.url+"/", bytes.NewReader(body))
	r.Header.Set("Content-Type", awskms.ContentType)
	if err := sigv4.Sign(r, body, c.id, c.secret, "eu-west-3", "kms", time.Now()); err != nil {
		t.Fatal(err)
	}
	r.Header.Set("X-Amz-Target", awskms.TargetPrefix+"DisableKey")
	unsigned, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	unsignedBody, _ := io.ReadAll(unsigned.Body)
	unsigned.Body.Close()
	if unsigned.StatusCode != 400 || !strings.Contains(string(unsignedBody), "IncompleteSignatureException") {
		t.Errorf("an operation added unsigned: %d %s", unsigned.StatusCode, unsignedBody)
	}
	resp, err := http.Post(c.url+"/", awskms.ContentType, strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("an unsigned request: %d", resp.StatusCode)
	}
	recs, _ := env.Service.SearchActivity(env.RootCtx, kms.ActivityFilter{KeyID: c.id}, kms.PageRequest{})
	if recs == nil || len(recs.Data) != 1 || recs.Data[0].Valid || recs.Data[0].Props["call"] != "aws.CreateKey" {
		t.Errorf("the refusal of CreateKey was not recorded as the call aws.CreateKey: %+v", recs)
	}
}

// A User signs in with its access token as the session token (the
// User's ID the access key, the token the secret): it acts with its own
// flags, and its calls are recorded as its own. Another secret, an API
// key's ID, or a token logged out is refused with AWS's exceptions.
func TestSessionToken(t *testing.T) {
	c, env := newClient(t, kms.Flags{"*": true})
	res, err := env.Service.CreateUser(env.RootCtx, kms.UserInput{Username: "ann", Email: "ann@example.com", FirstName: "Ann", LastName: "Lee",
		Flags: kms.Flags{"keyring.*.create": true, "keyring.*.encrypt": true}})
	if err != nil {
		t.Fatal(err)
	}
	login, err := env.Service.Login(context.Background(), kms.LoginInput{Username: "ann", Password: res.Password})
	if err != nil {
		t.Fatal(err)
	}
	ann := &client{url: c.url, id: res.User.ID, secret: login.AccessToken, session: login.AccessToken}
	var key struct{ KeyMetadata struct{ KeyId string } }
	if code, typ := ann.do(t, "CreateKey", map[string]any{}, &key); code != 200 {
		t.Fatalf("CreateKey with a session token: %d %s", code, typ)
	}
	if code, typ := ann.do(t, "Encrypt", map[string]any{"KeyId": key.KeyMetadata.KeyId, "Plaintext": []byte("p")}, nil); code != 200 {
		t.Fatalf("Encrypt with a session token: %d %s", code, typ)
	}
	if code, typ := ann.do(t, "ListKeys", map[string]any{}, nil); code != 400 || typ != "AccessDeniedException" {
		t.Errorf("ListKeys without the flag: %d %s", code, typ)
	}
	recs, _ := env.Service.SearchActivity(env.RootCtx, kms.ActivityFilter{Action: "transit.encrypt"}, kms.PageRequest{})
	if recs == nil || len(recs.Data) != 1 || recs.Data[0].KeyID != res.User.ID || recs.Data[0].Props["call"] != "aws.Encrypt" {
		t.Errorf("the Encrypt was not recorded as the User's call aws.Encrypt: %+v", recs)
	}

	wrong := *ann
	wrong.secret = "not the token"
	if code, typ := wrong.do(t, "Encrypt", map[string]any{"KeyId": key.KeyMetadata.KeyId, "Plaintext": []byte("p")}, nil); code != 400 || typ != "InvalidSignatureException" {
		t.Errorf("a session token signed with another secret: %d %s", code, typ)
	}
	other := *ann
	other.id = c.id
	if code, typ := other.do(t, "Encrypt", map[string]any{"KeyId": key.KeyMetadata.KeyId, "Plaintext": []byte("p")}, nil); code != 400 || typ != "UnrecognizedClientException" {
		t.Errorf("a session token under an API key's ID: %d %s", code, typ)
	}
	if err := env.Service.Logout(kms.WithPrincipal(context.Background(), mustAuth(t, env, login.AccessToken)), login.AccessToken); err != nil {
		t.Fatal(err)
	}
	if code, typ := ann.do(t, "Encrypt", map[string]any{"KeyId": key.KeyMetadata.KeyId, "Plaintext": []byte("p")}, nil); code != 400 || typ != "UnrecognizedClientException" {
		t.Errorf("a session token logged out: %d %s", code, typ)
	}
}

func mustAuth(t *testing.T, env *kmstest.Env, secret string) *kms.Principal {
	t.Helper()
	p, err := env.Service.Authenticate(context.Background(), secret)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
