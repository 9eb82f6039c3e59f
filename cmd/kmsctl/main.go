// Command kmsctl is the command line of ringkms, for people and scripts:
// key rings and keys, envelope encryption of files and streams, API keys,
// Accounts, Users, sign-in, the activity trail and Assets, over the HTTP
// interface of kmsd (package client).
//
//	kmsctl [flags] GROUP COMMAND [flags] [ARGS]
//	kmsctl ring create -private-key-out payments.key payments
//	kmsctl encrypt -ring payments -private-key payments.key -in report.pdf -out report.pdf.rkms
//
// The service is KMS_ADDR (or -addr; default http://127.0.0.1:8200). The
// credential is KMS_API_KEY, the file named by -api-key-file (or
// KMS_API_KEY_FILE), or the access token that kmsctl login saved: never a
// secret on the command line, where the process list would show it. A
// kmsd whose certificate a private CA signed is trusted with that CA's
// certificate: -ca-cert FILE or KMS_CACERT. These are the settings every
// client reads (package client's FromEnv). Run kmsctl -h for the
// commands, and see docs/KMSCTL.md.
//
// Output is a table for people, or with -json the service's JSON objects
// for scripts. Exit status: 0 on success, 1 on an error (the service's
// message and code on stderr), 2 on a usage error (an unknown command or
// flag, a missing argument).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/client"
	"github.com/ringkms/kms/internal/buildinfo"
	"github.com/ringkms/kms/internal/interrupt"
)

func main() {
	ctx, stop := interrupt.Context()
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is kmsctl: it runs the command that args (without the program name)
// name, with the environment read through getenv, and returns the exit
// status.
func run(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := &cli{getenv: getenv, stdin: stdin, stdout: stdout, stderr: stderr}
	if len(args) == 1 && (args[0] == "-version" || args[0] == "--version") {
		args = []string{"version"} // as kmsd -version
	}
	return c.report(c.dispatch(ctx, root(), "kmsctl", args))
}

// cli is one run of kmsctl: its streams, its environment, the flags every
// command takes, and the client once connect has made it.
type cli struct {
	getenv func(string) string
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer

	addr       string // -addr; empty: KMS_ADDR, else client.DefaultAddr
	apiKeyFile string // -api-key-file
	caCert     string // -ca-cert; empty: KMS_CACERT, else the system's roots
	json       bool   // -json

	hc         *http.Client   // made by httpClient, for every call
	kc         *client.Client // set by connect
	fromLogin  bool           // kc sends the access token of kmsctl login
	stdinTaken string         // what reads standard input, once claimed
}

// action runs a command with its positional arguments, once its flags
// are parsed.
type action func(ctx context.Context, args []string) error

// command is a group of commands (subs) or a command (setup).
type command struct {
	name    string
	args    string // what follows the flags in the synopsis: "NAME", "[EMAIL]"
	summary string
	subs    []*command
	// minArgs and maxArgs bound the positional arguments.
	minArgs, maxArgs int
	// required names the flags that must be given.
	required []string
	// auth: the command needs a credential; connect makes the client
	// before the action runs. Without it, the action connects itself.
	auth bool
	// setup declares the command's flags on fs and returns its action.
	setup func(c *cli, fs *flag.FlagSet) action
}

// root is the tree of commands.
func root() *command {
	return &command{name: "kmsctl", subs: []*command{
		ringCommands(), keyCommands(), encryptCommand(), decryptCommand(), rewrapCommand(),
		apikeyCommands(), accountCommands(), userCommands(),
		loginCommand(), logoutCommand(), activityCommands(), assetCommands(), statusCommand(), versionCommand(),
	}}
}

// versionCommand prints the build of kmsctl: its module version and the
// revision it was built from.
func versionCommand() *command {
	return &command{
		name:    "version",
		summary: "Print the version of kmsctl and the revision it was built from.",
		setup: func(c *cli, fs *flag.FlagSet) action {
			return func(context.Context, []string) error {
				_, err := fmt.Fprintln(c.stdout, buildinfo.Read().Line("kmsctl"))
				return err
			}
		},
	}
}

// usageError is a command line that kmsctl cannot run: exit status 2.
type usageError struct {
	path string // the command, for its -h
	msg  string
}

func (e *usageError) Error() string { return e.msg }

// usagef returns a usage error of the command at path.
func usagef(path, format string, args ...any) error {
	return &usageError{path: path, msg: fmt.Sprintf(format, args...)}
}

// commonFlags declares the flags that every command takes, before or
// after its name.
func (c *cli) commonFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.addr, "addr", c.addr, "the service's base `URL` (default $KMS_ADDR, else "+client.DefaultAddr+")")
	fs.StringVar(&c.apiKeyFile, "api-key-file", c.apiKeyFile, "read the API key from `FILE` (- for standard input; default $KMS_API_KEY, $KMS_API_KEY_FILE, else the saved login)")
	fs.StringVar(&c.caCert, "ca-cert", c.caCert, "trust the service's certificate when a CA certificate of `FILE` (PEM) signed it, instead of the system's roots (default $KMS_CACERT)")
	fs.BoolVar(&c.json, "json", c.json, "print the service's JSON objects instead of tables")
}

// dispatch parses args for cmd, at path in the tree, and runs it.
func (c *cli) dispatch(ctx context.Context, cmd *command, path string, args []string) error {
	fs := flag.NewFlagSet(path, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.commonFlags(fs)
	if cmd.subs != nil {
		// A group: common flags, then the name of a command.
		if err := fs.Parse(args); err != nil {
			return c.flagError(fs, cmd, path, err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return usagef(path, "missing command: one of %s", names(cmd.subs))
		}
		if args[0] == "help" {
			c.help(c.stdout, fs, cmd, path)
			return nil
		}
		for _, sub := range cmd.subs {
			if sub.name == args[0] {
				return c.dispatch(ctx, sub, path+" "+sub.name, args[1:])
			}
		}
		return usagef(path, "unknown command %q: want one of %s", args[0], names(cmd.subs))
	}
	act := cmd.setup(c, fs)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return c.flagError(fs, cmd, path, err)
	}
	switch {
	case len(pos) < cmd.minArgs:
		return usagef(path, "missing argument: want %s", cmd.args)
	case len(pos) > cmd.maxArgs:
		return usagef(path, "unexpected argument %q", pos[cmd.maxArgs])
	}
	for _, name := range cmd.required {
		if !isSet(fs, name) {
			return usagef(path, "-%s is required", name)
		}
	}
	if cmd.auth {
		if err := c.connect(ctx, true); err != nil {
			return err
		}
	}
	return act(ctx, pos)
}

// flagError turns the error of parsing fs into help (-h) or a usage error.
func (c *cli) flagError(fs *flag.FlagSet, cmd *command, path string, err error) error {
	if errors.Is(err, flag.ErrHelp) {
		c.help(c.stdout, fs, cmd, path)
		return nil
	}
	return usagef(path, "%v", err)
}

// parseInterleaved parses flags that come before, between or after the
// positional arguments (kmsctl key show ID -ring payments), and returns
// the positional arguments. After "--" every argument is positional.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// names lists the names of cmds for a message.
func names(cmds []*command) string {
	out := make([]string, len(cmds))
	for i, s := range cmds {
		out[i] = s.name
	}
	return strings.Join(out, ", ")
}

// help prints the usage of cmd at path: its commands, or its synopsis
// and flags.
func (c *cli) help(w io.Writer, fs *flag.FlagSet, cmd *command, path string) {
	if cmd.subs != nil {
		fmt.Fprintf(w, "usage: %s [flags] COMMAND ...\n\ncommands:\n", path)
		t := table{}
		for _, sub := range cmd.subs {
			first, _, _ := strings.Cut(sub.summary, ". ")
			t.rows = append(t.rows, []string{"  " + sub.name, strings.TrimSuffix(first, ".") + "."})
		}
		t.write(w)
		fmt.Fprintf(w, "\nRun '%s COMMAND -h' for a command's flags.\n\nflags:\n", path)
	} else {
		synopsis := path + " [flags]"
		if cmd.args != "" {
			synopsis += " " + cmd.args
		}
		fmt.Fprintf(w, "usage: %s\n\n%s\n\nflags:\n", synopsis, cmd.summary)
	}
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// report prints err, if any, on stderr and returns the exit status: the
// one place where kmsctl prints an error.
func (c *cli) report(err error) int {
	if err == nil {
		return 0
	}
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(c.stderr, "kmsctl: %s\nRun '%s -h' for usage.\n", ue.msg, ue.path)
		return 2
	}
	fmt.Fprintf(c.stderr, "kmsctl: %s\n", describe(err))
	if c.fromLogin && kms.ErrorKind(err) == kms.KindUnauthenticated {
		fmt.Fprintln(c.stderr, "The saved login may have ended: run kmsctl login.")
	}
	return 1
}

// describe is the text of an error: the service's message and code for a
// *kms.Error (and the members at fault, if any), "interrupted" for a
// signal, the error's own text otherwise. A certificate that kmsctl
// refused gets no code: no service answered, and the client's "internal"
// would put the fault on the service.
func describe(err error) string {
	if errors.Is(err, context.Canceled) {
		return "interrupted"
	}
	msg := err.Error()
	e := kms.AsError(err)
	if e == nil {
		return msg
	}
	// The message of a wrapped *kms.Error keeps the context around it,
	// without the "kms: " of the library.
	own := e.Error()
	msg = strings.Replace(msg, own, strings.TrimPrefix(own, "kms: "), 1)
	if !certificateRefused(err) {
		msg += " (" + e.Kind.String() + ")"
	}
	for _, f := range slices.Sorted(maps.Keys(e.Fields)) {
		msg += fmt.Sprintf("\n  %s: %s", f, e.Fields[f])
	}
	return msg
}
