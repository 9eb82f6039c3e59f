package envelope

import (
	"context"
	"fmt"
	"io"

	"github.com/ringkms/kms"
)

// RewrapInput says how to rewrap an envelope.
type RewrapInput struct {
	// AssociatedData is the associated data the envelope was sealed
	// with. The new envelope is sealed with the same bytes, so it is
	// bound to the same place.
	AssociatedData []byte
}

// RewrapResult is what a rewrap did.
type RewrapResult struct {
	// Opened is the envelope that was opened: the hash and header of
	// its encrypt call.
	Opened *Info
	// Decrypt is the answer of the decrypt call that opened it: the
	// ring, the key and the verified Asset.
	Decrypt *kms.DecryptResult
	// Encrypt is the answer of the new envelope's encrypt call: the
	// ring's active key, the new hash and header, and the Asset.
	Encrypt *kms.EncryptResult
	// Size is the size of the plaintext, in bytes.
	Size int64
}

// Rewrap seals the plaintext of the envelope read from src into a new
// envelope on dst under the ring's active key: what a rotation, or a key
// that leaked, asks of the data sealed under an older key.
//
// It opens the envelope as NewReader does (a decrypt call, which checks
// the hash, the header, the key's state and the Asset, and is recorded)
// and seals as NewWriter does, with a new encrypt call on the ring that
// opened it; then it copies the plaintext from one to the other a chunk
// at a time, so memory stays at two chunks whatever the size. The new
// envelope has its own hash, header and salt, and is sealed with the
// same associated data. When the old header signs an Asset, the encrypt
// call updates that Asset without changing its data or parents: the new
// header signs the same Asset (its ID, lineage and data stay), the
// Asset is found by the new key's ID too (kms.AssetFilter.KeyID), and
// the old envelope still opens until its key is disabled. That update
// needs the encrypt flag of the ring the Asset was created through, or
// assets.write; without it the encrypt call is refused.
//
// The new envelope's last chunk is written only once the old one's end
// was read and authenticated. So on an error (a chunk of src that fails
// authentication, a stream cut off, a refused call, a failed write) dst
// holds an incomplete envelope that does not open, or nothing; the
// encrypt call, if made, has still issued its hash. What fails before
// the envelope's first chunk is authenticated (a decrypt that the service
// refuses, other associated data) fails before the encrypt call.
func (s *Sealer) Rewrap(ctx context.Context, dst io.Writer, src io.Reader, in RewrapInput) (*RewrapResult, error) {
	r, err := s.NewReader(ctx, src, in.AssociatedData)
	if err != nil {
		return nil, err
	}
	// The first chunk is opened before the encrypt call, so that other
	// associated data or a first chunk altered costs no hash.
	if r.err = r.next(); r.err != nil {
		return nil, r.err
	}
	seal := SealInput{RingName: r.res.RingName, AssociatedData: in.AssociatedData}
	if id := r.res.Asset.ID; id != "" {
		// An update with no data nor parents keeps both, and so the
		// digest the old header signs.
		seal.Asset = &kms.AssetInput{AssetID: id}
	}
	res, prelude, st, err := s.begin(ctx, seal)
	if err != nil {
		return nil, err
	}
	if res.RingID != r.res.RingID {
		// The ring was deleted between the two calls, and another one
		// made under its name: its keys are not the envelope's ring's.
		return nil, fmt.Errorf("envelope: ring %s is no longer the ring %s that opened the envelope: not rewrapped", seal.RingName, r.res.RingID)
	}
	w, err := newWriter(dst, res, prelude, st)
	if err != nil {
		return nil, err
	}
	n, err := io.Copy(w, r)
	if err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return &RewrapResult{Opened: r.info, Decrypt: r.res, Encrypt: res, Size: n}, nil
}
