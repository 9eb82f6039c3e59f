package kms

import (
	"context"

	"github.com/ringkms/kms/internal/barrier"
)

// The rules of a rekey: who may rekey (an operator, with the store's
// master key and a new one, or a Service given both), and what is
// recorded of it. The mechanism, the new root secret, the resealing of
// every sealed secret and the record of the keys the store has left, is
// internal/barrier's; the domain tells it which records hold sealed
// secrets (sealedRecords).

// sealedRecords are the records that hold sealed secrets, which a rekey
// reseals, in the order of RekeyResult's counts: the header signing keys,
// the private keys of /asym rings, the share secrets of split /ks rings
// the Users' password hashes and the secrets of API keys.
var sealedRecords = []barrier.Sealed{
	{Prefix: pfxSigning, What: func(id string) string { return "signing key " + id }},
	{Prefix: pfxRing, Field: "sealedPrivate", AAD: ringPrivateAAD, What: func(id string) string { return "the private key of ring " + id }},
	{Prefix: pfxRing, Field: "sealedShareSecret", AAD: ringShareAAD, What: func(id string) string { return "the share secret of ring " + id }},
	{Prefix: pfxUser, Field: "password", AAD: passwordAAD, What: func(id string) string { return "the password of user " + id }},
	{Prefix: pfxAPIKey, Field: "sealedSecret", AAD: apiKeySecretAAD, What: func(id string) string { return "the secret of API key " + id }},
}

// RekeyResult says what Rekey moved to the new master key.
type RekeyResult struct {
	SigningKeys int // header signing keys
	AsymRings   int // private keys of /asym rings
	SplitRings  int // share secrets of /ks rings with split data keys
	Users       int // password hashes
	APIKeys     int // secrets of API keys, which verify signed requests
}

// rekeyResult is the RekeyResult of the barrier's counts, by row of
// sealedRecords.
func rekeyResult(counts []int) *RekeyResult {
	if counts == nil {
		return nil
	}
	return &RekeyResult{SigningKeys: counts[0], AsymRings: counts[1], SplitRings: counts[2], Users: counts[3], APIKeys: counts[4]}
}

// Rekey moves st from the root key old to the root key new: it draws a
// new root secret, reseals under it every secret that st holds sealed
// (the header signing keys, the private keys of /asym rings, the share
// secrets of split /ks rings, the Users' password hashes, the API keys'
// secrets that verify signed requests) with the MAC
// and cursor keys that st has under old, so that every hash, header,
// cursor and activity record issued before stays valid, stores the new
// root secret sealed under new, and adds old to the keys st has left
// (internal/barrier), in one transaction. Then it records the rotation
// (action masterkey.rotate, by "operator"). Afterwards old opens no
// secret of st: neither the root secret nor any secret sealed under the
// old one. A new key that st is already under, or one that st has left,
// is refused with an error of kind Invalid, st unchanged: so a second
// run of the same rekey changes nothing. The MAC and cursor keys stay
// those of st's first root secret (docs/OPERATIONS.md section 2). Either
// key may be a MasterKey or any other RootKey (a PKCS#11 token's), so
// Rekey also moves a store between the two. Services may run on st
// meanwhile (the nodes of a cluster, beside which kmsd rekey runs): those
// given new as their MasterKey or NextMasterKey follow the rekey without
// a failed call (internal/barrier), the others stop writing. A store too
// large for one transaction is refused with an error of kind TooLarge,
// unchanged.
//
// Earlier versions of the values that a store's files may keep (an LSM
// tree's older tables) are erased when the store is an Eraser.
func Rekey(ctx context.Context, st Store, old, new RootKey) (*RekeyResult, error) {
	if err := barrierOf(st, nil).CheckRekey(ctx, old, new); err != nil {
		return nil, err
	}
	// A Service of its own does it, so that the other processes on a
	// shared store hear of it as of any change.
	svc, err := New(st, Options{MasterKey: old, NextMasterKey: new})
	if err != nil {
		return nil, err
	}
	res, err := svc.Rekey(ctx)
	if cerr := svc.Close(); err == nil {
		err = cerr
	}
	return res, err
}

// Rekey rekeys the Service's own store, while it serves, from its master
// key (Options.MasterKey) to its next one (Options.NextMasterKey): as
// Rekey does, with the journal held between two batches meanwhile, and
// the Service going on under the new root secret at once. It never goes
// the other way: a store already under the next key (rekeyed before),
// and a next key that the store has left, are refused with an error of
// kind Invalid, the store unchanged. kmsd runs it for kmsd rekey on an
// embedded store, through its admin socket. A Service given no second
// key cannot rekey itself: an error of kind Invalid.
func (s *Service) Rekey(ctx context.Context) (*RekeyResult, error) {
	if !s.barrier.CanRekey() {
		return nil, Errorf(KindInvalid, "rekey: this process was given no next master key to rekey to")
	}
	_, resume, err := s.journal.Quiesce()
	if err != nil {
		return nil, err
	}
	counts, err := s.barrier.Rekey(ctx)
	resume()
	res := rekeyResult(counts)
	if err != nil {
		return res, err
	}
	return res, s.recordRekey(res)
}

// recordRekey records a rekey (action masterkey.rotate, by "operator").
func (s *Service) recordRekey(res *RekeyResult) error {
	op := &Principal{Kind: PrincipalAPIKey, ID: "operator", flags: Flags{FlagRoot: true}}
	return s.record(op, "masterkey.rotate", "", map[string]any{"signingKeys": res.SigningKeys, "asymRings": res.AsymRings, "splitRings": res.SplitRings, "users": res.Users, "apiKeys": res.APIKeys}, nil)
}
