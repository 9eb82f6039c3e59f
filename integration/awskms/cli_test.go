package awskms_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/integration/internal/harness"
)

// awsEnv is the environment of an AWS client (the CLI, sops) signing
// with k against region: the machine's own AWS variables and files stay
// out, the configuration and credentials files being empty ones in dir.
func awsEnv(t *testing.T, dir string, k *kms.APIKey) []string {
	t.Helper()
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") {
			env = append(env, kv)
		}
	}
	config, creds := filepath.Join(dir, "aws-config"), filepath.Join(dir, "aws-credentials")
	for _, f := range []string{config, creds} {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return append(env, "AWS_ACCESS_KEY_ID="+k.KeyID, "AWS_SECRET_ACCESS_KEY="+k.Key, "AWS_DEFAULT_REGION="+region,
		"AWS_CONFIG_FILE="+config, "AWS_SHARED_CREDENTIALS_FILE="+creds, "AWS_EC2_METADATA_DISABLED=true", "AWS_PAGER=")
}

// awsCLI is the aws command; without one the test skips, or fails under
// CI=true (.ci/run installs it).
func awsCLI(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("aws")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the AWS CLI is missing (Debian's awscli): %v", err)
		}
		t.Skipf("the AWS CLI is missing (Debian's awscli): %v", err)
	}
	return p
}

// cli runs the AWS CLI's kms commands against a kmsd -aws-kms, in a
// folder of its own that holds the files it reads.
type cli struct {
	t        *testing.T
	bin, url string
	dir      string
	env      []string
}

// newCLI starts kmsd -aws-kms and answers its AWS CLI, signing with an
// API key that may do everything.
func newCLI(t *testing.T) *cli {
	t.Helper()
	bin := awsCLI(t)
	in := harness.New(t)
	p := in.Start(t, "-aws-kms")
	k := in.NewAPIKey(t, p, "*")
	dir := t.TempDir()
	return &cli{t: t, bin: bin, url: p.URL, dir: dir, env: awsEnv(t, dir, k)}
}

// run runs aws kms args, decoding what it printed into out when it
// succeeds and out is not nil, and answers what it wrote to stderr.
func (c *cli) run(out any, args ...string) (string, error) {
	c.t.Helper()
	cmd := exec.Command(c.bin, append([]string{"kms", "--endpoint-url", c.url, "--output", "json"}, args...)...)
	cmd.Dir, cmd.Env = c.dir, c.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err == nil && out != nil {
		if jerr := json.Unmarshal(stdout.Bytes(), out); jerr != nil {
			c.t.Fatalf("aws kms %s printed %q: %v", args[0], stdout.String(), jerr)
		}
	}
	return stderr.String(), err
}

// file writes b to the file name of the CLI's folder and answers the
// argument that gives it to the CLI as bytes.
func (c *cli) file(name string, b []byte) string {
	c.t.Helper()
	if err := os.WriteFile(filepath.Join(c.dir, name), b, 0o600); err != nil {
		c.t.Fatal(err)
	}
	return "fileb://" + name
}

// unbase64 is a blob as the CLI prints it, decoded.
func (c *cli) unbase64(s string) []byte {
	c.t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		c.t.Fatalf("not base64: %q", s)
	}
	return b
}

// TestCLI: the AWS CLI creates a key in kmsd -aws-kms, encrypts and
// decrypts a file under an encryption context with it, and makes a data
// key that decrypts to its plaintext.
func TestCLI(t *testing.T) {
	c := newCLI(t)
	var made struct {
		KeyMetadata struct{ KeyId, Arn, KeySpec string }
	}
	if errOut, err := c.run(&made, "create-key", "--description", "cli"); err != nil || made.KeyMetadata.KeySpec != "SYMMETRIC_DEFAULT" {
		t.Fatalf("aws kms create-key = %v %+v\n%s", err, made, errOut)
	}
	keyARN := made.KeyMetadata.Arn
	var described struct{ KeyMetadata struct{ KeyId string } }
	if errOut, err := c.run(&described, "describe-key", "--key-id", keyARN); err != nil || described.KeyMetadata.KeyId != made.KeyMetadata.KeyId {
		t.Fatalf("aws kms describe-key = %v %+v\n%s", err, described, errOut)
	}

	plain := []byte("a secret of the command line\n")
	var enc struct{ CiphertextBlob, KeyId string }
	if errOut, err := c.run(&enc, "encrypt", "--key-id", made.KeyMetadata.KeyId, "--plaintext", c.file("plain", plain),
		"--encryption-context", "app=cli,stage=test"); err != nil || enc.KeyId != keyARN {
		t.Fatalf("aws kms encrypt = %v %+v\n%s", err, enc, errOut)
	}
	blob := c.file("blob", c.unbase64(enc.CiphertextBlob))
	var dec struct{ Plaintext, KeyId string }
	if errOut, err := c.run(&dec, "decrypt", "--ciphertext-blob", blob, "--encryption-context", "app=cli,stage=test"); err != nil ||
		!bytes.Equal(c.unbase64(dec.Plaintext), plain) || dec.KeyId != keyARN {
		t.Fatalf("aws kms decrypt = %v %+v\n%s", err, dec, errOut)
	}
	if errOut, err := c.run(nil, "decrypt", "--ciphertext-blob", blob, "--encryption-context", "app=cli,stage=prod"); err == nil ||
		!strings.Contains(errOut, "InvalidCiphertextException") {
		t.Fatalf("aws kms decrypt with another context = %v\n%s\nwant InvalidCiphertextException", err, errOut)
	}

	var dk struct{ CiphertextBlob, Plaintext, KeyId string }
	if errOut, err := c.run(&dk, "generate-data-key", "--key-id", keyARN, "--key-spec", "AES_256"); err != nil ||
		len(c.unbase64(dk.Plaintext)) != 32 || dk.KeyId != keyARN {
		t.Fatalf("aws kms generate-data-key = %v %+v\n%s", err, dk, errOut)
	}
	dec.Plaintext = ""
	if errOut, err := c.run(&dec, "decrypt", "--ciphertext-blob", c.file("dk", c.unbase64(dk.CiphertextBlob))); err != nil ||
		!bytes.Equal(c.unbase64(dec.Plaintext), c.unbase64(dk.Plaintext)) {
		t.Fatalf("aws kms decrypt of the data key = %v\n%s", err, errOut)
	}
}
