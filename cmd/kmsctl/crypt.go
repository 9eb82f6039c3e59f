package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/envelope"
)

// Envelope encryption of files and streams (package envelope): encrypt
// asks the service for a ring's active key and seals the input under it;
// decrypt hands the envelope's hash and header back to the service for
// the key and opens it; rewrap does both, to move an envelope to its
// ring's active key. They stream: memory stays at a 64 KiB chunk or two
// whatever the size.

// progressMin is the smallest input whose progress is shown.
const progressMin = 8 << 20

func encryptCommand() *command {
	return &command{
		name: "encrypt", auth: true, required: []string{"ring"}, setup: encryptSetup,
		summary: "Encrypt a file or standard input into an envelope with the active key of a ring. " +
			"The ring's private key (-private-key) unwraps the key the service hands out. " +
			"What the encrypt call answered (hash, key, Asset) goes to standard output, or to standard error when the envelope does. " +
			"-in and -out are checked before the call, so that a file that cannot be read or written costs no hash; a file already at -out is replaced only with -force.",
	}
}

func decryptCommand() *command {
	return &command{
		name: "decrypt", auth: true, setup: decryptSetup,
		summary: "Decrypt an envelope: the service checks its hash and header and hands back the key, which the ring's private key unwraps. " +
			"With -out, the plaintext is written to a temporary file next to it and renamed only once the whole envelope opened, so a damaged or altered envelope leaves nothing at -out; a file already there is replaced only with -force. " +
			"On standard output the plaintext comes as it is authenticated, chunk by chunk: on an error (exit 1) what was written is partial, and not to be used.",
	}
}

func rewrapCommand() *command {
	return &command{
		name: "rewrap", auth: true, setup: rewrapSetup,
		summary: "Encrypt an envelope again, under the active key of its ring. " +
			"It is opened as decrypt opens it (a decrypt call, with the same checks) and its plaintext sealed into a new envelope as encrypt seals it (an encrypt call on the same ring), chunk by chunk, with the same associated data (-ad). " +
			"The Asset the old header signs, if any, is kept: the encrypt call updates it without changing its data or parents, so the new header signs the same Asset. " +
			"-out is written under a temporary name and renamed once the whole envelope was opened and sealed again; a file already there is replaced only with -force, but -out may name the -in file without it, which is then replaced in place. " +
			"What the two calls answered (old and new key and hash, Asset) goes to standard output, or to standard error when the envelope does.",
	}
}

// cryptOp is what a command of pipe does with its input and output.
type cryptOp struct {
	verb     string // the command: encrypt, decrypt, rewrap
	envelope bool   // it writes an envelope, never to a terminal
	inPlace  bool   // -out may name the -in file, which it then replaces without -force
}

var (
	opEncrypt = cryptOp{verb: "encrypt", envelope: true}
	opDecrypt = cryptOp{verb: "decrypt"}
	opRewrap  = cryptOp{verb: "rewrap", envelope: true, inPlace: true}
)

// cryptFlags are the flags of encrypt, decrypt and rewrap.
type cryptFlags struct {
	in, out    string
	force      bool
	ad         string
	privateKey string
}

func addCryptFlags(fs *flag.FlagSet) *cryptFlags {
	f := &cryptFlags{}
	fs.StringVar(&f.in, "in", "-", "read from `FILE` (- for standard input)")
	fs.StringVar(&f.out, "out", "-", "write to `FILE` (- for standard output); a file that exists is refused without -force")
	fs.BoolVar(&f.force, "force", false, "replace the file at -out if there is one")
	fs.StringVar(&f.ad, "ad", "", "associated data: a `STRING` (a file name, a row ID) bound to the envelope but not stored in it; decrypt must be given the same")
	fs.StringVar(&f.privateKey, "private-key", "", "the ring's private key in `FILE` (- for standard input; default $KMS_PRIVATE_KEY_FILE, else $KMS_PRIVATE_KEY)")
	return f
}

func encryptSetup(c *cli, fs *flag.FlagSet) action {
	ring := fs.String("ring", "", "the key ring's `NAME` (required)")
	var asset kms.AssetInput
	objectVar(fs, &asset.Data, "asset-data", "create an Asset with this data, a JSON `OBJECT` (with -asset-id: replace the Asset's data)")
	fs.StringVar(&asset.AssetID, "asset-id", "", "update the Asset `ID` (needs the ring's encrypt flag or assets.write)")
	listVar(fs, &asset.Parents, "asset-parent", "a parent Asset `ID` of the Asset")
	f := addCryptFlags(fs)
	return func(ctx context.Context, args []string) error {
		in := envelope.SealInput{RingName: *ring, AssociatedData: []byte(f.ad)}
		if asset.Data != nil || asset.AssetID != "" || asset.Parents != nil {
			if asset.Data == nil && asset.AssetID == "" {
				asset.Data = map[string]any{}
			}
			in.Asset = &asset
		}
		var res *kms.EncryptResult
		var n int64
		w, err := c.pipe(ctx, f, opEncrypt, func(s *envelope.Sealer, dst io.Writer, src io.Reader) error {
			ew, err := s.NewWriter(ctx, dst, in)
			if err != nil {
				return err
			}
			if n, err = io.Copy(ew, src); err != nil {
				return err
			}
			if err := ew.Close(); err != nil {
				return err
			}
			res = ew.Result()
			return nil
		})
		if err != nil {
			return err
		}
		assetID := ""
		if res.Asset != nil {
			assetID = res.Asset.ID
		}
		// The share of a split ring's call went into the data key; shown,
		// it would let whoever sees this output and holds the ring's
		// private key open the envelope without a decrypt call, unrecorded.
		shown := *res
		shown.KeyShare = ""
		return c.showOn(w, &shown, fields("ring", *ring, "key", res.Key.ID, "hash", res.Hash, "asset", assetID, "bytes", n, "out", outName(f.out)))
	}
}

func decryptSetup(c *cli, fs *flag.FlagSet) action {
	f := addCryptFlags(fs)
	return func(ctx context.Context, args []string) error {
		var res *kms.DecryptResult
		var n int64
		w, err := c.pipe(ctx, f, opDecrypt, func(s *envelope.Sealer, dst io.Writer, src io.Reader) error {
			er, err := s.NewReader(ctx, src, []byte(f.ad))
			if err != nil {
				return err
			}
			res = er.Result()
			n, err = io.Copy(dst, er)
			return err
		})
		if err != nil {
			return err
		}
		shown := *res
		shown.KeyShare = "" // as encrypt's
		return c.showOn(w, &shown, fields("ring", res.RingName, "key", res.Key.ID, "asset", res.Asset.ID, "bytes", n, "out", outName(f.out)))
	}
}

// rewrapped is what rewrap prints with -json: the envelope it opened
// (its hash and header) and the answers of the decrypt and encrypt
// calls, without their shares.
type rewrapped struct {
	Opened struct {
		Hash   string `json:"hash"`
		Header string `json:"header"`
	} `json:"opened"`
	Decrypt *kms.DecryptResult `json:"decrypt"`
	Encrypt *kms.EncryptResult `json:"encrypt"`
}

func rewrapSetup(c *cli, fs *flag.FlagSet) action {
	f := addCryptFlags(fs)
	return func(ctx context.Context, args []string) error {
		var res *envelope.RewrapResult
		w, err := c.pipe(ctx, f, opRewrap, func(s *envelope.Sealer, dst io.Writer, src io.Reader) error {
			var err error
			res, err = s.Rewrap(ctx, dst, src, envelope.RewrapInput{AssociatedData: []byte(f.ad)})
			return err
		})
		if err != nil {
			return err
		}
		var shown rewrapped
		shown.Opened.Hash, shown.Opened.Header = res.Opened.Hash, res.Opened.Header
		dec, enc := *res.Decrypt, *res.Encrypt
		dec.KeyShare, enc.KeyShare = "", "" // as encrypt's
		shown.Decrypt, shown.Encrypt = &dec, &enc
		return c.showOn(w, &shown, fields("ring", dec.RingName, "old key", dec.Key.ID, "old hash", res.Opened.Hash,
			"new key", enc.Key.ID, "new hash", enc.Hash, "asset", dec.Asset.ID, "bytes", res.Size, "out", outName(f.out)))
	}
}

// outName names an output for the summary.
func outName(path string) string {
	if path == "-" {
		return "standard output"
	}
	return path
}

// pipe runs body from the input to the output of f for the command op,
// with a Sealer that unwraps with the private key of f, and returns where
// the summary of the run goes: standard output when the data went to a
// file, else standard error. What can be checked without the service is
// checked before body calls it: the private key, the input (it opens, and
// is not a directory) and the output (not a directory, nor a file that
// exists without -force unless op writes in place and it is the input's,
// and its directory takes a new file), so that a call that issues a hash
// is not spent on a run that could not finish. A file output is written
// under a temporary name and renamed once body succeeded and the input is
// closed; on an error nothing is left at its path, and a file that was
// there stays as it was.
func (c *cli) pipe(ctx context.Context, f *cryptFlags, op cryptOp, body func(s *envelope.Sealer, dst io.Writer, src io.Reader) error) (io.Writer, error) {
	path := "kmsctl " + op.verb
	if op.envelope && f.out == "-" {
		if _, tty := terminal(c.stdout); tty {
			return nil, usagef(path, "standard output is a terminal: give -out FILE, or redirect it")
		}
	}
	if f.in == "-" {
		// Claimed first, so that a private key on standard input too is
		// refused before anything is read.
		if err := c.claimStdin("-in"); err != nil {
			return nil, err
		}
	}
	pk, err := c.privateKey(path, f.privateKey)
	if err != nil {
		return nil, err
	}
	src, inInfo, closeIn, err := c.openInput(f.in)
	if err != nil {
		return nil, err
	}
	defer closeIn()
	size := int64(-1)
	if inInfo != nil && inInfo.Mode().IsRegular() {
		size = inInfo.Size()
	}
	summary, dst := c.stderr, io.Writer(c.stdout)
	var tmp *atomicFile
	if f.out != "-" {
		var in fs.FileInfo
		if op.inPlace {
			in = inInfo
		}
		if tmp, err = createOutput(f.out, f.force, in); err != nil {
			return nil, err
		}
		defer tmp.abort()
		summary, dst = c.stdout, tmp
	}
	cw := &countWriter{w: dst}
	p := c.progress(ctx, src, size, op.verb)
	err = body(envelope.New(c.kc, pk), cw, p)
	p.finish()
	if err != nil {
		if tmp == nil && op == opDecrypt && cw.n > 0 {
			err = fmt.Errorf("%w\nthe %d bytes written to standard output are partial: discard them", err, cw.n)
		}
		return nil, err
	}
	if tmp != nil {
		// Closed first: a file being read cannot be renamed over
		// everywhere, and -out may be the input's file.
		closeIn()
		if err := tmp.commit(); err != nil {
			return nil, err
		}
	}
	return summary, nil
}

// privateKey reads the ring's private key: from the file path (- for
// standard input), KMS_PRIVATE_KEY_FILE, or KMS_PRIVATE_KEY itself.
func (c *cli) privateKey(cmdPath, path string) (*kms.PrivateKey, error) {
	if path == "" {
		path = c.getenv("KMS_PRIVATE_KEY_FILE")
	}
	var text []byte
	var err error
	switch {
	case path == "-":
		if err = c.claimStdin("-private-key"); err != nil {
			return nil, err
		}
		text, err = io.ReadAll(c.stdin)
	case path != "":
		text, err = os.ReadFile(path)
	case c.getenv("KMS_PRIVATE_KEY") != "":
		text = []byte(c.getenv("KMS_PRIVATE_KEY"))
	default:
		return nil, usagef(cmdPath, "the ring's private key is needed: give -private-key FILE, or set KMS_PRIVATE_KEY_FILE")
	}
	if err != nil {
		return nil, fmt.Errorf("private key: %w", err)
	}
	defer clear(text)
	return kms.ParsePrivateKey(text)
}

// openInput opens the input path (- for standard input, which the
// caller claimed) and returns it, what it is (nil when unknown: standard
// input that is not a file) and its closer, which may be called more
// than once. A file that does not open, or is a directory, is an error
// that names it.
func (c *cli) openInput(path string) (io.Reader, fs.FileInfo, func(), error) {
	var f *os.File
	if path == "-" {
		file, ok := c.stdin.(*os.File)
		if !ok {
			return c.stdin, nil, func() {}, nil
		}
		f = file
	} else {
		var err error
		if f, err = os.Open(path); err != nil {
			return nil, nil, nil, flagPathError("-in", path, err)
		}
	}
	closer := func() {}
	if path != "-" {
		closer = sync.OnceFunc(func() { f.Close() })
	}
	st, err := f.Stat()
	switch {
	case err != nil:
		st = nil
	case st.IsDir():
		closer()
		return nil, nil, nil, fmt.Errorf("-in %s: is a directory", path)
	}
	return f, st, closer, nil
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (cw *countWriter) Write(p []byte) (int, error) {
	n, err := cw.w.Write(p)
	cw.n += int64(n)
	return n, err
}

// progress reads its input, stops when ctx is done (an interrupt), and
// draws a progress bar on w, if any.
type progress struct {
	ctx         context.Context
	r           io.Reader
	w           io.Writer // nil: no bar
	label       string
	total, done int64
	drawn       time.Time
}

// progress wraps src: with a bar on stderr when stderr is a terminal and
// src is a file of more than progressMin bytes.
func (c *cli) progress(ctx context.Context, src io.Reader, size int64, label string) *progress {
	p := &progress{ctx: ctx, r: src, label: label, total: size}
	if _, tty := terminal(c.stderr); tty && size > progressMin {
		p.w = c.stderr
	}
	return p
}

func (p *progress) Read(b []byte) (int, error) {
	if err := p.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := p.r.Read(b)
	p.done += int64(n)
	if p.w != nil && time.Since(p.drawn) >= 100*time.Millisecond {
		p.draw()
	}
	return n, err
}

func (p *progress) draw() {
	const width = 30
	p.drawn = time.Now()
	frac := min(1, float64(p.done)/float64(p.total))
	fill := int(frac * width)
	fmt.Fprintf(p.w, "\r%s [%s%s] %3.0f%% %.1f / %.1f MiB", p.label, strings.Repeat("=", fill), strings.Repeat(" ", width-fill),
		frac*100, float64(p.done)/(1<<20), float64(p.total)/(1<<20))
}

// finish draws the bar a last time and ends its line.
func (p *progress) finish() {
	if p.w != nil {
		p.draw()
		fmt.Fprintln(p.w)
	}
}

// flagPathError is err, of an operation on the file path given with
// the flag, in the words of the command line: the flag and the path, not
// the system call or a temporary file.
func flagPathError(flag, path string, err error) error {
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		err = pe.Err
	case errors.As(err, &le):
		err = le.Err
	}
	return fmt.Errorf("%s %s: %w", flag, path, err)
}

// createOutput checks that a file can be written at path, the -out of
// encrypt, decrypt or rewrap, and starts it: path is not a directory nor
// any other file but a regular one (a rename onto /dev/null would
// replace the device), a file there is replaced only with force or when
// it is in, the input of a command that writes in place (nil for one
// that does not), and its directory takes a new file. The errors name
// path, not the temporary file. Without force the file is committed only
// if nothing is at path then either, or in place, only if in is still
// there unchanged; in place, it keeps in's permissions, and a symbolic
// link at path stays: the file it leads to is the one replaced.
func createOutput(path string, force bool, in fs.FileInfo) (*atomicFile, error) {
	st, err := os.Stat(path)
	inPlace := err == nil && in != nil && os.SameFile(st, in)
	switch {
	case err == nil && st.IsDir():
		return nil, fmt.Errorf("-out %s: is a directory", path)
	case err == nil && !st.Mode().IsRegular():
		return nil, fmt.Errorf("-out %s: not a regular file: kmsctl writes -out by renaming a new file onto it; give -out - and redirect standard output instead", path)
	case err == nil && !force && !inPlace:
		return nil, fmt.Errorf("-out %s: the file exists: give -force to replace it", path)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return nil, flagPathError("-out", path, err)
	}
	target := path
	if inPlace {
		// Through a symbolic link, the file it leads to is rewritten
		// and the link stays.
		if real, err := filepath.EvalSymlinks(path); err == nil {
			target = real
		}
	}
	a, err := createAtomic(target)
	if err != nil {
		dir := filepath.Dir(target)
		if _, serr := os.Stat(dir); errors.Is(serr, fs.ErrNotExist) {
			return nil, fmt.Errorf("-out %s: the directory %s does not exist", path, dir)
		}
		return nil, flagPathError("-out", path, fmt.Errorf("cannot create a file in %s: %w", dir, errors.Unwrap(err)))
	}
	a.flag, a.noReplace = "-out", !force
	if inPlace {
		a.noReplace, a.mode = false, in.Mode().Perm()
		if !force {
			a.replaces = in
		}
	}
	return a, nil
}

// atomicFile is a file written under a temporary name next to its path
// (mode 0600) and renamed to it by commit: until then, nothing is at the
// path, or what was there stays.
type atomicFile struct {
	*os.File
	path      string
	flag      string      // the flag that gave path, for the errors; "" for none
	noReplace bool        // commit fails if a file is at path
	replaces  fs.FileInfo // commit fails unless this file is at path
	mode      fs.FileMode // the permissions to commit with; 0 for 0600
	done      bool
}

func createAtomic(path string) (*atomicFile, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return nil, err
	}
	return &atomicFile{File: f, path: path}, nil
}

// commit syncs and closes the file and renames it to its path. With
// noReplace it links the file there instead, which fails if something
// is at the path (created since the checks), and then removes the
// temporary name; where the file system has no hard links, it checks
// and renames. With replaces, it renames only if that file is still at
// the path.
func (a *atomicFile) commit() error {
	var err error
	if a.mode != 0 {
		err = a.Chmod(a.mode)
	}
	if serr := a.Sync(); err == nil {
		err = serr
	}
	if cerr := a.Close(); err == nil {
		err = cerr
	}
	if err == nil && a.noReplace {
		if err = os.Link(a.Name(), a.path); err == nil {
			a.done = true
			os.Remove(a.Name())
			return nil
		}
		if _, serr := os.Lstat(a.path); errors.Is(err, fs.ErrExist) || serr == nil {
			return fmt.Errorf("%s %s: a file was created there meanwhile; it was left as it is (give -force to replace it)", a.flag, a.path)
		}
		err = nil // no hard links here: rename
	}
	if err == nil && a.replaces != nil {
		if st, serr := os.Stat(a.path); serr != nil || !unchanged(st, a.replaces) {
			return fmt.Errorf("%s %s: the file was changed, replaced or removed meanwhile; it was left as it is (give -force to replace it)", a.flag, a.path)
		}
	}
	if err == nil {
		err = os.Rename(a.Name(), a.path)
	}
	if err != nil {
		if a.flag != "" {
			return flagPathError(a.flag, a.path, err)
		}
		return err
	}
	a.done = true
	return nil
}

// unchanged reports whether now is the file was, as it was: the same
// file, of the same size and modification time.
func unchanged(now, was fs.FileInfo) bool {
	return os.SameFile(now, was) && now.Size() == was.Size() && now.ModTime().Equal(was.ModTime())
}

// abort removes the file unless it was committed.
func (a *atomicFile) abort() {
	if !a.done {
		a.Close()
		os.Remove(a.Name())
	}
}
