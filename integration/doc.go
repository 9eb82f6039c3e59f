// Package integration holds the tests that drive the real kmsd with the
// third-party clients people run against it: HashiCorp's Vault client,
// OpenBao's, the auto-unseal wrapper of go-kms-wrapping, Tink, sigstore,
// the sops command line (package transit); AWS's SDK for Go v2, the AWS
// CLI and sops --kms against kmsd -aws-kms (package awskms); the Kubernetes API
// server's encryption of Secrets at rest through kmsd's KMS v2 plugin
// socket (package k8s, with k8s.io/apiserver); and internal/sigv4's
// verification of AWS Signature Version 4 against the AWS SDK for Go v2's
// signer (package sigv4). It is a Go module of its
// own, so that those clients never become dependencies of the library,
// kmsd or kmsctl: the root module's go.mod lists only what they import.
//
// Run its tests from this folder with go test ./...; the README's test
// command runs them after the root module's.
package integration
