//go:build !linux

package pgstore

import (
	"net"
	"time"
)

// setUserTimeout does nothing where TCP_USER_TIMEOUT is not known: the
// keep-alives and the round trips' own bound remain.
func setUserTimeout(*net.TCPConn, time.Duration) {}
