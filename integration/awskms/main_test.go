// Package awskms_test drives the real kmsd -aws-kms with the clients
// people run against AWS KMS: AWS's SDK for Go, the AWS CLI and SOPS.
package awskms_test

import (
	"os"
	"testing"

	"github.com/ringkms/kms/integration/internal/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }
