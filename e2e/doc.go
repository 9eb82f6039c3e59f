// Package e2e holds the end-to-end tests of ringkms: they build the real
// kmsd (and kmsctl), run it on 127.0.0.1:0 in a temporary data
// directory, and drive it through the Go client (package client) the way
// a user would.
//
// # What runs
//
//   - TestFlows: the flows of a user, from the bootstrap key through
//     Accounts, API keys and their flags, key rings, rotation,
//     configuration, encrypt and decrypt with Assets, invitations, sign-in
//     and password reset (mail read from kmsd's -mail-outbox directory),
//     and the activity trail.
//   - TestCrashDurability: concurrent writers while kmsd is killed with
//     SIGKILL at random moments, several times on one data directory;
//     every acknowledged write must survive, and the audit chain must
//     verify (kmsd verify-audit).
//   - TestCluster: three kmsd nodes with one master key over one
//     PostgreSQL database (internal/pgtest), any request to any node: a
//     ring, an API key or a User made on one node serves on the others; a
//     deleted ring serves no encrypt on any node from the next call on; a
//     deactivated API key and a rotation show on every node within the
//     documented bound; maxEncryptCount holds across the nodes; and after
//     a SIGKILL of a node under load, every acknowledged encrypt decrypts
//     on the others, the audit chain verifies (kmsd verify-audit -store),
//     and the node serves again once restarted.
//   - TestHA*: the cluster on a PostgreSQL that fails. Across a SIGKILL
//     of the primary under load and the promotion of its synchronous
//     standby, every acknowledged write survives, no call answers 500,
//     and each node serves again within 10 s, as the same process
//     (TestHAFailoverUnderLoad); a node whose connection goes silent
//     answers 503 within its bound and holds up no other node
//     (TestHASilentNode); a node on a hot standby answers 503 saying the
//     database is read-only until the standby is promoted
//     (TestHAHotStandby); a connection cut at a COMMIT gets the answer
//     the database holds (TestHACommitCut); and with a node's connections
//     cut at random moments under load, no encrypt answered an error
//     left a record or an Asset, and every one acknowledged left exactly
//     one record (TestHAConnectionCuts).
//   - TestMasterKeyInHSM: kmsd with its master key in a PKCS#11 token
//     (a real SoftHSM2 token, internal/hsmtest) serves, starts again on
//     its store, refuses a plain master key, and verifies its trail;
//     kmsd rekey moves the store to a plain key and back, everything
//     opening at each step.
//   - TestRekeyUnderLoad: the documented rotation of the master key,
//     under a load that seals and opens every kind of secret, on three
//     nodes over PostgreSQL and one kmsd on the embedded store: each node
//     restarted in turn with the next key (the embedded kmsd's in a
//     SoftHSM2 token), kmsd rekey beside the nodes and through the
//     embedded kmsd's admin socket; no call fails, everything
//     acknowledged opens on every node and, once restarted with the new
//     key alone, still does; the old key opens nothing.
//   - TestKmsctl: the kmsctl binary (built beside kmsd) against kmsd: a
//     ring and its private key file, a multi-chunk file encrypted and
//     decrypted back, a tampered envelope that leaves no output, a
//     disabled key's decrypt refused with the service's message, API keys
//     from files, -json output of lists, envelopes of both kinds of rings
//     rewrapped after rotations (to a new file, then in place) under the
//     active key, and a User's login; usage errors exit 2
//     (TestKmsctlUsage).
//   - TestResetStartTimingTellsNothing: the answer time of a password
//     reset request, compared (medians of many calls in random turns)
//     between addresses of Users and unknown ones.
//
// Every request and answer of the client goes through a validating
// http.RoundTripper that checks it against the OpenAPI document kmsd
// serves (httpapi/openapi.json, with kin-openapi): a request or answer
// the document does not describe, a status it does not list, or a route
// it lacks fails the test, so the document cannot drift from the code.
//
// The tests are skipped with -short. The package holds no code beyond its
// tests.
package e2e
