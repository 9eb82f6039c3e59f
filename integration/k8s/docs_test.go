package k8s_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/ringkms/kms/integration/internal/harness"
)

// TestDocumentedConfiguration: the EncryptionConfiguration that
// docs/KUBERNETES.md gives, pointed at a kmsd's socket, is one the API
// server loads: Secrets written through it are sealed by kmsd under the
// prefix the document names, and, with identity second, Secrets written
// before encryption was turned on still read.
func TestDocumentedConfiguration(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/KUBERNETES.md")
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile("(?s)```yaml\n(apiVersion: apiserver.config.k8s.io/v1\nkind: EncryptionConfiguration\n.*?)```").FindSubmatch(doc)
	const endpoint = "unix:///var/run/kmsd/kms.sock"
	if block == nil || !strings.Contains(string(block[1]), endpoint) || !strings.Contains(string(doc), "`"+storedPrefix+"`") {
		t.Fatalf("docs/KUBERNETES.md has no EncryptionConfiguration with the endpoint %s and the prefix %s", endpoint, storedPrefix)
	}
	n := startNode(t, harness.New(t), socketPath(t))
	api := loadConfig(t, strings.Replace(string(block[1]), endpoint, "unix://"+n.socket, 1))
	if err := api.check(); err != nil {
		t.Fatalf("the KMS health check of an API server with the documented configuration = %v", err)
	}
	body, secret := secretOf(t, "documented")
	stored := api.mustWrite(t, etcdKey("documented"), body, secret)
	api.mustRead(t, etcdKey("documented"), stored, body)
	if stale := api.mustRead(t, etcdKey("plain"), body, body); !stale {
		t.Error("a Secret stored before encryption reads, but not as stale: the API server would not write it again encrypted")
	}
}
