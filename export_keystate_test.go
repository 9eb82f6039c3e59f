package kms

import "context"

// DestroyDue runs a pass of s's destroyer now: it destroys the keys due
// and erases what the store keeps of them.
func DestroyDue(ctx context.Context, s *Service) error {
	_, err := s.destroyDue(ctx)
	return err
}

// DestroyPasses returns how many passes s's destroyer has finished, and a
// channel closed when the next one finishes.
func DestroyPasses(s *Service) (uint64, <-chan struct{}) {
	return s.destroyer.Passes()
}

// KeyRecordKey is the store key of the record of key keyID of ring ringID.
func KeyRecordKey(ringID, keyID string) []byte {
	return join(pfxKey, []byte(ringID), sep, []byte(keyID))
}
