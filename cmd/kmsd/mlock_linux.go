package main

import (
	"bufio"
	"errors"
	"os"
	"strconv"
	"strings"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"
)

// mlockall locks kmsd's memory so that the master-derived keys and other
// secrets are never written to swap. It is best effort and never stops
// the server.
//
// Locking is attempted only when it cannot fail later: with CAP_IPC_LOCK
// or an unlimited RLIMIT_MEMLOCK. Under a finite limit, MCL_FUTURE would
// make later allocations (the Go heap, Badger's memory maps) fail once
// the limit is reached, which would crash a running server. Pages are
// locked as they are touched (MCL_ONFAULT), so Badger's large, sparse
// memory maps do not become resident all at once.
func mlockall(log *zerolog.Logger) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &lim); err != nil {
		log.Info().Err(err).Msg("memory not locked: cannot read RLIMIT_MEMLOCK")
		return
	}
	if lim.Cur != unix.RLIM_INFINITY && !hasCapability(capIPCLock) {
		log.Info().Uint64("memlock_limit_bytes", lim.Cur).
			Msg("memory not locked: it needs CAP_IPC_LOCK or an unlimited memlock limit (ulimit -l unlimited, LimitMEMLOCK=infinity); without it, secrets in memory may reach swap")
		return
	}
	err := unix.Mlockall(unix.MCL_CURRENT | unix.MCL_FUTURE | unix.MCL_ONFAULT)
	if errors.Is(err, unix.EINVAL) { // kernels before 4.4 lack MCL_ONFAULT
		err = unix.Mlockall(unix.MCL_CURRENT | unix.MCL_FUTURE)
	}
	if err != nil {
		log.Warn().Err(err).Msg("memory not locked: mlockall failed; secrets in memory may reach swap")
		return
	}
	log.Info().Msg("memory locked (mlockall)")
}

const capIPCLock = 14 // linux/capability.h

// hasCapability reports whether the process has capability n in its
// effective set, from /proc/self/status.
func hasCapability(n uint) bool {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "CapEff:")
		if !ok {
			continue
		}
		caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		return err == nil && caps&(1<<n) != 0
	}
	return false
}
