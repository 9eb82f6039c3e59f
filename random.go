package kms

import (
	"context"
	"crypto/rand"
)

// FlagRandom grants GenerateRandom: random bytes from the service, which
// a caller whose own generator it does not trust asks for (AWS KMS's
// GenerateRandom).
const FlagRandom = "random.generate"

// MaxRandomBytes is the most GenerateRandom answers at once.
const MaxRandomBytes = 1024

// GenerateRandom answers n random bytes (1 to MaxRandomBytes) from the
// service's generator (crypto/rand). It needs FlagRandom and is recorded
// as random.generate with the count, never the bytes.
func (s *Service) GenerateRandom(ctx context.Context, n int) ([]byte, error) {
	p, err := s.authorize(ctx, randomAction, "", FlagRandom)
	if err != nil {
		return nil, err
	}
	if n < 1 || n > MaxRandomBytes {
		return nil, s.recordFailure(p, randomAction, "", Errorf(KindInvalid, "the number of random bytes must be 1 to %d, not %d", MaxRandomBytes, n))
	}
	if err := s.record(p, randomAction, "", map[string]any{"bytes": n}, nil); err != nil {
		return nil, err
	}
	out := make([]byte, n)
	rand.Read(out)
	return out, nil
}
