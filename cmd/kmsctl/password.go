package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/client"
)

// What the service mails a User, completed from the command line: an
// invitation, which sets the first password, and a password reset. Both
// come as a link that carries a single-use token; the link (or the token
// alone) and the new password are secrets, so they are read from the
// terminal without echo or as lines of standard input, never from argv.
// None of these commands needs a credential: the token is the proof.

// Token prefixes, as docs/API.md names them: an invitation's and a
// password reset's.
const (
	inviteTokenPrefix = "rki_"
	resetTokenPrefix  = "rkr_"
)

func userAcceptInvite(c *cli, fs *flag.FlagSet) action {
	return func(ctx context.Context, args []string) error {
		kc, addr, token, err := c.readMailedLink(ctx, "the invitation link and the password", "invitation link", inviteTokenPrefix)
		if err != nil {
			return err
		}
		// The link is checked before the password is asked for.
		iv, err := kc.ValidateInvite(ctx, token)
		if err != nil {
			return err
		}
		password, err := c.readNewPassword(ctx, "new password for "+iv.User.Username)
		if err != nil {
			return err
		}
		res, err := kc.CompleteInvite(ctx, token, password)
		if err != nil {
			return err
		}
		return c.signedIn(addr, res.User, res.AccessToken, defaultRefreshAfter, "invitation accepted by")
	}
}

func userForgotPassword(c *cli, fs *flag.FlagSet) action {
	return func(ctx context.Context, args []string) error {
		kc, err := c.dial(c.address(), "")
		if err != nil {
			return err
		}
		msg, err := kc.StartPasswordReset(ctx, args[0])
		if err != nil {
			return err
		}
		if err := c.show(map[string]string{"message": msg}, fields("message", msg)); err != nil {
			return err
		}
		if !c.json {
			fmt.Fprintln(c.stderr, "Then give the mail's link to kmsctl user reset-password.")
		}
		return nil
	}
}

func userResetPassword(c *cli, fs *flag.FlagSet) action {
	return func(ctx context.Context, args []string) error {
		kc, _, token, err := c.readMailedLink(ctx, "the reset link and the password", "reset link", resetTokenPrefix)
		if err != nil {
			return err
		}
		// The service answers any failure of a reset with an empty 400:
		// the link is checked on its own first, and the password here,
		// so that the error can say which was wrong.
		if err := kc.ValidatePasswordReset(ctx, token); err != nil {
			return badReset(err)
		}
		password, err := c.readNewPassword(ctx, "new password")
		if err != nil {
			return err
		}
		if err := badReset(kc.CompletePasswordReset(ctx, token, password)); err != nil {
			return err
		}
		const msg = "password changed; the User's access tokens are revoked: sign in with kmsctl login"
		return c.show(map[string]string{"message": msg}, fields("message", msg))
	}
}

// badReset is the error of a reset call: the service's empty 400 says
// only that the token cannot be used, once the password is known to be
// good.
func badReset(err error) error {
	if kms.ErrorKind(err) != kms.KindInvalid {
		return err
	}
	return &kms.Error{Kind: kms.KindInvalid, Message: "the reset link cannot be used (it was used already, a newer one replaced it, or it expired): ask for another with kmsctl user forgot-password", Err: err}
}

// readMailedLink claims standard input for claim, dials the service
// without a credential and reads the link of a mail (or its token), what,
// with readHiddenLine: the token, which must have the prefix want, and
// the client and the address it answers at.
func (c *cli) readMailedLink(ctx context.Context, claim, what, want string) (kc *client.Client, addr, token string, err error) {
	if err := c.claimStdin(claim); err != nil {
		return nil, "", "", err
	}
	addr = c.address()
	if kc, err = c.dial(addr, ""); err != nil {
		return nil, "", "", err
	}
	link, err := c.readHiddenLine(ctx, what)
	if err != nil {
		return nil, "", "", err
	}
	if token, err = linkToken(link, want); err != nil {
		return nil, "", "", err
	}
	return kc, addr, token, nil
}

// linkToken returns the token of a link as mailed (or the token alone),
// which must have the prefix want.
func linkToken(link, want string) (string, error) {
	token := strings.TrimSpace(link)
	if u, err := url.Parse(token); err == nil && u.Query().Get("token") != "" {
		token = u.Query().Get("token")
	}
	switch {
	case strings.HasPrefix(token, want):
		return token, nil
	case want == inviteTokenPrefix && strings.HasPrefix(token, resetTokenPrefix):
		return "", errors.New("that is a password reset link, not an invitation: give it to kmsctl user reset-password")
	case want == resetTokenPrefix && strings.HasPrefix(token, inviteTokenPrefix):
		return "", errors.New("that is an invitation link, not a password reset: give it to kmsctl user accept-invite")
	case want == inviteTokenPrefix:
		return "", errors.New("not an invitation link: want the link of the invitation mail, or its token (rki_...)")
	default:
		return "", errors.New("not a password reset link: want the link of the reset mail, or its token (rkr_...)")
	}
}

// readHiddenLine reads a secret, what: from the terminal without echo,
// after the prompt "what: " on stderr, or else as the next line of
// standard input, which the caller claimed.
func (c *cli) readHiddenLine(ctx context.Context, what string) (string, error) {
	var b []byte
	var err error
	if tty, ok := terminal(c.stdin); ok {
		fmt.Fprintf(c.stderr, "%s: ", what)
		b, err = readHidden(ctx, tty)
		fmt.Fprintln(c.stderr)
	} else {
		b, err = readLine(c.stdin)
	}
	if errors.Is(err, io.EOF) {
		return "", fmt.Errorf("no %s on standard input", what)
	}
	return string(b), err
}

// readNewPassword reads a new password as readHiddenLine does, twice on
// a terminal (a typo there would go unseen), and checks it against the
// service's rules, so that one that breaks them costs no call.
func (c *cli) readNewPassword(ctx context.Context, what string) (string, error) {
	pw, err := c.readHiddenLine(ctx, what)
	if err != nil {
		return "", err
	}
	if _, tty := terminal(c.stdin); tty {
		again, err := c.readHiddenLine(ctx, what+" again")
		if err != nil {
			return "", err
		}
		if again != pw {
			return "", errors.New("the two passwords differ")
		}
	}
	if check := kms.CheckPassword(pw); !check.IsValid {
		return "", errors.New(check.Reason())
	}
	return pw, nil
}
