// Package transit_test drives the real kmsd -transit with the clients
// people run against Vault's transit engine.
package transit_test

import (
	"os"
	"testing"

	"github.com/ringkms/kms/integration/internal/harness"
)

func TestMain(m *testing.M) { os.Exit(harness.Main(m)) }
