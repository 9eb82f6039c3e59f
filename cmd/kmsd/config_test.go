package main

import (
	"io"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseConfig(t *testing.T) {
	defaults := config{addr: "127.0.0.1:8200", data: "./data", logLevel: "info", logFormat: "auto", clientIPHops: 1, ipv6Prefix: 64,
		tokenTTL: time.Hour, sessionLife: 24 * time.Hour, inviteTTL: 7 * 24 * time.Hour, resetTTL: time.Hour, minDestroy: time.Hour, storeTimeout: 5 * time.Second, diskReserve: 256 << 20,
		metricsRings: 100, auditSinkMax: 100 << 20, auditSinkKeep: 10, k8sKey: "kubernetes"}
	tests := []struct {
		name string
		args []string
		env  env
		want func(c *config)
	}{
		{"defaults", nil, nil, func(*config) {}},
		{"disk reserve", []string{"-disk-reserve", "1GiB"}, nil, func(c *config) { c.diskReserve = 1 << 30 }},
		{"disk reserve off", nil, env{"KMS_DISK_RESERVE": "0"}, func(c *config) { c.diskReserve = 0 }},
		{"disk reserve in MB", []string{"-disk-reserve", "100MB"}, nil, func(c *config) { c.diskReserve = 100e6 }},
		{"flags", []string{"-addr", ":9000", "-data", "/var/lib/kms", "-dev", "-log-level", "debug", "-log-format", "console", "-mail-outbox", "/tmp/out", "-base-url", "https://kms.example.com/"},
			nil, func(c *config) {
				c.addr, c.data, c.dev, c.logLevel, c.logFormat, c.mailOutbox, c.baseURL = ":9000", "/var/lib/kms", true, "debug", "console", "/tmp/out", "https://kms.example.com"
			}},
		{"environment", nil, env{"KMS_LISTEN": "0.0.0.0:8300", "KMS_DATA": "/d", "KMS_DEV": "true", "KMS_MASTER_KEY_FILE": "/k", "KMS_LOG_LEVEL": "warn", "KMS_LOG_FORMAT": "console",
			"KMS_MAIL_OUTBOX": "/o", "KMS_BASE_URL": "http://x:1", "KMS_TLS_CERT": "/c", "KMS_TLS_KEY": "/kk"},
			func(c *config) {
				c.addr, c.data, c.dev, c.masterKeyFile, c.logLevel, c.logFormat = "0.0.0.0:8300", "/d", true, "/k", "warn", "console"
				c.mailOutbox, c.baseURL, c.tlsCert, c.tlsKey = "/o", "http://x:1", "/c", "/kk"
			}},
		{"lifetimes and limits", []string{"-token-ttl", "15m", "-max-keyrings", "10", "-max-apikeys-per-account", "3"},
			env{"KMS_INVITE_TTL": "48h", "KMS_RESET_TTL": "30m", "KMS_MAX_USERS": "7", "KMS_MAX_ACCOUNTS": "2", "KMS_SESSION_LIFETIME": "8h"},
			func(c *config) {
				c.tokenTTL, c.sessionLife, c.inviteTTL, c.resetTTL = 15*time.Minute, 8*time.Hour, 48*time.Hour, 30*time.Minute
				c.maxKeyRings, c.maxUsers, c.maxAccounts, c.maxAPIKeys = 10, 7, 2, 3
			}},
		{"flag wins over environment", []string{"-addr", "127.0.0.1:1", "-log-level", "error", "-dev=false"},
			env{"KMS_LISTEN": "0.0.0.0:2", "KMS_LOG_LEVEL": "debug", "KMS_DATA": "/from-env", "KMS_DEV": "1"},
			func(c *config) { c.addr, c.logLevel, c.data, c.dev = "127.0.0.1:1", "error", "/from-env", false }},
		{"TLS: cert by flag, key by environment", []string{"-tls-cert", "/c"}, env{"KMS_TLS_KEY": "/k"},
			func(c *config) { c.tlsCert, c.tlsKey = "/c", "/k" }},
		{"no destroy delay", []string{"-min-destroy-delay", "0s"}, nil, func(c *config) { c.minDestroy = 0 }},
		{"rate limits", []string{"-rate-limit-apikey", "100:250"}, env{"KMS_RATE_LIMIT_ADDR": "0.5"},
			func(c *config) {
				c.rateKey, c.rateAddr = rateFlag{PerSecond: 100, Burst: 250}, rateFlag{PerSecond: 0.5}
			}},
		{"audit sink", []string{"-audit-sink", "file:/var/log/a.jsonl", "-audit-sink-max-size", "1GiB"}, env{"KMS_AUDIT_SINK_KEEP": "0", "KMS_AUDIT_SINK_FROM": "42"},
			func(c *config) {
				c.auditSink, c.auditSinkMax, c.auditSinkKeep, c.auditSinkFrom = "file:/var/log/a.jsonl", 1<<30, 0, 42
			}},
		{"behind two proxies", []string{"-client-ip-header", "X-Forwarded-For"}, env{"KMS_CLIENT_IP_HOPS": "2"},
			func(c *config) { c.clientIP, c.clientIPHops = "X-Forwarded-For", 2 }},
		{"AWS KMS", nil, env{"KMS_AWS_KMS": "true"}, func(c *config) { c.awsKMS = true }},
		{"Kubernetes KMS plugin", []string{"-k8s-kms-socket", "/run/kmsd/k8s.sock"}, env{"KMS_K8S_KMS_KEY": "prod-cluster"},
			func(c *config) { c.k8sSocket, c.k8sKey = "/run/kmsd/k8s.sock", "prod-cluster" }},
		{"IPv6 prefix", []string{"-ipv6-prefix", "56"}, nil, func(c *config) { c.ipv6Prefix = 56 }},
		{"IPv6 prefix in environment", nil, env{"KMS_IPV6_PREFIX": "128"}, func(c *config) { c.ipv6Prefix = 128 }},
		{"metrics", []string{"-metrics", "-metrics-rings", "5"}, env{"KMS_METRICS_ADDR": "127.0.0.1:9200", "KMS_METRICS_TOKEN_FILE": "/t"},
			func(c *config) {
				c.metrics, c.metricsRings, c.metricsAddr, c.metricsTokenFile = true, 5, "127.0.0.1:9200", "/t"
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseConfig("", tt.args, tt.env.get, io.Discard)
			if err != nil {
				t.Fatalf("parseConfig(%q) = %v", tt.args, err)
			}
			want := defaults
			tt.want(&want)
			got.given = nil // which flags came from the command line: not a setting
			if !reflect.DeepEqual(*got, want) {
				t.Errorf("parseConfig(%q) = %+v, want %+v", tt.args, *got, want)
			}
		})
	}
}

func TestParseConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  env
		want string
	}{
		{"unknown flag", []string{"-nope"}, nil, "-nope"},
		{"token lifetime too short", []string{"-token-ttl", "10s"}, nil, "-token-ttl"},
		{"login shorter than a token", []string{"-token-ttl", "2h", "-session-lifetime", "1h"}, nil, "-session-lifetime"},
		{"bad duration", nil, env{"KMS_RESET_TTL": "soon"}, "KMS_RESET_TTL"},
		{"negative limit", []string{"-max-users", "-1"}, nil, "-max-users"},
		{"no proxy hops", []string{"-client-ip-hops", "0"}, nil, "-client-ip-hops"},
		{"no IPv6 prefix", []string{"-ipv6-prefix", "0"}, nil, "-ipv6-prefix"},
		{"IPv6 prefix too long", nil, env{"KMS_IPV6_PREFIX": "129"}, "-ipv6-prefix"},
		{"IPv6 prefix not a number", nil, env{"KMS_IPV6_PREFIX": "/64"}, "KMS_IPV6_PREFIX"},
		{"extra argument", []string{"serve"}, nil, `"serve"`},
		{"bad address", []string{"-addr", "localhost"}, nil, "-addr"},
		{"bad rate", []string{"-rate-limit-apikey", "fast"}, nil, "-rate-limit-apikey"},
		{"negative rate", nil, env{"KMS_RATE_LIMIT_ADDR": "-1"}, "KMS_RATE_LIMIT_ADDR"},
		{"bad burst", []string{"-rate-limit-addr", "10:0"}, nil, "-rate-limit-addr"},
		{"bad address in environment", nil, env{"KMS_LISTEN": "nowhere"}, "-addr"},
		{"bad level", []string{"-log-level", "verbose"}, nil, "-log-level"},
		{"bad level in environment", nil, env{"KMS_LOG_LEVEL": "trace"}, "-log-level"},
		{"bad format", []string{"-log-format", "xml"}, nil, "-log-format"},
		{"bad boolean in environment", nil, env{"KMS_DEV": "maybe"}, "KMS_DEV"},
		{"bad base URL", []string{"-base-url", "kms.example.com"}, nil, "-base-url"},
		{"TLS cert without key", []string{"-tls-cert", "/c"}, nil, "-tls-key"},
		{"TLS key without cert", nil, env{"KMS_TLS_KEY": "/k"}, "-tls-cert"},
		{"empty data", []string{"-data", ""}, nil, "-data"},
		{"bad disk reserve unit", []string{"-disk-reserve", "10 parsecs"}, nil, "-disk-reserve"},
		{"negative disk reserve", nil, env{"KMS_DISK_RESERVE": "-1MiB"}, "KMS_DISK_RESERVE"},
		{"huge disk reserve", []string{"-disk-reserve", "99999999999TiB"}, nil, "-disk-reserve"},
		{"bad metrics address", []string{"-metrics-addr", "9200"}, nil, "-metrics-addr"},
		{"no rings labelled", nil, env{"KMS_METRICS_RINGS": "0"}, "-metrics-rings"},
		{"bad Kubernetes key name", []string{"-k8s-kms-key", "a/b"}, nil, "-k8s-kms-key"},
		{"empty Kubernetes key name", nil, env{"KMS_K8S_KMS_KEY": " "}, "-k8s-kms-key"},
		{"Kubernetes socket path too long", []string{"-k8s-kms-socket", "/" + strings.Repeat("s", 120)}, nil, "-k8s-kms-socket"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseConfig("", tt.args, tt.env.get, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("parseConfig(%q) = %v, want an error about %s", tt.args, err, tt.want)
			}
			if code := exitCode(err); code != 2 {
				t.Errorf("exitCode(%v) = %d, want 2", err, code)
			}
		})
	}
}

// TestListenAddress: kmsd listens on -addr or KMS_LISTEN. KMS_ADDR is the
// clients' URL of the service, which a shell set up for kmsctl holds:
// kmsd ignores it, but for a host:port, its old meaning, read as -addr
// when nothing else gives one.
func TestListenAddress(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		env        env
		want       string
		wantLegacy bool
	}{
		{"the clients' URL is ignored", nil, env{"KMS_ADDR": "http://127.0.0.1:9000"}, "127.0.0.1:8200", false},
		{"an https URL too", nil, env{"KMS_ADDR": "https://kms.example.com"}, "127.0.0.1:8200", false},
		{"KMS_LISTEN beside the clients' URL", nil, env{"KMS_ADDR": "http://127.0.0.1:8200", "KMS_LISTEN": "0.0.0.0:8300"}, "0.0.0.0:8300", false},
		{"-addr beside the clients' URL", []string{"-addr", ":9000"}, env{"KMS_ADDR": "http://127.0.0.1:8200"}, ":9000", false},
		{"a host:port in KMS_ADDR, as before", nil, env{"KMS_ADDR": "0.0.0.0:8300"}, "0.0.0.0:8300", true},
		{"KMS_LISTEN wins over a host:port in KMS_ADDR", nil, env{"KMS_ADDR": "0.0.0.0:8300", "KMS_LISTEN": "127.0.0.1:1"}, "127.0.0.1:1", false},
		{"-addr wins over a host:port in KMS_ADDR", []string{"-addr", "127.0.0.1:2"}, env{"KMS_ADDR": "0.0.0.0:8300"}, "127.0.0.1:2", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseConfig("", tt.args, tt.env.get, io.Discard)
			if err != nil {
				t.Fatalf("parseConfig(%q, %v) = %v", tt.args, tt.env, err)
			}
			if c.addr != tt.want || c.legacyAddr != tt.wantLegacy {
				t.Errorf("parseConfig(%q, %v): addr %q (from KMS_ADDR: %v), want %q (%v)", tt.args, tt.env, c.addr, c.legacyAddr, tt.want, tt.wantLegacy)
			}
		})
	}

	_, err := parseConfig("", nil, env{"KMS_ADDR": "kms.example.com"}.get, io.Discard)
	if err == nil || !strings.Contains(err.Error(), `KMS_ADDR "kms.example.com"`) || !strings.Contains(err.Error(), "KMS_LISTEN") || exitCode(err) != 2 {
		t.Errorf("parseConfig(KMS_ADDR=kms.example.com) = %v, want a usage error naming KMS_ADDR and KMS_LISTEN", err)
	}
}

// TestRunListenEnv starts kmsd in a shell set up for kmsctl (the README's
// KMS_ADDR=http://...), and with the old host:port in KMS_ADDR.
func TestRunListenEnv(t *testing.T) {
	s := startRun(t, []string{"-data", t.TempDir()}, env{"KMS_MASTER_KEY": newKey(), "KMS_LISTEN": "127.0.0.1:0", "KMS_ADDR": "http://127.0.0.1:8200"})
	if strings.Contains(s.stderr.String(), "deprecated") {
		t.Errorf("kmsd warned of KMS_ADDR holding the clients' URL:\n%s", s.stderr)
	}
	s.stop(t)

	s = startRun(t, []string{"-data", t.TempDir()}, env{"KMS_MASTER_KEY": newKey(), "KMS_ADDR": "127.0.0.1:0"})
	if !strings.Contains(s.stderr.String(), `"level":"warn"`) || !strings.Contains(s.stderr.String(), "set KMS_LISTEN") {
		t.Errorf("kmsd listening on the host:port of KMS_ADDR gave no deprecation warning:\n%s", s.stderr)
	}
}
