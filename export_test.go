package kms

// SetJournalPause replaces the group-commit yield of s's journal (see
// gather) with pause. Call it while no job is in flight: the next
// job's submission publishes it to the journal.
func SetJournalPause(s *Service, pause func()) { s.journal.pause = pause }

// SetUnlimitedBlock sets how many encrypt calls a reservation covers for
// a key without a limit (unlimitedBlock), so that a test crosses blocks
// in a few calls. Call it before the first encrypt.
func SetUnlimitedBlock(s *Service, n uint64) { s.freeBlock = n }

// JournalQueued returns the number of jobs waiting for s's journal.
func JournalQueued(s *Service) int { return len(s.journal.jobs) }
