package kms

import (
	"context"
	"strings"
)

func (r *ringRecord) config() *KeyRingConfig {
	return &KeyRingConfig{Props: orEmpty(r.Props), Key: ConfigKey{Props: orEmpty(r.KeyProps)}, Algos: r.Algos}
}

// GetConfig returns the configuration of a /ks ring. It needs
// keyring.<name>.read.
func (s *Service) GetConfig(ctx context.Context, ref RingRef) (*KeyRingConfig, error) {
	return s.getConfig(ctx, groupKS, ref, "keyring.config.read")
}

// GetAsymConfig is GetConfig for an /asym ring (a held key's).
func (s *Service) GetAsymConfig(ctx context.Context, ref RingRef) (*KeyRingConfig, error) {
	return s.getConfig(ctx, groupAsym, ref, "asym.keyring.config.read")
}

func (s *Service) getConfig(ctx context.Context, group string, ref RingRef, action string) (*KeyRingConfig, error) {
	if ref.Name == "" {
		return nil, Errorf(KindInvalid, "ringname is required")
	}
	p, r, err := s.resolveRing(ctx, group, ref, action, OpRead)
	if err != nil {
		return nil, err
	}
	if err := s.record(p, action, strings.ToLower(r.Name), map[string]any{"ringId": r.ID}, nil); err != nil {
		return nil, err
	}
	return r.config(), nil
}

// SetConfig replaces the configuration of a /ks ring and returns it. It
// needs keyring.<name>.config.
func (s *Service) SetConfig(ctx context.Context, ref RingRef, cfg *KeyRingConfig) (*KeyRingConfig, error) {
	return s.setConfig(ctx, groupKS, ref, cfg, "keyring.config.write")
}

// SetAsymConfig is SetConfig for an /asym ring: its maxEncryptCount and
// rotationPeriod apply to the transit calls of a held key. (A
// held key's own settings, its minimum versions and whether it may be
// deleted, are ConfigureTransitKey's.)
func (s *Service) SetAsymConfig(ctx context.Context, ref RingRef, cfg *KeyRingConfig) (*KeyRingConfig, error) {
	return s.setConfig(ctx, groupAsym, ref, cfg, "asym.keyring.config.write")
}

func (s *Service) setConfig(ctx context.Context, group string, ref RingRef, cfg *KeyRingConfig, action string) (*KeyRingConfig, error) {
	if ref.Name == "" {
		return nil, Errorf(KindInvalid, "ringname is required")
	}
	if cfg == nil {
		return nil, Errorf(KindInvalid, "config is required")
	}
	if cfg.Algos.AES256.MaxEncryptCount < 0 {
		return nil, Errorf(KindInvalid, "algos.aes256.maxEncryptCount must be 0 (no limit) or more")
	}
	period, err := CheckRotationPeriod(cfg.Algos.AES256.RotationPeriod)
	if err != nil {
		return nil, err
	}
	algos := cfg.Algos
	algos.AES256.RotationPeriod = period
	p, r, err := s.resolveRing(ctx, group, ref, action, OpConfig)
	if err != nil {
		return nil, err
	}
	lower := strings.ToLower(r.Name)
	if err := checkProps("config.props", cfg.Props); err != nil {
		return nil, s.recordFailure(p, action, lower, err)
	}
	if err := checkProps("config.key.props", cfg.Key.Props); err != nil {
		return nil, s.recordFailure(p, action, lower, err)
	}
	act := s.newActivity(p, action, lower, true, map[string]any{"ringId": r.ID, "maxEncryptCount": algos.AES256.MaxEncryptCount})
	if period != "" {
		act.Props["rotationPeriod"] = period
	}
	next, err := s.changeRing(act, r.ID, func(tx Txn, cur *ringRecord) error {
		if err := notPendingDeletion(cur); err != nil {
			return err // a held key's: its deletion is pending
		}
		cur.Props = cloneMap(cfg.Props)
		cur.KeyProps = cloneMap(cfg.Key.Props)
		changed := cur.Algos.AES256.RotationPeriod != period
		cur.Algos = algos
		if changed {
			return reschedule(tx, cur)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return next.config(), nil
}

// changeRing records act and writes the ring id as change leaves it, in
// one transaction: change gets the ring as that transaction reads it, and
// the ring's UpdatedAt is then set. It returns the ring written, which
// the cache of rings gets too, and wakes the rotation sweep when the ring
// is due a rotation by period.
func (s *Service) changeRing(act *Activity, id string, change func(tx Txn, cur *ringRecord) error) (*ringRecord, error) {
	var next *ringRecord
	err := s.submit(act, func(tx Txn) error {
		cur, err := loadRing(tx, id)
		if err != nil {
			return err
		}
		if err := change(tx, cur); err != nil {
			return err
		}
		cur.UpdatedAt = s.now().UTC()
		next = cur
		return putRing(tx, cur)
	}, func() { s.rings.Set(next.ID, next) })
	if err != nil {
		return nil, err
	}
	if next.RotateDue != 0 {
		s.rotator.Wake()
	}
	return next, nil
}
