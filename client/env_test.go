package client_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/client"
	"github.com/ringkms/kms/kmstest"
)

// setEnv sets the client variables of the environment for the test,
// the ones not in vars empty.
func setEnv(t *testing.T, vars map[string]string) {
	t.Helper()
	for _, name := range []string{client.EnvAddr, client.EnvAPIKey, client.EnvAPIKeyFile, client.EnvCACert} {
		t.Setenv(name, vars[name])
	}
}

// TestFromEnv calls a server over HTTPS from a private CA with the
// settings of the environment alone, as kmsctl does.
func TestFromEnv(t *testing.T) {
	e := newTLSEnv(t)
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte(e.rootKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		vars map[string]string
	}{
		{"API key", map[string]string{client.EnvAddr: e.srv.URL + "/", client.EnvAPIKey: e.rootKey, client.EnvCACert: e.caFile}},
		{"API key file", map[string]string{client.EnvAddr: e.srv.URL, client.EnvAPIKeyFile: keyFile, client.EnvCACert: e.caFile}},
		{"API key wins over the file", map[string]string{client.EnvAddr: e.srv.URL, client.EnvAPIKey: e.rootKey, client.EnvAPIKeyFile: "/nonexistent", client.EnvCACert: e.caFile}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			setEnv(t, tt.vars)
			c := check(client.FromEnv())(t, "FromEnv")
			if c.BaseURL() != e.srv.URL {
				t.Errorf("BaseURL() = %q, want %q", c.BaseURL(), e.srv.URL)
			}
			if _, err := c.ListKeyRings(context.Background(), kms.PageRequest{}); err != nil {
				t.Fatalf("ListKeyRings() = %v", err)
			}
		})
	}

	t.Run("without KMS_CACERT", func(t *testing.T) {
		setEnv(t, map[string]string{client.EnvAddr: e.srv.URL, client.EnvAPIKey: e.rootKey})
		err := check(client.FromEnv())(t, "FromEnv").Healthz(context.Background())
		if got := wantKind(t, "Healthz", err, kms.KindInternal); !strings.Contains(got.Message, "not trusted") {
			t.Errorf("Healthz() = %v, want the certificate not trusted", err)
		}
	})
}

// TestFromEnvDefaults checks the default address, the credential sent,
// and that options win over the environment.
func TestFromEnvDefaults(t *testing.T) {
	setEnv(t, nil)
	c := check(client.FromEnv())(t, "FromEnv")
	if c.BaseURL() != client.DefaultAddr {
		t.Errorf("FromEnv() without KMS_ADDR: BaseURL() = %q, want %q", c.BaseURL(), client.DefaultAddr)
	}

	var got []string
	srv, _ := kmstest.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("Authorization"))
	}), "")
	for _, tt := range []struct {
		name string
		key  string
		opts []client.Option
		want string
	}{
		{"no key", "", nil, ""},
		{"KMS_API_KEY", " rk_env\n", nil, "Bearer rk_env"},
		{"an option wins", "rk_env", []client.Option{client.WithAPIKey("rk_option")}, "Bearer rk_option"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			setEnv(t, map[string]string{client.EnvAddr: srv.URL, client.EnvAPIKey: tt.key})
			got = nil
			if err := check(client.FromEnv(tt.opts...))(t, "FromEnv").Healthz(context.Background()); err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0] != tt.want {
				t.Errorf("Authorization = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestFromEnvErrors(t *testing.T) {
	dir := t.TempDir()
	empty, notPEM := filepath.Join(dir, "empty"), filepath.Join(dir, "not.pem")
	os.WriteFile(empty, []byte(" \n"), 0o600)
	os.WriteFile(notPEM, []byte("not a certificate"), 0o600)
	tests := []struct {
		name string
		vars map[string]string
		want string // in the message
	}{
		{"address without scheme", map[string]string{client.EnvAddr: "127.0.0.1:8200"}, "KMS_ADDR: base URL \"127.0.0.1:8200\" has no scheme: write http://127.0.0.1:8200, or https://127.0.0.1:8200"},
		{"missing key file", map[string]string{client.EnvAPIKeyFile: filepath.Join(dir, "nope")}, "KMS_API_KEY_FILE"},
		{"empty key file", map[string]string{client.EnvAPIKeyFile: empty}, "KMS_API_KEY_FILE: " + empty + " is empty"},
		{"missing CA file", map[string]string{client.EnvCACert: filepath.Join(dir, "nope")}, "KMS_CACERT"},
		{"CA file not PEM", map[string]string{client.EnvCACert: notPEM}, "KMS_CACERT: " + notPEM + " holds no PEM certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			setEnv(t, tt.vars)
			_, err := client.FromEnv()
			if got := wantKind(t, "FromEnv", err, kms.KindInvalid); !strings.Contains(got.Message, tt.want) {
				t.Errorf("FromEnv() = %v, want a message with %q", err, tt.want)
			}
		})
	}
}
