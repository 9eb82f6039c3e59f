// Package k8s_test drives kmsd's Kubernetes KMS v2 plugin socket with
// the Kubernetes API server's own encryption-at-rest code
// (k8s.io/apiserver): the transformer that an EncryptionConfiguration
// file gives for Secrets, its health check, and its DEK rotation when
// the plugin's key_id changes.
package k8s_test

import (
	"os"
	"testing"

	"github.com/ringkms/kms/integration/internal/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }
