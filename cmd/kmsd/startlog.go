package main

import (
	"path/filepath"

	"github.com/ringkms/kms/transit"
	"github.com/rs/zerolog"
)

// logSetup logs, once kmsd holds its keys and before it opens its store,
// one line that says what it serves besides its own API and where its
// keys come from: the transit interface, the Kubernetes KMS plugin's
// socket, the metrics and where they are
// served, the admin socket, the master key's source (environment, file,
// PKCS#11 token, or -dev's file) and the next master key's, or none.
// Whether a next master key is loaded is what step 1 of a rotation while
// kmsd serves depends on (docs/OPERATIONS.md section 2). Never a key:
// only where it is.
func logSetup(c *config, getenv func(string) string, log *zerolog.Logger) {
	master := c.masterKeyRole().source(getenv)
	if master == "" && c.dev {
		master = "file " + filepath.Join(c.data, devKeyFile) + " (-dev)"
	}
	next := c.nextKeyRole().source(getenv)
	if next == "" {
		next = "none"
	}
	vault := "off"
	if c.transit {
		vault = "on, at " + transit.PathPrefix + transit.DefaultMount + "/"
	}
	metrics := "off"
	switch {
	case c.metrics && c.metricsAddr != "":
		metrics = "GET /metrics on the main listener and on " + c.metricsAddr
	case c.metrics:
		metrics = "GET /metrics on the main listener"
	case c.metricsAddr != "":
		metrics = "GET /metrics on " + c.metricsAddr
	}
	admin := adminSocket(c.data)
	switch {
	case c.postgres():
		admin = "none (PostgreSQL store)"
	case len(admin) >= maxSocketPath:
		admin = "none (the data directory's path is too long for a Unix socket)"
	}
	aws := "off"
	if c.awsKMS {
		aws = "on, at POST / (X-Amz-Target: TrentService.*)"
	}
	k8s := "off"
	if c.k8sSocket != "" {
		k8s = "on, at " + c.k8sSocket + " with the key " + c.k8sKey
	}
	ev := log.Info().Str("master_key", master).Str("next_master_key", next).
		Str("transit", vault).Str("aws_kms", aws).Str("k8s_kms", k8s).Str("metrics", metrics)
	if metrics != "off" {
		ev = ev.Bool("metrics_token", c.metricsTokenFile != "" || getenv("KMS_METRICS_TOKEN") != "")
	}
	ev.Str("admin_socket", admin).Str("store", c.storeName()).Msg("starting")
}
