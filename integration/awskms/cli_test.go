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

// TestCLI: the AWS CLI creates a key in kmsd -aws-kms, encrypts and
// decrypts a file under an encryption context with it, and makes a data
// key that decrypts to its plaintext.
func TestCLI(t *testing.T) {
	bin := awsCLI(t)
	in := harness.New(t)
	p := in.Start(t, "-aws-kms")
	k := in.NewAPIKey(t, p, "*")
	dir := t.TempDir()
	env := awsEnv(t, dir, k)
	run := func(out any, args ...string) (string, error) {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"kms", "--endpoint-url", p.URL, "--output", "json"}, args...)...)
		cmd.Dir, cmd.Env = dir, env
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		if err == nil && out != nil {
			if jerr := json.Unmarshal(stdout.Bytes(), out); jerr != nil {
				t.Fatalf("aws kms %s printed %q: %v", args[0], stdout.String(), jerr)
			}
		}
		return stderr.String(), err
	}
	file := func(name string, b []byte) string {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
		return "fileb://" + name
	}
	unbase64 := func(s string) []byte {
		t.Helper()
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			t.Fatalf("not base64: %q", s)
		}
		return b
	}

	var made struct {
		KeyMetadata struct{ KeyId, Arn, KeySpec string }
	}
	if errOut, err := run(&made, "create-key", "--description", "cli"); err != nil || made.KeyMetadata.KeySpec != "SYMMETRIC_DEFAULT" {
		t.Fatalf("aws kms create-key = %v %+v\n%s", err, made, errOut)
	}
	keyARN := made.KeyMetadata.Arn
	var described struct{ KeyMetadata struct{ KeyId string } }
	if errOut, err := run(&described, "describe-key", "--key-id", keyARN); err != nil || described.KeyMetadata.KeyId != made.KeyMetadata.KeyId {
		t.Fatalf("aws kms describe-key = %v %+v\n%s", err, described, errOut)
	}

	plain := []byte("a secret of the command line\n")
	var enc struct{ CiphertextBlob, KeyId string }
	if errOut, err := run(&enc, "encrypt", "--key-id", made.KeyMetadata.KeyId, "--plaintext", file("plain", plain),
		"--encryption-context", "app=cli,stage=test"); err != nil || enc.KeyId != keyARN {
		t.Fatalf("aws kms encrypt = %v %+v\n%s", err, enc, errOut)
	}
	blob := file("blob", unbase64(enc.CiphertextBlob))
	var dec struct{ Plaintext, KeyId string }
	if errOut, err := run(&dec, "decrypt", "--ciphertext-blob", blob, "--encryption-context", "app=cli,stage=test"); err != nil ||
		!bytes.Equal(unbase64(dec.Plaintext), plain) || dec.KeyId != keyARN {
		t.Fatalf("aws kms decrypt = %v %+v\n%s", err, dec, errOut)
	}
	if errOut, err := run(nil, "decrypt", "--ciphertext-blob", blob, "--encryption-context", "app=cli,stage=prod"); err == nil ||
		!strings.Contains(errOut, "InvalidCiphertextException") {
		t.Fatalf("aws kms decrypt with another context = %v\n%s\nwant InvalidCiphertextException", err, errOut)
	}

	var dk struct{ CiphertextBlob, Plaintext, KeyId string }
	if errOut, err := run(&dk, "generate-data-key", "--key-id", keyARN, "--key-spec", "AES_256"); err != nil ||
		len(unbase64(dk.Plaintext)) != 32 || dk.KeyId != keyARN {
		t.Fatalf("aws kms generate-data-key = %v %+v\n%s", err, dk, errOut)
	}
	dec.Plaintext = ""
	if errOut, err := run(&dec, "decrypt", "--ciphertext-blob", file("dk", unbase64(dk.CiphertextBlob))); err != nil ||
		!bytes.Equal(unbase64(dec.Plaintext), unbase64(dk.Plaintext)) {
		t.Fatalf("aws kms decrypt of the data key = %v\n%s", err, errOut)
	}
}
