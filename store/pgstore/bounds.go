package pgstore

import (
	"context"
	"net"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Bounds of what a Store holds in the database. Every connection the Store
// opens (its pool's, its hold's and its watch's) asks the server to let go
// by itself of whatever a silent client holds there, all derived from the
// Store's one timeout T (Options.QueryTimeout, 5 s by default), which also
// bounds each round trip on the client side:
//
//   - idle_in_transaction_session_timeout, T/2: a session that sits in a
//     transaction without sending anything (its client frozen, or the
//     network between them holding packets) is ended by the server, which
//     rolls its transaction back and lets go of its locks, the append lock
//     (Trail.AppendIn) among them. T/2, so that a node waiting for that
//     lock is granted it before its own round trip's bound T;
//   - lock_timeout, 3T/4: a statement that waits longer than that for a
//     lock (the append lock held by a client that is busy rather than
//     silent) fails, and the call with kind Unavailable, rather than hang;
//   - statement_timeout, 2T: a backstop for a statement whose client has
//     gone; the client gives up on a round trip after T already, so this
//     ends nothing that the client would still wait for, big statements
//     included;
//   - tcp_user_timeout T, and TCP keep-alives after T/2 of silence: the
//     server ends a connection whose peer has stopped acknowledging
//     (a partition, a host that died), in or out of a transaction. The
//     client side's dialer sets the same on its socket.
//
// A setting that the URL names itself is left as the URL says. With a
// negative QueryTimeout, nothing is set.
const (
	paramIdleInTxn    = "idle_in_transaction_session_timeout"
	paramLock         = "lock_timeout"
	paramStatement    = "statement_timeout"
	paramTCPUser      = "tcp_user_timeout"
	paramKeepIdle     = "tcp_keepalives_idle"
	paramKeepInterval = "tcp_keepalives_interval"
	paramKeepCount    = "tcp_keepalives_count"
)

// keepCount is the number of unanswered keep-alive probes after which a
// connection is dropped (where TCP_USER_TIMEOUT does not decide first).
const keepCount = 3

// sessionBounds sets, in the runtime parameters of cc and its dialer, the
// bounds derived from timeout (see above); timeout <= 0 sets none.
func sessionBounds(cc *pgconn.Config, timeout time.Duration) {
	if timeout <= 0 {
		return
	}
	ms := func(d time.Duration) string { return strconv.FormatInt(max(d.Milliseconds(), 1), 10) }
	secs := func(d time.Duration) string {
		return strconv.FormatInt(max(int64((d+time.Second-1)/time.Second), 1), 10)
	}
	rp := cc.RuntimeParams
	set := func(k, v string) {
		if _, ok := rp[k]; !ok {
			rp[k] = v
		}
	}
	set(paramIdleInTxn, ms(timeout/2))
	set(paramLock, ms(timeout*3/4))
	set(paramStatement, ms(2*timeout))
	set(paramTCPUser, ms(timeout))
	set(paramKeepIdle, secs(timeout/2))
	set(paramKeepInterval, secs(timeout/(2*keepCount)))
	set(paramKeepCount, strconv.Itoa(keepCount))
	cc.DialFunc = boundedDial(cc.DialFunc, timeout)
}

// boundedDial wraps dial (pgx's, which applies connect_timeout) so that the
// client's socket, too, drops a connection whose peer stopped answering:
// keep-alive probes after timeout/2 of silence, and TCP_USER_TIMEOUT (on
// Linux) of timeout for data sent and not acknowledged.
func boundedDial(dial pgconn.DialFunc, timeout time.Duration) pgconn.DialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetKeepAliveConfig(net.KeepAliveConfig{
				Enable:   true,
				Idle:     max(timeout/2, time.Second),
				Interval: max(timeout/(2*keepCount), time.Second),
				Count:    keepCount,
			})
			setUserTimeout(tc, timeout)
		}
		return c, nil
	}
}
