package main

import (
	"context"
	"fmt"
	"io"

	"github.com/rs/zerolog"

	"github.com/ringkms/kms"
)

// rootKeyApp is the application name under which kmsd new-root-key acts:
// the activity trail names it app:kmsd.new-root-key.
const rootKeyApp = "kmsd.new-root-key"

// newRootKey is kmsd new-root-key: the way back when every API key with
// the flag "*" is lost (the bootstrap key kmsd -dev printed once, say).
// Holding the master key is its authority, as for rekey and
// rotate-signing-key; it is not offered on the admin socket, which its
// user may reach without the master key. It opens the store of -store (the
// data directory by default: the embedded store only with kmsd stopped),
// creates an API key with the flag "*" in the root Account (uid root),
// which the activity trail records (action apikey.create, by
// app:kmsd.new-root-key), and prints its secret once on stdout. The keys
// made before stay as they are.
func newRootKey(ctx context.Context, c *config, getenv func(string) string, stdout io.Writer, log *zerolog.Logger) error {
	st, mk, err := openExistingStore(ctx, c, getenv, log, false)
	if err != nil {
		return err
	}
	defer st.Close()
	svc, err := kms.New(st, kms.Options{MasterKey: mk})
	mk = nil
	if err != nil {
		return startError(err, c)
	}
	defer svc.Close()
	p, err := svc.Application(ctx, rootKeyApp)
	if err != nil {
		return fmt.Errorf("new root API key: %s", kms.ErrorMessage(err))
	}
	k, err := svc.CreateAPIKey(kms.WithPrincipal(ctx, p), kms.APIKeyInput{
		AccountID: p.AccountID,
		Flags:     kms.Flags{kms.FlagRoot: true},
		Props:     map[string]any{"createdBy": "kmsd new-root-key"},
	})
	if err != nil {
		return fmt.Errorf("new root API key: %s", kms.ErrorMessage(err))
	}
	log.Info().Str("account_id", k.AccountID).Str("apikey_id", k.KeyID).
		Msg(`created a new API key with the flag "*" in the root account`)
	fmt.Fprintf(stdout, "new root API key (shown once): %s\n", k.Key)
	fmt.Fprintf(stdout, "key ID: %s\n", k.KeyID)
	fmt.Fprintf(stdout, "  it holds every permission; store it now: kmsd keeps only its digest and will not show it again.\n"+
		"  The keys made before stay active: deactivate a lost one that may have leaked with this key:\n"+
		"  kmsctl apikey update -active false <its ID> (kmsctl apikey list shows the keys), or over HTTP\n"+
		"  PUT /auth/apikeyid {\"op\": \"merge\", \"apikeyid\": \"<its ID>\", \"active\": false}.\n")
	return nil
}
