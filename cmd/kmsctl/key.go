package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/ringkms/kms"
)

func keyCommands() *command {
	return &command{name: "key", summary: "The keys of a ring: list, show, usage, hashes, enable, disable, destroy, cancel-destroy.", subs: []*command{
		keyCommand("list", "", "List a ring's keys, oldest first.", keyList),
		keyCommand("show", "ID", "Show a key of a ring (with -json, its wrapped keyData too).", keyShow),
		keyCommand("usage", "ID", "Show how many encrypt and decrypt calls used a key, and when.", keyUsage),
		keyCommand("hashes", "ID", "List the hashes issued under a key, oldest first: what a leak of the key exposes.", keyHashes),
		keyCommand("enable", "ID", "Enable a disabled key.", keyState(kms.KeyEnabled)),
		keyCommand("disable", "ID", "Disable a key: it neither encrypts nor decrypts until enabled again. The active key needs -rotate.", keyState(kms.KeyDisabled)),
		keyCommand("destroy", "ID", "Schedule the destruction of a key (-after, default 24h); until then cancel-destroy takes it back. The active key needs -rotate.", keyDestroy),
		keyCommand("cancel-destroy", "ID", "Cancel a scheduled destruction; the key stays disabled.", keyCancelDestroy),
	}}
}

// keyCommand is a command on the keys of the ring that -ring names; args
// is "" or "ID". setup gets the ring's reference, filled in once the
// flags are parsed.
func keyCommand(name, args, summary string, setup func(c *cli, fs *flag.FlagSet, ring *kms.RingRef) action) *command {
	n := 0
	if args != "" {
		n = 1
	}
	return &command{name: name, args: args, minArgs: n, maxArgs: n, auth: true, summary: summary, required: []string{"ring"},
		setup: func(c *cli, fs *flag.FlagSet) action {
			ring := fs.String("ring", "", "the key ring's `NAME` (required)")
			ref := new(kms.RingRef)
			act := setup(c, fs, ref)
			return func(ctx context.Context, args []string) error {
				*ref = ringRef(*ring)
				return act(ctx, args)
			}
		}}
}

var keyHeader = []string{"ID", "STATE", "ENCRYPTS", "DESTROY AT"}

func keyRow(k *kms.Key) []string {
	return []string{k.ID, k.State, cell(k.EncryptCount), cell(k.DestroyAt)}
}

func keyFields(k *kms.Key) table {
	return fields("id", k.ID, "type", k.Type, "state", k.State, "destroy at", k.DestroyAt, "encrypt count", k.EncryptCount, "props", k.Props)
}

// showKey prints the key that a call on ring changed as the call answers
// it, {"key": ...}, or returns the call's error. The answer of a change
// carries no encrypt count: it is read with the key's usage (which needs
// keyring.<ring>.read), so that the table, and -json, show the count as
// key list does. When that read fails the change stands all the same:
// the count is left out, and a note on stderr says why.
func (c *cli) showKey(ctx context.Context, ring kms.RingRef, k *kms.Key, err error) error {
	if err != nil {
		return err
	}
	if k.EncryptCount == nil {
		if u, err := c.kc.KeyUsage(ctx, ring, k.ID); err != nil {
			fmt.Fprintf(c.stderr, "kmsctl: the encrypt count of key %s could not be read: %s\n", k.ID, describe(err))
		} else {
			k.EncryptCount = &u.EncryptCount
		}
	}
	return c.show(map[string]any{"key": k}, keyFields(k))
}

func keyList(c *cli, fs *flag.FlagSet, ring *kms.RingRef) action {
	pf := addPageFlags(fs)
	return func(ctx context.Context, args []string) error {
		return list(ctx, c, pf, func(ctx context.Context, p kms.PageRequest) (*kms.List[*kms.Key], error) {
			return c.kc.ListKeys(ctx, *ring, p)
		}, keyHeader, keyRow)
	}
}

func keyShow(c *cli, fs *flag.FlagSet, ring *kms.RingRef) action {
	return func(ctx context.Context, args []string) error {
		return shown(c, keyFields)(c.kc.GetKey(ctx, *ring, args[0]))
	}
}

func keyUsage(c *cli, fs *flag.FlagSet, ring *kms.RingRef) action {
	return func(ctx context.Context, args []string) error {
		return shown(c, func(u *kms.KeyUsage) table {
			return fields("key", u.KeyID, "encrypt count", u.EncryptCount, "decrypt count", u.DecryptCount,
				"first used", u.FirstUsedAt, "last used", u.LastUsedAt)
		})(c.kc.KeyUsage(ctx, *ring, args[0]))
	}
}

func keyHashes(c *cli, fs *flag.FlagSet, ring *kms.RingRef) action {
	pf := addPageFlags(fs)
	return func(ctx context.Context, args []string) error {
		return list(ctx, c, pf, func(ctx context.Context, p kms.PageRequest) (*kms.List[*kms.KeyHash], error) {
			return c.kc.ListKeyHashes(ctx, *ring, args[0], p)
		}, []string{"HASH", "CREATED", "APIKEY", "ACCOUNT", "ASSET", "SEQ"}, func(h *kms.KeyHash) []string {
			return []string{h.Hash, cell(h.CreatedAt), h.APIKeyID, h.AccountID, cell(h.AssetID), cell(h.Seq)}
		})
	}
}

// keyState is enable (state enabled) or disable (state disabled, and
// -rotate).
func keyState(state string) func(c *cli, fs *flag.FlagSet, ring *kms.RingRef) action {
	return func(c *cli, fs *flag.FlagSet, ring *kms.RingRef) action {
		in := kms.KeyStateInput{State: state}
		if state == kms.KeyDisabled {
			rotateFlag(fs, &in.Rotate)
		}
		return func(ctx context.Context, args []string) error {
			k, err := c.kc.SetKeyState(ctx, *ring, args[0], in)
			return c.showKey(ctx, *ring, k, inFlags(err, rotateWords...))
		}
	}
}

// rotateFlag declares -rotate, for the calls that may rotate the ring
// away from its active key first.
func rotateFlag(fs *flag.FlagSet, rotate *bool) {
	fs.BoolVar(rotate, "rotate", false, "when the key is the ring's active key, rotate the ring first")
}

func keyDestroy(c *cli, fs *flag.FlagSet, ring *kms.RingRef) action {
	var in kms.DestroyKeyInput
	rotateFlag(fs, &in.Rotate)
	fs.Func("after", "destroy the key this `DURATION` from now, such as 72h (default 24h; at least kmsd's -min-destroy-delay)", func(s string) error {
		if _, err := time.ParseDuration(s); err != nil {
			return errors.New("want a duration such as 72h")
		}
		in.After = s
		return nil
	})
	return func(ctx context.Context, args []string) error {
		k, err := c.kc.DestroyKey(ctx, *ring, args[0], in)
		return c.showKey(ctx, *ring, k, inFlags(err, destroyWords...))
	}
}

func keyCancelDestroy(c *cli, fs *flag.FlagSet, ring *kms.RingRef) action {
	return func(ctx context.Context, args []string) error {
		k, err := c.kc.CancelDestroyKey(ctx, *ring, args[0])
		return c.showKey(ctx, *ring, k, err)
	}
}
