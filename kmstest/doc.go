// Package kmstest sets up a kms.Service for tests: those of the packages
// around the domain (httpapi, client, kmsctl), so that each writes only
// what is its own, and those of programs that embed the library, as
// net/http/httptest does for HTTP.
//
// # The Service
//
// New starts a Service on a store (MemoryStore, or DiskStore where
// durable writes are what is measured), bootstraps it, and returns an Env:
// the Service, the root API key's secret and a context carrying the root
// principal, for calls straight to the Service. Everything it starts stops
// at the end of the test.
//
// # Serving it
//
// Serve puts a handler on a loopback HTTP server, alone or mounted under
// a prefix of a mux. It takes any http.Handler and this package does not
// import httpapi, so httpapi's own tests (package httpapi) use it too,
// with the handler they build inside the package.
//
// # What the tests read
//
// Mailbox is a kms.Mailer that keeps what it is asked to send, Clock a
// settable kms.Options.Now, and LogBuffer a sink for a zerolog.Logger that
// the test reads back. UseOrder names the keys a series of calls used by
// the order of their first use, for a test to compare with a string.
//
// It is not internal/kmsdtest, which runs the real kmsd binary.
package kmstest
