package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/ringkms/kms"
)

// ringRef is the ring a command names.
func ringRef(name string) kms.RingRef { return kms.RingRef{Name: name} }

func ringCommands() *command {
	return &command{name: "ring", summary: "Key rings: create, list, show, rotate, config, delete.", subs: []*command{
		{name: "create", args: "NAME", minArgs: 1, maxArgs: 1, auth: true, setup: ringCreate,
			summary: "Create a key ring and its first key. The ring's private key is printed this once (or written to -private-key-out): keep it, the service does not. " +
				"Its data keys are split unless -data-keys ring is given: an envelope sealed on it opens only through a decrypt call, which the service authorises and records."},
		{name: "list", auth: true, setup: ringList, summary: "List the key rings, in name order."},
		{name: "show", args: "NAME", minArgs: 1, maxArgs: 1, auth: true, setup: ringShow, summary: "Show a key ring."},
		{name: "rotate", args: "NAME", minArgs: 1, maxArgs: 1, auth: true, setup: ringRotate,
			summary: "Give a key ring a new active key; the others still decrypt. With -held, rotate a held key (a transit key, or the Kubernetes KMS plugin's) instead."},
		{name: "config", args: "NAME", minArgs: 1, maxArgs: 1, auth: true, setup: ringConfig,
			summary: "Show a ring's configuration or, with -max-encrypt-count, -props, -key-props or -file, change it (the members not given stay as they are, except with -file, which gives the whole configuration)."},
		{name: "delete", args: "NAME", minArgs: 1, maxArgs: 1, auth: true, required: []string{"yes"}, setup: ringDelete,
			summary: "Delete a key ring and its keys, for good: what they encrypted no longer decrypts. Needs -yes."},
	}}
}

var ringHeader = []string{"NAME", "ID", "ACTIVE KEY", "CREATED"}

func ringRow(r *kms.KeyRing) []string {
	return []string{r.Name, r.ID, r.ActiveKey, cell(r.CreatedAt)}
}

func ringFields(r *kms.KeyRing, more ...any) table {
	return fields(append([]any{"name", r.Name, "id", r.ID, "display name", r.DisplayName, "active key", r.ActiveKey,
		"algorithm", r.ActiveAlgorithm, "data keys", r.DataKeys, "created", r.CreatedAt, "updated", r.UpdatedAt, "props", r.Props}, more...)...)
}

func ringCreate(c *cli, fs *flag.FlagSet) action {
	var in kms.CreateKeyRingInput
	fs.StringVar(&in.DisplayName, "display-name", "", "the ring's display `NAME`")
	fs.StringVar(&in.KEM, "kem", "", "the key pair to generate: xwing (the default) or x25519")
	fs.StringVar(&in.DataKeys, "data-keys", kms.DataKeysSplit, "where a call's data key comes from: split (the ring's key and a share of the call's that only its encrypt and a decrypt hand out, so every read is a recorded decrypt) or ring (the ring's key itself)")
	pubFile := fs.String("public-key-file", "", "wrap the ring's keys for the public key in `FILE` (docs/FORMAT.md) instead of a generated key pair")
	objectVar(fs, &in.Props, "props", "the ring's props, a JSON `OBJECT`")
	objectVar(fs, &in.KeyProps, "key-props", "props of the ring's keys, a JSON `OBJECT`")
	keyOut := fs.String("private-key-out", "", "write the generated private key to `FILE` (mode 0600; it must not exist) instead of printing it")
	return func(ctx context.Context, args []string) error {
		in.Name = args[0]
		if *pubFile != "" {
			if *keyOut != "" {
				return usagef("kmsctl ring create", "-private-key-out: with -public-key-file the private key is yours, not the service's")
			}
			b, err := os.ReadFile(*pubFile)
			if err != nil {
				return err
			}
			in.PublicKey = strings.TrimSpace(string(b))
		}
		// The file is made before the ring, so that a file that cannot
		// be written costs no ring whose key would be lost.
		var out *os.File
		if *keyOut != "" {
			var err error
			if out, err = os.OpenFile(*keyOut, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600); err != nil {
				return err
			}
		}
		res, err := c.kc.CreateKeyRing(ctx, in)
		if err != nil {
			if out != nil {
				out.Close()
				os.Remove(*keyOut)
			}
			return err
		}
		shown := any(res.PrivateKey)
		if out != nil {
			if err := writeKey(out, res.PrivateKey); err != nil {
				fmt.Fprintf(c.stderr, "private key of ring %s (shown once; keep it): %s\n", res.Ring.Name, res.PrivateKey)
				return fmt.Errorf("ring %s created, but its private key could not be written (%v): it is printed above", res.Ring.Name, err)
			}
			res.PrivateKey, shown = "", "written to "+*keyOut
		}
		if err := c.show(res, ringFields(res.Ring, "key", res.Key.ID, "private key", shown)); err != nil {
			return err
		}
		if res.PrivateKey != "" && !c.json {
			fmt.Fprintln(c.stderr, "The private key is shown this once: keep it, the service does not.")
		}
		return nil
	}
}

// writeKey writes a private key to f, syncs and closes it.
func writeKey(f *os.File, key string) error {
	_, err := io.WriteString(f, key+"\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func ringList(c *cli, fs *flag.FlagSet) action {
	pf := addPageFlags(fs)
	return func(ctx context.Context, args []string) error {
		return list(ctx, c, pf, c.kc.ListKeyRings, ringHeader, ringRow)
	}
}

func ringShow(c *cli, fs *flag.FlagSet) action {
	return func(ctx context.Context, args []string) error {
		r, err := c.kc.GetKeyRing(ctx, ringRef(args[0]))
		if err != nil {
			return err
		}
		return c.show(map[string]any{"ring": r}, ringFields(r))
	}
}

func ringRotate(c *cli, fs *flag.FlagSet) action {
	held := fs.Bool("held", false, "NAME is a held key (a transit key, or the Kubernetes KMS plugin's: an /asym ring the service holds), not a /ks ring")
	return func(ctx context.Context, args []string) error {
		if *held {
			k, err := c.kc.RotateAsym(ctx, kms.RotateInput{RingName: args[0]})
			if err != nil {
				return err
			}
			return c.show(map[string]any{"key": k}, fields("id", k.ID, "version", k.Version, "state", k.State))
		}
		k, err := c.kc.Rotate(ctx, kms.RotateInput{RingName: args[0]})
		return c.showKey(ctx, ringRef(args[0]), k, err)
	}
}

func ringConfig(c *cli, fs *flag.FlagSet) action {
	maxCount := fs.Int64("max-encrypt-count", 0, "encrypt calls one key serves before the ring rotates by itself (0: no limit)")
	period := fs.String("rotation-period", "", "how long a key stays active before the ring rotates by itself, a `DURATION` of at least 1h such as 720h (0: none)")
	var props, keyProps map[string]any
	objectVar(fs, &props, "props", "the ring's props, a JSON `OBJECT` (replaces them)")
	objectVar(fs, &keyProps, "key-props", "props given to the ring's new keys, a JSON `OBJECT` (replaces them)")
	file := fs.String("file", "", "the whole configuration as JSON in `FILE` (- for standard input), as ring config -json prints it")
	return func(ctx context.Context, args []string) error {
		name := args[0]
		if *maxCount < 0 {
			return usagef("kmsctl ring config", "-max-encrypt-count %d: want 0 (no limit) or more", *maxCount)
		}
		changed := isSet(fs, "max-encrypt-count") || isSet(fs, "rotation-period") || props != nil || keyProps != nil
		var cfg *kms.KeyRingConfig
		var err error
		switch {
		case *file != "":
			cfg, err = c.readConfig(*file)
		default:
			cfg, err = c.kc.GetConfig(ctx, ringRef(name))
		}
		if err != nil {
			return err
		}
		if *file != "" || changed {
			if isSet(fs, "max-encrypt-count") {
				cfg.Algos.AES256.MaxEncryptCount = *maxCount
			}
			if isSet(fs, "rotation-period") {
				cfg.Algos.AES256.RotationPeriod = *period
			}
			if props != nil {
				cfg.Props = props
			}
			if keyProps != nil {
				cfg.Key.Props = keyProps
			}
			if cfg, err = c.kc.SetConfig(ctx, ringRef(name), cfg); err != nil {
				return err
			}
		}
		limit := fmt.Sprint(cfg.Algos.AES256.MaxEncryptCount)
		if cfg.Algos.AES256.MaxEncryptCount == 0 {
			limit = "0 (no limit)"
		}
		rotation := cfg.Algos.AES256.RotationPeriod
		if rotation == "" {
			rotation = "none"
		}
		return c.show(map[string]any{"config": cfg}, fields("ring", name, "max encrypt count", limit, "rotation period", rotation,
			"props", cfg.Props, "key props", cfg.Key.Props))
	}
}

// readConfig reads a ring configuration from a JSON file (- for standard
// input): the object itself or {"config": ...}, as ring config -json
// prints it. Unknown members are an error, as they would be a typo.
func (c *cli) readConfig(path string) (*kms.KeyRingConfig, error) {
	var b []byte
	var err error
	if path == "-" {
		if err = c.claimStdin("-file"); err != nil {
			return nil, err
		}
		b, err = io.ReadAll(c.stdin)
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, err
	}
	var wrapped struct {
		Config json.RawMessage `json:"config"`
	}
	if json.Unmarshal(b, &wrapped) == nil && len(wrapped.Config) > 0 {
		b = wrapped.Config
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	var cfg kms.KeyRingConfig
	if err := dec.Decode(&cfg); err != nil {
		return nil, fmt.Errorf("%s: not a ring configuration: %v", path, err)
	}
	return &cfg, nil
}

func ringDelete(c *cli, fs *flag.FlagSet) action {
	yes := fs.Bool("yes", false, "confirm: the ring's keys are gone for good, and what they encrypted with them")
	return func(ctx context.Context, args []string) error {
		if !*yes {
			return usagef("kmsctl ring delete", "deleting ring %s destroys its keys for good: give -yes to confirm", args[0])
		}
		return shown(c, func(r *kms.DeleteKeyRingResult) table {
			return fields("deleted ring", r.Name, "id", r.ID)
		})(c.kc.DeleteKeyRing(ctx, ringRef(args[0])))
	}
}
