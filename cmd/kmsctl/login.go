package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/client"
)

// The service's address, the credential, and a User's sign-in.
//
// A credential is read, in this order, from -api-key-file, KMS_API_KEY,
// KMS_API_KEY_FILE, or the session that kmsctl login saved for the
// address: a User's access token, in a file of mode 0600. The service
// has no refresh token: a token is refreshed (exchanged for a new one,
// the old one revoked) while it is still valid, before a command uses it
// once it is older than the session's refreshAfter (login's
// -refresh-after, 10 minutes by default, well within kmsd's default token
// lifetime of an hour). A login lasts kmsd's -session-lifetime (24 hours
// by default) across refreshes; then kmsctl login again.

// userAgent is kmsctl's User-Agent.
const userAgent = "kmsctl/0.1.0"

// requestTimeout bounds each call to the service.
const requestTimeout = time.Minute

// defaultRefreshAfter is the age at which a saved access token is
// refreshed before use.
const defaultRefreshAfter = 10 * time.Minute

// session is a User's sign-in as kmsctl saves it.
type session struct {
	Addr         string    `json:"addr"`
	Username     string    `json:"username"`
	UserID       string    `json:"userId"`
	AccountID    string    `json:"accountId"`
	AccessToken  string    `json:"accessToken"`
	IssuedAt     time.Time `json:"issuedAt"`
	RefreshAfter string    `json:"refreshAfter"` // a Go duration
}

// address is the service's base URL, without a trailing slash: -addr,
// KMS_ADDR, the saved session's, or client.DefaultAddr.
func (c *cli) address() string {
	addr, _ := c.addressFrom()
	return addr
}

// addressFrom is address, and where it comes from, for a message.
func (c *cli) addressFrom() (addr, from string) {
	if c.addr != "" {
		return strings.TrimRight(c.addr, "/"), "-addr"
	}
	if a := c.getenv(client.EnvAddr); a != "" {
		return strings.TrimRight(a, "/"), client.EnvAddr
	}
	if s, err := c.loadSession(); err == nil && s != nil {
		return s.Addr, "the saved login's address"
	}
	return client.DefaultAddr, "the default address"
}

// dial returns a client of addr that sends secret (none when empty). An
// address that is not a URL is an error that names where it came from.
func (c *cli) dial(addr, secret string) (*client.Client, error) {
	hc, err := c.httpClient()
	if err != nil {
		return nil, err
	}
	opts := []client.Option{client.WithUserAgent(userAgent), client.WithHTTPClient(hc)}
	if secret != "" {
		opts = append(opts, client.WithAPIKey(secret))
	}
	kc, err := client.New(addr, opts...)
	if a, from := c.addressFrom(); err != nil && a == addr {
		return nil, fmt.Errorf("%s: %w", from, err)
	}
	return kc, err
}

// connect makes c.kc with the credential it finds. Without one, it is an
// error when need holds, and otherwise a client without a credential.
func (c *cli) connect(ctx context.Context, need bool) error {
	addr := c.address()
	secret, _, err := c.credential(ctx, addr)
	if err != nil {
		return err
	}
	if secret == "" && need {
		return errors.New("no credential: set KMS_API_KEY, give -api-key-file FILE, or run kmsctl login")
	}
	c.kc, err = c.dial(addr, secret)
	return err
}

// credential returns the secret to send to addr and says where it came
// from; "" and "none" when there is none. A saved access token due for a
// refresh is refreshed first.
func (c *cli) credential(ctx context.Context, addr string) (string, string, error) {
	if c.apiKeyFile != "" {
		b, err := c.readSecret(c.apiKeyFile, "-api-key-file")
		if err != nil {
			return "", "", err
		}
		return b, "API key from -api-key-file", nil
	}
	if k := c.getenv(client.EnvAPIKey); k != "" {
		return strings.TrimSpace(k), "API key from " + client.EnvAPIKey, nil
	}
	if f := c.getenv(client.EnvAPIKeyFile); f != "" {
		b, err := c.readSecret(f, client.EnvAPIKeyFile)
		if err != nil {
			return "", "", err
		}
		return b, "API key from " + client.EnvAPIKeyFile, nil
	}
	s, err := c.loadSession()
	if err != nil {
		return "", "", err
	}
	if s == nil || s.Addr != addr {
		return "", "none", nil
	}
	if s, err = c.refreshSession(ctx, s); err != nil {
		return "", "", err
	}
	c.fromLogin = true
	return s.AccessToken, "access token of " + s.Username + " (kmsctl login)", nil
}

// refreshSession exchanges the session's access token for a new one and
// saves it, when the token is older than the session's refreshAfter.
func (c *cli) refreshSession(ctx context.Context, s *session) (*session, error) {
	after, err := time.ParseDuration(s.RefreshAfter)
	if err != nil || after <= 0 {
		after = defaultRefreshAfter
	}
	if time.Since(s.IssuedAt) < after {
		return s, nil
	}
	kc, err := c.dial(s.Addr, s.AccessToken)
	if err != nil {
		return nil, err
	}
	res, err := kc.Refresh(ctx)
	if kms.ErrorKind(err) == kms.KindUnauthenticated {
		// Another kmsctl may have refreshed it first: use its token.
		if now, lerr := c.loadSession(); lerr == nil && now != nil && now.AccessToken != s.AccessToken {
			return now, nil
		}
		return nil, fmt.Errorf("the saved login of %s has expired or was revoked: run kmsctl login", s.Username)
	}
	if err != nil {
		return nil, err
	}
	s.AccessToken, s.IssuedAt = res.AccessToken, time.Now().UTC()
	return s, c.saveSession(s)
}

// configDir is the directory of kmsctl's saved session: KMSCTL_CONFIG_DIR,
// else ringkms in the user's configuration directory.
func (c *cli) configDir() (string, error) {
	if d := c.getenv("KMSCTL_CONFIG_DIR"); d != "" {
		return d, nil
	}
	d, err := os.UserConfigDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "ringkms"), nil
}

// sessionPath is the file of the saved session.
func (c *cli) sessionPath() (string, error) {
	d, err := c.configDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "session.json"), nil
}

// loadSession reads the saved session; nil when there is none.
func (c *cli) loadSession() (*session, error) {
	p, err := c.sessionPath()
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var s session
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %v (remove it, or run kmsctl login)", p, err)
	}
	return &s, nil
}

// saveSession writes the session, mode 0600, in a directory of mode 0700.
func (c *cli) saveSession(s *session) error {
	p, err := c.sessionPath()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	f, err := createAtomic(p)
	if err != nil {
		return err
	}
	defer f.abort()
	if _, err := f.Write(append(b, '\n')); err != nil {
		return err
	}
	return f.commit()
}

// claimStdin records that what reads standard input; a second claim is a
// usage error, as two readers cannot share it.
func (c *cli) claimStdin(what string) error {
	if c.stdinTaken != "" {
		return &usageError{path: "kmsctl", msg: fmt.Sprintf("standard input cannot be read for both %s and %s", c.stdinTaken, what)}
	}
	c.stdinTaken = what
	return nil
}

// readSecret reads a secret from the file path (- for a line of
// standard input), without the surrounding white space; what names the
// flag or variable that gave path.
func (c *cli) readSecret(path, what string) (string, error) {
	var b []byte
	var err error
	if path == "-" {
		if err := c.claimStdin(what); err != nil {
			return "", err
		}
		b, err = readLine(c.stdin)
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("%s: %s is empty", what, path)
	}
	return s, nil
}

// readLine reads one line from r, a byte at a time so that nothing after
// it is consumed, without its line ending.
func readLine(r io.Reader) ([]byte, error) {
	var line []byte
	b := make([]byte, 1)
	for {
		n, err := r.Read(b)
		if n == 1 {
			if b[0] == '\n' {
				break
			}
			line = append(line, b[0])
		}
		if err == io.EOF && len(line) > 0 {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	return bytes.TrimSuffix(line, []byte("\r")), nil
}

// terminal returns f as an *os.File when it is one and a terminal.
func terminal(f any) (*os.File, bool) {
	file, ok := f.(*os.File)
	return file, ok && isTerminal(file.Fd())
}

// readPassword reads a password: from the terminal without echo, after
// a prompt on stderr, or else a line of standard input.
func (c *cli) readPassword(ctx context.Context) (string, error) {
	if err := c.claimStdin("the password"); err != nil {
		return "", err
	}
	return c.readHiddenLine(ctx, "password")
}

func loginCommand() *command {
	return &command{
		name: "login", args: "[EMAIL]", maxArgs: 1,
		summary: "Sign a User in, by email address or (-user) username, and save its access token for the commands that follow. The password is read from the terminal without echo, or as a line of standard input.",
		setup: func(c *cli, fs *flag.FlagSet) action {
			email := fs.String("email", "", "the User's email `ADDRESS` (or give it as the argument)")
			user := fs.String("user", "", "sign in by user`name` instead")
			refresh := fs.Duration("refresh-after", defaultRefreshAfter, "refresh the saved access token before use once it is this old (keep it below kmsd's -token-ttl)")
			return func(ctx context.Context, args []string) error {
				if len(args) == 1 {
					if *email != "" {
						return usagef("kmsctl login", "give the email address as -email or as the argument, not both")
					}
					*email = args[0]
				}
				if (*email == "") == (*user == "") {
					return usagef("kmsctl login", "give an email address or -user NAME")
				}
				if *refresh <= 0 {
					return usagef("kmsctl login", "-refresh-after %v: want a positive duration", *refresh)
				}
				in := kms.LoginInput{Username: *user}
				if *email != "" {
					in = kms.LoginInput{Username: *email, ByEmail: true}
				}
				var err error
				if in.Password, err = c.readPassword(ctx); err != nil {
					return err
				}
				addr := c.address()
				kc, err := c.dial(addr, "")
				if err != nil {
					return err
				}
				res, err := kc.Login(ctx, in)
				if err != nil {
					return err
				}
				return c.signedIn(addr, res.User, res.AccessToken, *refresh, "logged in as")
			}
		},
	}
}

// signedIn saves the session of a User that signed in at addr with the
// access token, to be refreshed once it is refresh old, and shows it,
// the User named after what.
func (c *cli) signedIn(addr string, u *kms.User, token string, refresh time.Duration, what string) error {
	s := &session{Addr: addr, Username: u.Username, UserID: u.ID, AccountID: u.AccountID,
		AccessToken: token, IssuedAt: time.Now().UTC(), RefreshAfter: refresh.String()}
	if err := c.saveSession(s); err != nil {
		return err
	}
	p, _ := c.sessionPath()
	return c.show(u, fields(what, u.Username, "account", u.AccountID, "service", addr, "token saved in", p))
}

func logoutCommand() *command {
	return &command{
		name:    "logout",
		summary: "Revoke the saved access token and forget it.",
		setup: func(c *cli, fs *flag.FlagSet) action {
			return func(ctx context.Context, args []string) error {
				s, err := c.loadSession()
				if err != nil {
					return err
				}
				if s == nil {
					return errors.New("not logged in")
				}
				kc, err := c.dial(s.Addr, s.AccessToken)
				if err != nil {
					return err
				}
				// A token the service no longer knows is as good as revoked.
				if err := kc.Logout(ctx); err != nil && kms.ErrorKind(err) != kms.KindUnauthenticated {
					return err
				}
				p, err := c.sessionPath()
				if err != nil {
					return err
				}
				if err := os.Remove(p); err != nil {
					return err
				}
				return c.show(map[string]string{"message": "logged out", "username": s.Username}, fields("logged out", s.Username))
			}
		},
	}
}

// status is the answer of kmsctl status.
type status struct {
	Addr       string `json:"addr"`
	Healthy    bool   `json:"healthy"`
	Message    string `json:"message,omitempty"`
	Credential string `json:"credential"`
}

func statusCommand() *command {
	return &command{
		name:    "status",
		summary: "Say whether the service answers (GET /healthz), its address, and which credential kmsctl would use.",
		setup: func(c *cli, fs *flag.FlagSet) action {
			return func(ctx context.Context, args []string) error {
				addr := c.address()
				_, source, err := c.credential(ctx, addr)
				if err != nil {
					source = "unusable: " + describe(err)
				}
				kc, err := c.dial(addr, "")
				if err != nil {
					return err
				}
				st := status{Addr: addr, Healthy: true, Credential: source}
				herr := kc.Healthz(ctx)
				if herr != nil {
					st.Healthy, st.Message = false, describe(herr)
				}
				if err := c.show(st, fields("service", addr, "health", health(herr), "credential", source)); err != nil {
					return err
				}
				return herr
			}
		},
	}
}
