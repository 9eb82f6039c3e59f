// Command kmsd is the ringkms server: the HTTP API of package httpapi over
// a kms.Service on the embedded Badger store.
//
//	kmsd [flags]               run the server
//	kmsd verify-audit [flags]  check the activity trail's hash chain
//	kmsd migrate -from DIR -to URL  copy an embedded store into PostgreSQL
//	kmsd rotate-signing-key [flags]  sign new headers with a new key
//	kmsd backup [-o FILE]      a consistent backup of a running (or stopped) kmsd
//	kmsd restore -i FILE -data DIR  a new data directory from a backup
//	kmsd audit export -from SEQ     activity records as JSON lines
//	kmsd rekey [flags]         move every sealed secret to a new master key
//	kmsd new-root-key [flags]  a new API key with the flag "*", from the master key
//	kmsd version               the version and revision of the build (or kmsd -version)
//
// Every flag can also be set by a KMS_* environment variable; a flag on the
// command line wins. Secrets come only from the environment or files:
// KMS_MASTER_KEY (or -master-key-file), KMS_BOOTSTRAP_API_KEY,
// KMS_SMTP_PASSWORD. The listen address is -addr or KMS_LISTEN; KMS_ADDR is
// the clients' URL of the service, which kmsd ignores (a host:port there,
// its old meaning, is still read as -addr, with a warning). Run kmsd -h for
// the list, and see docs/OPERATIONS.md.
//
// Exit status: 0 after a clean shutdown (SIGINT or SIGTERM) or an intact
// audit chain; 1 on an error; 2 on a bad flag or environment variable; 3
// when the activity trail is damaged (verify-audit found it, or the server
// would not start on it).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"

	"github.com/ringkms/kms/internal/buildinfo"
	"github.com/ringkms/kms/internal/interrupt"
)

func main() {
	ctx, stop := interrupt.Context()
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "kmsd: %v\n", err)
		os.Exit(exitCode(err))
	}
}

// exitError carries an exit status other than 1.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }
func (e exitError) Unwrap() error { return e.err }

func exitCode(err error) int {
	var ee exitError
	var ue usageError
	switch {
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &ue):
		return 2
	}
	return 1
}

// run is kmsd: it parses args (without the program name) and the
// environment through getenv, then serves until ctx is done, or runs a
// subcommand. Logs go to stderr; so does the bootstrap API key when one
// is generated. verify-audit and rotate-signing-key print their result to
// stdout.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	stderr = &lockedWriter{w: stderr}
	if len(args) == 1 && (args[0] == "version" || args[0] == "-version" || args[0] == "--version") {
		_, err := fmt.Fprintln(stdout, buildinfo.Read().Line("kmsd"))
		return err
	}
	cmd := ""
	if len(args) > 1 && args[0] == "audit" && args[1] == "export" {
		cmd, args = "audit-export", args[2:]
	} else if len(args) > 0 && slices.Contains(subcommands, args[0]) {
		cmd, args = args[0], args[1:]
	}
	c, err := parseConfig(cmd, args, getenv, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	defer c.close()
	log := newLogger(c, stderr)
	switch cmd {
	case "verify-audit":
		return verifyAudit(ctx, c, getenv, stdout, &log)
	case "migrate":
		return migrate(ctx, c, getenv, stdout, &log)
	case "rotate-signing-key":
		return rotateSigningKey(ctx, c, getenv, stdout, &log)
	case "backup":
		return backup(ctx, c, getenv, stdout, &log)
	case "restore":
		return restore(ctx, c, getenv, os.Stdin, stdout, &log)
	case "audit-export":
		return auditExport(ctx, c, stdout, &log)
	case "rekey":
		return rekey(ctx, c, getenv, stdout, &log)
	case "new-root-key":
		return newRootKey(ctx, c, getenv, stdout, &log)
	}
	return serve(ctx, c, getenv, stdout, stderr, &log)
}

// subcommands are kmsd's commands besides serving, "audit export" and
// "version" (docs/OPERATIONS.md lists them all).
var subcommands = []string{"verify-audit", "migrate", "rotate-signing-key", "backup", "restore", "rekey", "new-root-key"}

// lockedWriter serialises writes from the logger and from plain lines
// printed beside it.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
