package kms

import (
	"context"
	"strings"

	"github.com/ringkms/kms/internal/keytype"
)

// Local callers. A program on the service's own host may prove who it
// is by where it connects from: a Unix socket that only it can open, as
// the Kubernetes API server opens kmsd's KMS plugin socket. Such a
// caller presents no credential, so what it may do is fixed here, not by
// flags someone grants: it uses one held key, to encrypt and decrypt
// with it and to read its state, and nothing else. Its calls are
// recorded under its own name, with the key and the version each used,
// as every call on a held key is, and counted in the metrics as any
// other. The rate limits, which protocols apply at their edge to
// credentials and client addresses, do not apply to it: it has neither,
// and one program on the host that calls for data keys is not a caller
// to slow down.

// localCallerFlags are the operations of a local caller on its key.
var localCallerFlags = []string{OpRead, OpEncrypt, OpDecrypt}

// LocalCaller returns the principal of the local caller name (its
// records' actor; 1 to 64 characters of a-z, 0-9, '-', '_' and '.') for
// the use of the held key key. The key is made when missing: an
// aes256-gcm96 key, never exportable, recorded (transit.key.create) as
// made by the service itself ("system"). A key of that name must be one
// fit for a caller that hands it data keys: a key of another type, an
// exportable key (whose versions can be read out, and with them every
// data key it sealed) or an /asym ring whose keys were handed out is
// refused (Invalid), and nothing is made.
func (s *Service) LocalCaller(ctx context.Context, name, key string) (*Principal, error) {
	if name == "" || len(name) > 64 || strings.Trim(name, "abcdefghijklmnopqrstuvwxyz0123456789-_.") != "" {
		return nil, Errorf(KindInvalid, "local caller name %q: want 1 to 64 characters of a-z, 0-9, '-', '_' and '.'", name)
	}
	if err := ValidateRingName(key); err != nil {
		return nil, err
	}
	p := &Principal{Kind: PrincipalLocal, ID: name, flags: Flags{}}
	for _, op := range localCallerFlags {
		p.flags[RingFlag(key, op)] = true
	}
	if err := s.inRootAccount(ctx, p, "created for "+name); err != nil {
		return nil, err
	}
	r, err := s.ringByName(ctx, groupAsym, key)
	if isNotFound(err) {
		r, err = s.createHeldRing(ctx, systemPrincipal, key, 0, &heldSettings{})
	}
	if err != nil {
		return nil, err
	}
	if !r.keysHeld() {
		return nil, errHandedOut(r)
	}
	spec, err := r.keySpec()
	if err != nil {
		return nil, internalError("type of a held key", err)
	}
	switch {
	case spec.Type() != keytype.AES256GCM96:
		return nil, Errorf(KindInvalid, "key %q is of type %s: %s needs an aes256-gcm96 key; name another key, or delete this one", key, spec.Type(), name)
	case r.held().Exportable:
		return nil, Errorf(KindInvalid, "key %q is exportable: whoever may export it could read every data key it seals for %s; name a key that is not exportable", key, name)
	}
	return p, nil
}
