package pgstore

import (
	"context"
	"fmt"
	"strings"
)

// What the server's settings say of an acknowledged write's survival of a
// failover. kmsd runs its sessions with synchronous_commit on (Open forces
// it when the URL says off), so that a commit waits for the synchronous
// standbys the server names; the server must name some for that to mean
// anything.
const (
	sqlSyncCommit  = "SHOW synchronous_commit"
	sqlSyncNames   = "SHOW synchronous_standby_names"
	sqlInRecovery  = "SELECT pg_is_in_recovery()"
	sqlReplicas    = "SELECT count(*), count(sync_state), count(*) FILTER (WHERE sync_state IN ('sync', 'quorum')) FROM pg_stat_replication"
	warnSyncCommit = "synchronous_commit is %q on kmsd's sessions (from the URL): a commit does not wait for any standby to hold it, so a failover can lose acknowledged writes; remove synchronous_commit from the URL"
	warnAsyncOnly  = "the database server streams to %d standby(s) and synchronous_standby_names is empty: commits do not wait for any standby, so a failover to one can lose the writes acknowledged just before it; name the standbys in synchronous_standby_names"
	warnNoSyncNow  = "synchronous_standby_names is %q but none of the %d standby(s) streaming is synchronous now: every commit waits until one is"
)

// DurabilityWarnings says what in the server's settings lets a failover
// lose acknowledged writes, one sentence each, or nothing: synchronous
// commit turned to local by the URL, or standbys streaming with none named
// synchronous (synchronous_standby_names empty), or standbys named
// synchronous none of which streams (commits then wait). A server without
// standbys, or one in recovery (a standby itself), draws no warning; nor
// does what the connecting user may not see (pg_stat_replication hides
// sync_state from roles without pg_read_all_stats).
func (s *Store) DurabilityWarnings(ctx context.Context) ([]string, error) {
	ctx, cancel := s.roundTripCtx(ctx)
	defer cancel()
	c, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, s.translate(ctx, "read the server's settings", err)
	}
	defer c.Release()
	var warnings []string
	var commit, names string
	var recovering bool
	var standbys, visible, synced int
	if err := c.QueryRow(ctx, sqlSyncCommit).Scan(&commit); err != nil {
		return nil, s.translate(ctx, "read synchronous_commit", err)
	}
	if commit == "local" || commit == "off" {
		warnings = append(warnings, fmt.Sprintf(warnSyncCommit, commit))
	}
	if err := c.QueryRow(ctx, sqlInRecovery).Scan(&recovering); err != nil {
		return nil, s.translate(ctx, "read pg_is_in_recovery", err)
	}
	if recovering {
		return warnings, nil
	}
	if err := c.QueryRow(ctx, sqlSyncNames).Scan(&names); err != nil {
		return nil, s.translate(ctx, "read synchronous_standby_names", err)
	}
	if err := c.QueryRow(ctx, sqlReplicas).Scan(&standbys, &visible, &synced); err != nil {
		return nil, s.translate(ctx, "read pg_stat_replication", err)
	}
	switch names = strings.TrimSpace(names); {
	case standbys > 0 && names == "":
		warnings = append(warnings, fmt.Sprintf(warnAsyncOnly, standbys))
	case standbys > 0 && names != "" && visible == standbys && synced == 0:
		warnings = append(warnings, fmt.Sprintf(warnNoSyncNow, names, standbys))
	}
	return warnings, nil
}
