package kms

import (
	"context"
	"encoding/json"
	"time"
)

// Account is a tenant: API keys belong to one.
type Account struct {
	ID        string         `json:"id"`
	UID       string         `json:"uid"`
	Notes     string         `json:"notes"`
	Props     map[string]any `json:"props"`
	CreatedAt time.Time      `json:"createdAt"`
	UpdatedAt time.Time      `json:"updatedAt"`
}

// AccountInput creates an Account.
type AccountInput struct {
	UID   string         `json:"uid"`
	Notes string         `json:"notes"`
	Props map[string]any `json:"props"`
}

// CreateAccount creates an Account. It needs the flag accounts.write.
func (s *Service) CreateAccount(ctx context.Context, in AccountInput) (*Account, error) {
	p, err := s.authorize(ctx, "account.create", "", FlagAccountsWrite)
	if err != nil {
		return nil, err
	}
	if in.UID == "" {
		return nil, Errorf(KindInvalid, "uid is required")
	}
	now := s.now()
	a := &Account{ID: newID(now), UID: in.UID, Notes: in.Notes, Props: orEmpty(in.Props), CreatedAt: now, UpdatedAt: now}
	act := s.newActivity(p, "account.create", "", true, map[string]any{"accountId": a.ID})
	err = s.journal.submit(act, func(tx Txn) error { return putAccount(tx, a) }, nil)
	if err != nil {
		return nil, err
	}
	return a, nil
}

func putAccount(tx Txn, a *Account) error {
	uidKey := join(pfxAccountUI, []byte(a.UID))
	if _, err := tx.Get(uidKey); err == nil {
		return Errorf(KindConflict, "an account with uid %q already exists", a.UID)
	} else if !isNotFound(err) {
		return err
	}
	v, err := json.Marshal(a)
	if err != nil {
		return err
	}
	if err := tx.Set(join(pfxAccount, []byte(a.ID)), v); err != nil {
		return err
	}
	return tx.Set(uidKey, []byte(a.ID))
}

func getAccount(tx Txn, id string, byUID bool) (*Account, error) {
	if byUID {
		v, err := tx.Get(join(pfxAccountUI, []byte(id)))
		if isNotFound(err) {
			return nil, Errorf(KindNotFound, "account not found")
		} else if err != nil {
			return nil, err
		}
		id = string(v)
	}
	v, err := tx.Get(join(pfxAccount, []byte(id)))
	if isNotFound(err) {
		return nil, Errorf(KindNotFound, "account not found")
	} else if err != nil {
		return nil, err
	}
	var a Account
	if err := json.Unmarshal(v, &a); err != nil {
		return nil, err
	}
	return &a, nil
}
