package client

import (
	"crypto/x509"
	"os"
	"strings"

	"github.com/ringkms/kms"
)

// The client settings of the environment. Every client of ringkms reads
// these names: FromEnv, kmsctl, kmsbench and the examples. kmsd does not:
// its listen address is KMS_LISTEN.
const (
	EnvAddr       = "KMS_ADDR"         // the service's base URL, http(s)://host:port[/prefix]
	EnvAPIKey     = "KMS_API_KEY"      // the API key (or a User's access token) itself
	EnvAPIKeyFile = "KMS_API_KEY_FILE" // a file that holds it, when KMS_API_KEY is not set
	EnvCACert     = "KMS_CACERT"       // a PEM file of the CA certificates to trust in place of the system's
)

// DefaultAddr is the base URL when KMS_ADDR is not set: the address kmsd
// listens on by default.
const DefaultAddr = "http://127.0.0.1:8200"

// FromEnv returns a Client configured by the environment, as kmsctl is:
// the base URL KMS_ADDR (default DefaultAddr); the API key KMS_API_KEY,
// else the contents of the file KMS_API_KEY_FILE (without surrounding
// white space), else none (only the public calls work then); the CA
// certificates of the file KMS_CACERT (WithCACert), else the system's
// roots. opts apply after these, so they win: FromEnv(WithAPIKey(k))
// uses k whatever the environment holds. A variable that is set but
// unusable (a file that cannot be read, a KMS_ADDR that is not a URL) is
// an Invalid error that names it.
func FromEnv(opts ...Option) (*Client, error) {
	return fromEnv(os.Getenv, opts)
}

func fromEnv(getenv func(string) string, opts []Option) (*Client, error) {
	addr := getenv(EnvAddr)
	if addr == "" {
		addr = DefaultAddr
	}
	var first []Option
	if k := strings.TrimSpace(getenv(EnvAPIKey)); k != "" {
		first = append(first, WithAPIKey(k))
	} else if f := getenv(EnvAPIKeyFile); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, kms.Errorf(kms.KindInvalid, "%s: %v", EnvAPIKeyFile, err)
		}
		k := strings.TrimSpace(string(b))
		if k == "" {
			return nil, kms.Errorf(kms.KindInvalid, "%s: %s is empty", EnvAPIKeyFile, f)
		}
		first = append(first, WithAPIKey(k))
	}
	if f := getenv(EnvCACert); f != "" {
		pem, err := os.ReadFile(f)
		if err != nil {
			return nil, kms.Errorf(kms.KindInvalid, "%s: %v", EnvCACert, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, kms.Errorf(kms.KindInvalid, "%s: %s holds no PEM certificate", EnvCACert, f)
		}
		first = append(first, WithRootCAs(pool))
	}
	if _, err := parseBase(addr); err != nil {
		return nil, kms.Errorf(kms.KindInvalid, "%s: %s", EnvAddr, kms.ErrorMessage(err))
	}
	return New(addr, append(first, opts...)...)
}
