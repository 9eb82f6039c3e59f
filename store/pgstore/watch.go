package pgstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ringkms/kms"
	"github.com/ringkms/kms/store/internal/retry"
)

var _ kms.Watcher = (*Store)(nil)

// Change announcements (kms.Watcher). A transaction that writes keys under
// a watched prefix sends, in its commit, a NOTIFY on the channel
// kms_changes, so that the announcement is delivered if and only if the
// transaction commits. Its payload is the announcing Store's token (16
// hex characters, random per Open) and the keys, each in unpadded base64,
// separated by spaces; or the token and "*" (everything may have changed)
// when the keys would not fit in notifyMax bytes (PostgreSQL's limit is
// 8000). Each watching Store LISTENs on a connection of its own, outside
// the pool, and skips its own announcements.
const (
	notifyChannel = "kms_changes"
	notifyMax     = 7900
	sqlNotify     = "SELECT pg_notify('" + notifyChannel + "', $1)"
	sqlListen     = "LISTEN " + notifyChannel
)

// Bounds of the watch's reconnections after its connection is lost.
const (
	watchMinBackoff = 50 * time.Millisecond
	watchMaxBackoff = 5 * time.Second
)

// watch is the state of a Store's watch.
type watch struct {
	mu       sync.RWMutex
	prefixes [][]byte // announced and delivered; nil: no watch
	token    string
}

func newToken() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// watches reports whether key is under a watched prefix.
func (w *watch) watches(key []byte) bool {
	w.mu.RLock()
	defer w.mu.RUnlock()
	for _, p := range w.prefixes {
		if bytes.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// payload is the NOTIFY payload announcing keys.
func (w *watch) payload(keys [][]byte) string {
	var sb strings.Builder
	sb.WriteString(w.token)
	for _, k := range keys {
		if sb.Len()+1+base64.RawStdEncoding.EncodedLen(len(k)) > notifyMax {
			return w.token + " *"
		}
		sb.WriteByte(' ')
		sb.WriteString(base64.RawStdEncoding.EncodeToString(k))
	}
	return sb.String()
}

// parse decodes a payload: whether it is this Store's own, and the keys
// it announces under a watched prefix (nil: everything may have changed).
func (w *watch) parse(payload string) (own bool, keys [][]byte) {
	fields := strings.Fields(payload)
	if len(fields) == 0 {
		return false, nil
	}
	if fields[0] == w.token {
		return true, nil
	}
	for _, f := range fields[1:] {
		k, err := base64.RawStdEncoding.DecodeString(f)
		if err != nil { // "*", or a payload of another kind
			return false, nil
		}
		if w.watches(k) {
			keys = append(keys, k)
		}
	}
	if keys == nil {
		keys = [][]byte{} // announced keys, none watched
	}
	return false, keys
}

// Watch calls fn with the keys under prefixes that other processes'
// committed transactions wrote (see kms.Watcher). It LISTENs on a
// connection of its own; when that connection is lost, it calls fn(nil)
// and connects again, with a backoff of up to 5 s, calling fn(nil) once
// more when it is back, since announcements meanwhile are lost. A
// connection that stays quiet for the Store's timeout is pinged, and one
// that does not answer within it counts as lost. fn runs
// on the watch's goroutine, one call at a time.
func (s *Store) Watch(prefixes [][]byte, fn func(keys [][]byte)) (stop func()) {
	s.watch.mu.Lock()
	for _, p := range prefixes {
		s.watch.prefixes = append(s.watch.prefixes, bytes.Clone(p))
	}
	s.watch.mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for attempt := 0; ctx.Err() == nil; attempt++ {
			if s.listen(ctx, fn) {
				attempt = 0 // it had connected: start the backoff over
			}
			if ctx.Err() != nil {
				return
			}
			fn(nil)
			retry.Backoff(ctx, attempt, watchMinBackoff, watchMaxBackoff)
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// listen connects, LISTENs and delivers announcements until the
// connection fails or ctx ends. It reports whether it got as far as
// LISTEN.
func (s *Store) listen(ctx context.Context, fn func(keys [][]byte)) bool {
	conn, err := s.holdConn(ctx)
	if err == nil {
		rctx, cancel := s.roundTripCtx(ctx)
		_, err = conn.Exec(rctx, sqlListen)
		cancel()
	}
	if conn != nil {
		defer func() {
			cctx, cancel := context.WithTimeout(context.Background(), rollbackTimeout)
			closeHold(cctx, conn)
			cancel()
		}()
	}
	if err != nil {
		return false
	}
	fn(nil) // what was announced before the LISTEN is lost
	for {
		n, err := s.waitNotification(ctx, conn)
		if err != nil {
			return true
		}
		if n == nil {
			continue // the connection answered a ping
		}
		if own, keys := s.watch.parse(n.Payload); !own && (keys == nil || len(keys) > 0) {
			fn(keys)
		}
	}
}

// waitNotification waits for the next announcement on conn, for at most
// the Store's timeout: a connection that stays quiet that long is pinged,
// with the same bound, and one that does not answer (its packets held by
// a partition, its server frozen) is reported as lost, so that the watch
// connects again rather than wait forever. It returns nil and no error
// after a ping answered.
func (s *Store) waitNotification(ctx context.Context, conn *pgx.Conn) (*pgconn.Notification, error) {
	if s.timeout <= 0 {
		return conn.WaitForNotification(ctx)
	}
	wctx, cancel := context.WithTimeout(ctx, s.timeout)
	n, err := conn.WaitForNotification(wctx)
	cancel()
	if err == nil || ctx.Err() != nil || wctx.Err() == nil {
		return n, err
	}
	pctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := conn.Ping(pctx); err != nil {
		return nil, err
	}
	return nil, nil
}
