package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/cmd/kmsd/internal/auditsink"
	"github.com/ringkms/kms/store/pgstore"
)

// observers is the Service's Observer: the metrics, when on, and the
// audit sink's follower, which each batch wakes.
type observers struct {
	metrics  kms.Observer
	follower atomic.Pointer[auditsink.Follower]
}

func (o *observers) ObserveBatch(calls int, commit, appendTime time.Duration, err error) {
	if o.metrics != nil {
		o.metrics.ObserveBatch(calls, commit, appendTime, err)
	}
	if f := o.follower.Load(); f != nil {
		f.Notify()
	}
}

func (o *observers) ObserveRecords(recs []*kms.Activity) {
	if o.metrics != nil {
		o.metrics.ObserveRecords(recs)
	}
}

// startAuditSink starts delivering the trail of st to -audit-sink, and
// returns what stops it (after it delivered what was committed).
func startAuditSink(c *config, st kms.Store, obs *observers, stdout io.Writer, log *zerolog.Logger) (stop func(), err error) {
	sink, err := auditsink.Parse(c.auditSink, stdout, int64(c.auditSinkMax), c.auditSinkKeep)
	if err != nil {
		return nil, fmt.Errorf("-audit-sink: %w", err)
	}
	f := auditsink.NewFollower(st, sink, c.auditSinkFrom, func(err error, msg string) { log.Error().Err(err).Msg(msg) })
	obs.follower.Store(f)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		f.Run(ctx)
	}()
	log.Info().Str("sink", c.auditSink).Msg("audit sink started")
	return func() {
		obs.follower.Store(nil)
		cancel()
		wg.Wait()
		log.Info().Uint64("delivered", f.Delivered()).Msg("audit sink stopped")
	}, nil
}

// verifyAudit is kmsd verify-audit: it checks the activity trail's hash
// chain in the store of -store (the data directory by default) and prints
// what it found. With kmsd running on the embedded store, the running
// kmsd checks it, with its master key (asked on its admin socket); else
// verify-audit opens the store itself. A broken chain is an exitError of
// status 3.
func verifyAudit(ctx context.Context, c *config, getenv func(string) string, stdout io.Writer, log *zerolog.Logger) error {
	var adminErr error
	if !c.postgres() {
		var sock string
		if sock, adminErr = dialAdmin(c.data); adminErr == nil {
			ans, err := verifyOnline(ctx, sock)
			if err != nil {
				return fmt.Errorf("verify activity chain: %w", err)
			}
			log.Debug().Str("socket", sock).Msg("verified by the running kmsd")
			return reportChain(stdout, kms.VerifyChainResult{Records: ans.Records, Head: ans.Head}, ans.Broken)
		}
	}
	st, mk, err := openExistingStore(ctx, c, getenv, log, false)
	if err != nil {
		return storeInUse(c, err, adminErr)
	}
	defer st.Close()
	res, err := kms.VerifyAudit(ctx, st, mk)
	mk = nil
	switch kms.ErrorKind(err) {
	case kms.KindUnprocessable:
		return reportChain(stdout, res, kms.ErrorMessage(err))
	case kms.KindUnauthenticated:
		return fmt.Errorf("verify activity chain: %s", kms.ErrorMessage(err))
	}
	if err != nil {
		return fmt.Errorf("verify activity chain: %w", err)
	}
	return reportChain(stdout, res, "")
}

// reportChain prints the outcome of a check of the chain: intact, or
// broken as broken says (an exitError of status 3).
func reportChain(stdout io.Writer, res kms.VerifyChainResult, broken string) error {
	if broken != "" {
		fmt.Fprintf(stdout, "activity chain BROKEN: %s\n", broken)
		fmt.Fprintf(stdout, "records verified before the damage: %d\n", res.Records)
		return exitError{3, fmt.Errorf("activity chain broken: %s", broken)}
	}
	fmt.Fprintf(stdout, "activity chain intact\nrecords checked: %d\nhead digest: %s\n", res.Records, res.Head)
	return nil
}

// auditExport is kmsd audit export: the activity records from -from on,
// as JSON lines on standard output (or -o FILE). With kmsd running on the
// embedded store, the running kmsd reads them (its admin socket); else
// kmsd reads the store itself. It needs no master key.
func auditExport(ctx context.Context, c *config, stdout io.Writer, log *zerolog.Logger) error {
	out := stdout
	if c.backupOut != "" && c.backupOut != "-" {
		f, err := os.OpenFile(c.backupOut, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return fmt.Errorf("audit export: %w", err)
		}
		defer f.Close()
		out = f
	}
	w := bufio.NewWriterSize(out, 256<<10)
	n, err := exportRecords(ctx, c, w, log)
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		return fmt.Errorf("audit export: %w", err)
	}
	log.Info().Uint64("from", c.auditFrom).Int("records", n).Msg("activity exported")
	return nil
}

func exportRecords(ctx context.Context, c *config, w io.Writer, log *zerolog.Logger) (int, error) {
	var adminErr error
	if !c.postgres() {
		var sock string
		if sock, adminErr = dialAdmin(c.data); adminErr == nil {
			return exportOnline(ctx, sock, c.auditFrom, w)
		}
		if !hasStore(c.data) {
			return 0, fmt.Errorf("no store in %s", c.data)
		}
	}
	st, err := openStore(ctx, c, pgstore.Options{Existing: true})
	if err != nil {
		return 0, storeInUse(c, err, adminErr)
	}
	defer st.Close()
	return writeRecords(ctx, st, c.auditFrom, w)
}

// writeRecords writes the records of st from seq from on as JSON lines.
func writeRecords(ctx context.Context, st kms.Store, from uint64, w io.Writer) (int, error) {
	n := 0
	err := kms.ExportActivity(ctx, st, from, func(a *kms.Activity) error {
		b, err := json.Marshal(a)
		if err != nil {
			return err
		}
		n++
		_, err = w.Write(append(b, '\n'))
		return err
	})
	return n, err
}

// exportOnline asks the running kmsd for the records.
func exportOnline(ctx context.Context, sock string, from uint64, w io.Writer) (int, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://kmsd/audit?from="+strconv.FormatUint(from, 10), nil)
	resp, err := adminClient(sock).Do(req)
	if err != nil {
		return 0, fmt.Errorf("ask the running kmsd: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return 0, fmt.Errorf("the running kmsd: %s", strings.TrimSpace(string(msg)))
	}
	// The last line says how it ended: a cut-off answer is an error.
	r := bufio.NewReaderSize(resp.Body, 256<<10)
	n := 0
	for {
		line, err := r.ReadBytes('\n')
		if err == io.EOF && len(line) == 0 {
			return n, errors.New("the running kmsd's answer ended early")
		}
		if err != nil && err != io.EOF {
			return n, err
		}
		if strings.HasPrefix(string(line), "#end ") {
			want, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(string(line), "#end ")))
			if want != n {
				return n, fmt.Errorf("the running kmsd sent %d records, and says %d", n, want)
			}
			return n, nil
		}
		if strings.HasPrefix(string(line), "#error ") {
			return n, errors.New(strings.TrimSpace(strings.TrimPrefix(string(line), "#error ")))
		}
		if _, err := w.Write(line); err != nil {
			return n, err
		}
		n++
	}
}

// serveExport answers GET /audit?from=N on the admin socket: the records
// as JSON lines, then a line "#end <count>" (or "#error <message>").
func serveExport(st kms.Store) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		from, err := strconv.ParseUint(r.URL.Query().Get("from"), 10, 64)
		if err != nil {
			http.Error(w, "from: want a sequence number", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		bw := bufio.NewWriterSize(w, 256<<10)
		n, err := writeRecords(r.Context(), st, from, bw)
		if err != nil {
			fmt.Fprintf(bw, "#error %s\n", kms.ErrorMessage(err))
		} else {
			fmt.Fprintf(bw, "#end %d\n", n)
		}
		bw.Flush()
	}
}
