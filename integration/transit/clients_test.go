package transit_test

import (
	"errors"
	"testing"
	"time"

	vault "github.com/hashicorp/vault/api"
	bao "github.com/openbao/openbao/api/v2"

	"github.com/ringkms/kms/integration/internal/harness"
	"github.com/ringkms/kms/internal/kmsdtest"
)

// api is what the route suite asks of a client of Vault's HTTP API: the
// logical calls of HashiCorp's client and of OpenBao's, whose answers
// are the data of the secret (nil when the client answers none), and
// the status and messages of an error answer.
type api interface {
	write(path string, data map[string]any) (map[string]any, error)
	read(path string) (map[string]any, error)
	list(path string) (map[string]any, error)
	delete(path string) error
	// refusal returns the HTTP status and messages of an error answer
	// (0 and none for another error).
	refusal(err error) (int, []string)
}

// realClient names a real client the suites run with, and makes it for
// a kmsd and a credential.
type realClient struct {
	name, key string // key: the name of the transit key its tests use
	make      func(t *testing.T, p *kmsdtest.Proc, secret string) api
}

// clients are the real clients the suites run with.
var clients = []realClient{
	{"HashiCorp's vault/api", "hashicorp", func(t *testing.T, p *kmsdtest.Proc, secret string) api {
		return vaultAPI{vaultClient(t, p, secret)}
	}},
	{"OpenBao's api/v2", "openbao", func(t *testing.T, p *kmsdtest.Proc, secret string) api {
		return baoAPI{baoClient(t, p, secret)}
	}},
}

// eachClient runs suite as a subtest for each client, on one kmsd
// -transit of a fresh instance, and at the end stops it and verifies its
// activity chain.
func eachClient(t *testing.T, suite func(t *testing.T, cl realClient, in *harness.Instance, p *kmsdtest.Proc)) {
	in := harness.New(t)
	p := in.Start(t, "-transit")
	for _, cl := range clients {
		t.Run(cl.name, func(t *testing.T) { suite(t, cl, in, p) })
	}
	p.Stop(t)
	in.VerifyAudit(t)
}

// baoClient is OpenBao's client of the kmsd p, acting with secret,
// without retries or the environment's BAO_ and VAULT_ settings.
func baoClient(t *testing.T, p *kmsdtest.Proc, secret string) *bao.Client {
	t.Helper()
	cfg := bao.DefaultConfig()
	cfg.Address, cfg.MaxRetries, cfg.Timeout = p.URL, 0, 30*time.Second
	c, err := bao.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.SetToken(secret)
	return c
}

type vaultAPI struct{ c *vault.Client }

func (v vaultAPI) write(path string, data map[string]any) (map[string]any, error) {
	return vaultData(v.c.Logical().Write(path, data))
}
func (v vaultAPI) read(path string) (map[string]any, error) {
	return vaultData(v.c.Logical().Read(path))
}
func (v vaultAPI) list(path string) (map[string]any, error) {
	return vaultData(v.c.Logical().List(path))
}
func (v vaultAPI) delete(path string) error {
	_, err := v.c.Logical().Delete(path)
	return err
}
func (vaultAPI) refusal(err error) (int, []string) {
	var re *vault.ResponseError
	if errors.As(err, &re) {
		return re.StatusCode, re.Errors
	}
	return 0, nil
}

func vaultData(s *vault.Secret, err error) (map[string]any, error) {
	if s == nil {
		return nil, err
	}
	return s.Data, err
}

type baoAPI struct{ c *bao.Client }

func (b baoAPI) write(path string, data map[string]any) (map[string]any, error) {
	return baoData(b.c.Logical().Write(path, data))
}
func (b baoAPI) read(path string) (map[string]any, error) { return baoData(b.c.Logical().Read(path)) }
func (b baoAPI) list(path string) (map[string]any, error) { return baoData(b.c.Logical().List(path)) }
func (b baoAPI) delete(path string) error {
	_, err := b.c.Logical().Delete(path)
	return err
}
func (baoAPI) refusal(err error) (int, []string) {
	var re *bao.ResponseError
	if errors.As(err, &re) {
		return re.StatusCode, re.Errors
	}
	return 0, nil
}

func baoData(s *bao.Secret, err error) (map[string]any, error) {
	if s == nil {
		return nil, err
	}
	return s.Data, err
}
