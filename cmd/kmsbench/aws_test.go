package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ringkms/kms"
)

// apiKeyIDForTests is the shape of an API key's ID, for the flags' tests.
const apiKeyIDForTests = "01a2247af64a43a127c943aeb79050fb"

// TestParseFlagsAWS: the aws modes sign with the API key of -key (or
// KMS_API_KEY) and its ID, -aws-access-key-id, on a running kmsd; with
// -start, with the key of the kmsd kmsbench starts. Without the ID, with
// a secret in its place, or with the flags of /ks's and transit's calls,
// they are usage errors.
func TestParseFlagsAWS(t *testing.T) {
	for _, tt := range []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string
		awsKey  string // the KeyId of -ring, when given
	}{
		{name: "encrypt on a running kmsd", args: []string{"-mode", "aws-encrypt", "-url", "http://127.0.0.1:8200", "-aws-access-key-id", apiKeyIDForTests},
			env: map[string]string{"KMS_API_KEY": "secret"}},
		{name: "decrypt with a key of its own", args: []string{"-mode", "aws-decrypt", "-url", "http://127.0.0.1:8200", "-key", "secret", "-aws-access-key-id", apiKeyIDForTests, "-ring", "sops"},
			awsKey: "sops"},
		{name: "started", args: []string{"-mode", "aws-decrypt", "-start"}},
		{name: "started on a cluster, beside the embedded store", args: []string{"-mode", "aws-encrypt", "-start", "-store", "postgres://h/db", "-nodes", "2", "-embedded"}},
		{name: "started over TLS against another build", args: []string{"-mode", "aws-encrypt", "-start", "-tls", "-against", "/tmp/kmsd"}},

		{name: "no access key ID", args: []string{"-mode", "aws-encrypt", "-url", "http://127.0.0.1:8200"}, env: map[string]string{"KMS_API_KEY": "secret"},
			wantErr: "-mode aws-encrypt needs -aws-access-key-id ID, the ID of the API key whose secret is -key (or KMS_API_KEY)"},
		{name: "no access key ID, KMS_ADDR set", args: []string{"-mode", "aws-decrypt"}, env: map[string]string{"KMS_ADDR": "http://127.0.0.1:8200", "KMS_API_KEY": "secret"},
			wantErr: "-mode aws-decrypt needs -aws-access-key-id ID"},
		{name: "an ID and no secret", args: []string{"-mode", "aws-encrypt", "-url", "http://127.0.0.1:8200", "-aws-access-key-id", apiKeyIDForTests},
			wantErr: "-url needs an API key: set KMS_API_KEY or KMS_API_KEY_FILE (or -key)"},
		{name: "the secret as the ID", args: []string{"-mode", "aws-encrypt", "-url", "http://127.0.0.1:8200", "-key", "k", "-aws-access-key-id", "rk_s3cr3tvalue"},
			wantErr: "-aws-access-key-id is shaped like a secret"},
		{name: "a long secret as the ID", args: []string{"-mode", "aws-encrypt", "-url", "http://127.0.0.1:8200", "-key", "k", "-aws-access-key-id", "kmsbench-Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0"},
			wantErr: "-aws-access-key-id is shaped like a secret"},
		{name: "an ID with a comma", args: []string{"-mode", "aws-encrypt", "-url", "http://127.0.0.1:8200", "-key", "k", "-aws-access-key-id", "a,b"},
			wantErr: `-aws-access-key-id "a,b": an API key's ID has no commas, spaces nor slashes`},
		{name: "an ID with -start", args: []string{"-mode", "aws-encrypt", "-start", "-aws-access-key-id", apiKeyIDForTests},
			wantErr: "-aws-access-key-id goes with a running kmsd (-url)"},
		{name: "a key with -start", args: []string{"-mode", "aws-decrypt", "-start", "-ring", "sops"},
			wantErr: "-ring goes with a running kmsd in -mode aws-decrypt"},
		{name: "an ID without an aws mode", args: []string{"-start", "-mode", "transit-encrypt", "-aws-access-key-id", apiKeyIDForTests},
			wantErr: "-aws-access-key-id goes with -mode aws-encrypt and aws-decrypt"},
		{name: "batches", args: []string{"-mode", "aws-encrypt", "-start", "-batch", "10"}, wantErr: "-baseline, -asset and -batch go with the /ks and transit modes"},
		{name: "the baseline", args: []string{"-mode", "aws-encrypt", "-start", "-baseline"}, wantErr: "-baseline, -asset and -batch go with"},
		{name: "an Asset", args: []string{"-mode", "aws-encrypt", "-start", "-asset"}, wantErr: "-baseline, -asset and -batch go with"},
		{name: "a key type", args: []string{"-mode", "aws-encrypt", "-start", "-key-type", "aes256-gcm96"}, wantErr: "-key-type goes with the transit modes"},
		{name: "a mode AWS's protocol has not here", args: []string{"-mode", "aws-sign", "-start"}, wantErr: "aws-encrypt, aws-decrypt"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parseCase(t, tt.args, tt.env, tt.wantErr)
			if err != nil {
				for _, a := range tt.args {
					if (strings.HasPrefix(a, "rk_") || strings.HasPrefix(a, "kmsbench-")) && strings.Contains(err.Error(), a) {
						t.Errorf("the error quotes the secret given as the ID: %v", err)
					}
				}
				return
			}
			if o.awsKey != tt.awsKey {
				t.Errorf("parseFlags(%q): key %q, want %q", tt.args, o.awsKey, tt.awsKey)
			}
		})
	}

	// As a command: run answers the usage error and loads nothing.
	checkUsageError(t, []string{"-mode", "aws-encrypt", "-url", "http://127.0.0.1:1", "-key", "k", "-n", "20"}, "needs -aws-access-key-id ID")
}

// TestRunAWSStart: kmsbench starts kmsd with -aws-kms, signs with its
// bootstrap key, whose ID it asks for, and loads it with Encrypt, or
// Decrypt of the plaintexts it encrypted first (here taking turns with
// a second kmsd, -against): every call counted in the row, none failed,
// the CPU of each kmsd read, and every kmsd stopped.
func TestRunAWSStart(t *testing.T) {
	testSealStarted(t, "aws", func(t *testing.T, mode string, rows []row, stderr string) {
		for _, r := range rows {
			if !strings.Contains(stderr, r.Target+": created key ") || !strings.Contains(stderr, "listening on "+r.URL) {
				t.Errorf("%s: stderr does not say that a key was made on %s, the kmsd kmsbench started at %s:\n%s", mode, r.Target, r.URL, stderr)
			}
		}
		if mode == "aws-decrypt" && strings.Count(stderr, "made 20 ciphertexts to decrypt") != 2 {
			t.Errorf("stderr does not say that each kmsd encrypted 20 plaintexts:\n%s", stderr)
		}
	})
}

// TestRunAWSRunning loads a running kmsd with an API key that holds only
// the flags the help names, given by its secret (KMS_API_KEY) and ID
// (-aws-access-key-id): encrypt with a key that CreateKey makes, then
// decrypt with that key named by -ring; every call counted, none
// failed. Signed with another key's ID, the setup fails with AWS's
// exception.
func TestRunAWSRunning(t *testing.T) {
	config := newKmsdConfig(testKmsd(t), "warn", "", false, nil)
	config.aws = true
	k := startRunning(t, config)
	id, secret := createAPIKey(t, k.url, config.key, kms.Flags{"keyring.*.create": true, "keyring.*.read": true, "keyring.*.encrypt": true, "keyring.*.decrypt": true})
	env := envOf(map[string]string{"KMS_API_KEY": secret})

	sum, stderr := runJSON(t, env, "-mode", "aws-encrypt", "-url", k.url, "-aws-access-key-id", id, "-c", "3", "-n", "30", "-warmup", "0")
	if len(sum.Rows) != 1 || sum.Rows[0].Requests != 30 || sum.Rows[0].Errors != 0 || sum.Rows[0].URL != k.url {
		t.Fatalf("aws-encrypt rows %+v, want 30 calls to %s, none failed; stderr:\n%s", sum.Rows, k.url, stderr)
	}
	m := regexp.MustCompile(`created key ([0-9a-f]{32}) on \S+, signing as access key ` + id).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("stderr does not name the key made and the access key:\n%s", stderr)
	}

	sum, stderr = runJSON(t, env, "-mode", "aws-decrypt", "-url", k.url, "-aws-access-key-id", id, "-ring", m[1], "-c", "3", "-n", "30", "-warmup", "0", "-pool", "10")
	if len(sum.Rows) != 1 || sum.Rows[0].Requests != 30 || sum.Rows[0].Errors != 0 {
		t.Fatalf("aws-decrypt with -ring %s: rows %+v, want 30 calls, none failed; stderr:\n%s", m[1], sum.Rows, stderr)
	}
	if strings.Contains(stderr, "created key") || !strings.Contains(stderr, "made 10 ciphertexts to decrypt") {
		t.Errorf("aws-decrypt with -ring made a key, or no pool; stderr:\n%s", stderr)
	}

	other, _ := createAPIKey(t, k.url, config.key, kms.Flags{})
	var stdout, errOut bytes.Buffer
	err := run(context.Background(), []string{"-mode", "aws-encrypt", "-url", k.url, "-aws-access-key-id", other, "-n", "5", "-warmup", "0"}, env, &stdout, &errOut)
	if err == nil || !strings.Contains(err.Error(), "CreateKey: 400 InvalidSignatureException") {
		t.Fatalf("signed as another API key: %v, want CreateKey refused with InvalidSignatureException", err)
	}
	if strings.Contains(err.Error(), secret) || strings.Contains(errOut.String(), secret) {
		t.Errorf("the secret is in the error or on stderr: %v\n%s", err, errOut.String())
	}
	if stdout.Len() != 0 {
		t.Errorf("a run whose setup failed printed a summary:\n%s", stdout.String())
	}
}

// createAPIKey makes an API key of the root Account with flags on the
// kmsd at url, with the API key root, and returns its ID and secret.
func createAPIKey(t *testing.T, url, root string, flags kms.Flags) (id, secret string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"accountId": kms.BootstrapAccountUID, "flags": flags})
	var out struct {
		Key   string `json:"key"`
		KeyID string `json:"keyid"`
	}
	if _, err := call(context.Background(), http.DefaultClient, url, root, http.MethodPost, "/auth/apikey?uid=true", body, &out); err != nil {
		t.Fatal(err)
	}
	return out.KeyID, out.Key
}

// TestAWSDecryptChecksPlaintext: a Decrypt that answers another
// plaintext than was encrypted is a failed call, "mismatch"; one that
// answers it, a call done; a ciphertext kmsd refuses, AWS's exception.
func TestAWSDecryptChecksPlaintext(t *testing.T) {
	config := newKmsdConfig(testKmsd(t), "warn", "", false, nil)
	config.aws = true
	k := startRunning(t, config)
	ctx := context.Background()
	id, err := apiKeyID(ctx, http.DefaultClient, k.url, config.key)
	if err != nil {
		t.Fatal(err)
	}
	calls := &awsCalls{client: http.DefaultClient, urls: []string{k.url}, secret: config.key, nodes: []awsNode{{accessKeyID: id}}}
	m, err := calls.useKey(ctx, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	calls.nodes[0].key = m.KeyMetadata.Arn
	sealed, _, err := calls.seal(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	if out := calls.call(ctx, 0, rng); out.failure != "" || !out.answered {
		t.Errorf("Encrypt = %+v, want a call done", out)
	}
	other := sealed
	other.plaintext = bytes.Clone(sealed.plaintext)
	other.plaintext[0] ^= 1
	broken := sealed
	broken.ciphertext = []byte{0xff}
	for _, c := range []struct {
		name    string
		s       sealedKey
		failure string
	}{
		{"the plaintext encrypted", sealed, ""},
		{"checked against another plaintext", other, "mismatch"},
		{"a ciphertext not kmsd's", broken, "InvalidCiphertextException"},
	} {
		calls.sealed = sealedPools{{c.s}}
		if out := calls.call(ctx, 0, rng); out.failure != c.failure || !out.answered {
			t.Errorf("Decrypt of %s = %+v, want an answered call, failure %q", c.name, out, c.failure)
		}
	}
}

// TestSummaryTableAWS: the summary of an aws mode names AWS's protocol,
// the key (made by CreateKey, or -ring's) and the plaintexts, and its
// errors by AWS's exception.
func TestSummaryTableAWS(t *testing.T) {
	o := &options{mode: "aws-decrypt", concurrency: 8, ring: "kmsbench", pool: 20, warmup: time.Second, urls: []string{"http://127.0.0.1:8200"}}
	byStatus := map[string]int64{"ThrottlingException": 2, "mismatch": 1}
	checkModeTable(t, o, byStatus,
		"mode: aws-decrypt, AWS KMS's protocol signed with SigV4, a key made by CreateKey, 32-byte plaintexts, a context of one pair, 20 of them sealed first to decrypt, warm-up 1s per target\n",
		"kmsd    aws-decrypt            8       100       3      1.0    100",
		"kmsd errors by status: ThrottlingException: 2, mismatch: 1\n",
	)
	o.mode, o.awsKey = "aws-encrypt", "sops"
	checkModeTable(t, o, byStatus, "mode: aws-encrypt, AWS KMS's protocol signed with SigV4, key sops, 32-byte plaintexts, a context of one pair, warm-up 1s per target\n")
}

// TestRunAWSWithoutProtocol: against a kmsd that does not serve AWS
// KMS's protocol (no -aws-kms), the setup fails and says what to check.
func TestRunAWSWithoutProtocol(t *testing.T) {
	u, key := runningKmsd(t, false)
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"-mode", "aws-encrypt", "-url", u, "-aws-access-key-id", apiKeyIDForTests, "-n", "5", "-warmup", "0"},
		envOf(map[string]string{"KMS_API_KEY": key}), &stdout, &stderr)
	if err == nil || !strings.Contains(err.Error(), "CreateKey: 404") || !strings.Contains(err.Error(), "is kmsd serving AWS KMS's protocol, -aws-kms?") {
		t.Errorf("kmsbench -mode aws-encrypt against a kmsd without -aws-kms = %v, want CreateKey refused and the hint", err)
	}
}
