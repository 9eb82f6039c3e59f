package awskms

import (
	"fmt"
	"slices"
	"time"

	"github.com/ringkms/kms"
)

// day is the unit of AWS's rotation periods.
const day = 24 * time.Hour

// keyIDRequest names a key, and for EnableKeyRotation a period.
type keyIDRequest struct {
	KeyId                string
	RotationPeriodInDays int
}

// keyID decodes a request that names a key (a keyIDRequest) and
// answers it and the key's name.
func (c *call) keyID() (*keyIDRequest, string, error) {
	var in keyIDRequest
	name, err := c.named(&in, &in.KeyId)
	return &in, name, err
}

// held decodes a request that names a key and answers it and the key as
// the service describes it.
func (a *api) held(c *call) (*keyIDRequest, *kms.HeldKey, error) {
	in, name, err := c.keyID()
	if err != nil {
		return nil, nil, err
	}
	k, err := a.svc.GetHeldKey(c.r.Context(), name)
	return in, k, err
}

// rotatable is held for a key whose rotation AWS allows: a symmetric
// key (HMAC and asymmetric keys do not rotate there).
func (a *api) rotatable(c *call) (*keyIDRequest, *kms.HeldKey, error) {
	in, k, err := a.held(c)
	if err != nil {
		return nil, nil, err
	}
	return in, k, symmetric(k)
}

// symmetric refuses a key that is not a symmetric one: only those rotate
// in AWS KMS.
func symmetric(k *kms.HeldKey) error {
	if spec, _ := specOf(k); spec != "SYMMETRIC_DEFAULT" {
		return fail("UnsupportedOperationException", fmt.Sprintf("key %s is a %s key: only SYMMETRIC_DEFAULT keys rotate", k.Name, spec))
	}
	return nil
}

// setRotation is EnableKeyRotation, or with enable false
// DisableKeyRotation.
func setRotation(enable bool) operation {
	return func(a *api, c *call) (any, error) {
		in, k, err := a.rotatable(c)
		if err != nil {
			return nil, err
		}
		var period time.Duration
		if enable {
			days := in.RotationPeriodInDays
			if days == 0 {
				days = 365
			}
			if days < 90 || days > 2560 {
				return nil, fail("ValidationException", fmt.Sprintf("RotationPeriodInDays must be 90 to 2560, not %d", days))
			}
			period = time.Duration(days) * day
		}
		_, err = a.svc.ConfigureHeldKey(c.r.Context(), k.Name, kms.HeldKeyConfig{RotationPeriod: &period})
		return struct{}{}, err
	}
}

func getKeyRotationStatus(a *api, c *call) (any, error) {
	_, k, err := a.rotatable(c)
	if err != nil {
		return nil, err
	}
	out := map[string]any{"KeyId": arn(c.region, k.Name), "KeyRotationEnabled": k.RotationPeriod > 0}
	if k.RotationPeriod > 0 {
		out["RotationPeriodInDays"] = int(k.RotationPeriod / day)
		if t, ok := k.Versions[k.LatestVersion]; ok {
			out["NextRotationDate"] = epoch(t.Add(k.RotationPeriod))
		}
	}
	return out, nil
}

func rotateKeyOnDemand(a *api, c *call) (any, error) {
	_, k, err := a.rotatable(c)
	if err != nil {
		return nil, err
	}
	if _, err := a.svc.RotateHeldKey(c.r.Context(), k.Name); err != nil {
		return nil, err
	}
	return map[string]any{"KeyId": arn(c.region, k.Name)}, nil
}

func listKeyRotations(a *api, c *call) (any, error) {
	_, k, err := a.rotatable(c)
	if err != nil {
		return nil, err
	}
	type rotation struct {
		KeyId        string
		RotationDate float64
	}
	versions := make([]int, 0, len(k.Versions))
	for v := range k.Versions {
		if v > 1 {
			versions = append(versions, v)
		}
	}
	slices.Sort(versions)
	out := make([]rotation, 0, len(versions))
	for _, v := range versions {
		out = append(out, rotation{arn(c.region, k.Name), epoch(k.Versions[v])})
	}
	return map[string]any{"Rotations": out, "Truncated": false}, nil
}
