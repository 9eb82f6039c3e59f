package kms

import (
	"context"
	"encoding/json"
	"strings"
	"time"
)

// Account is a tenant: API keys and Users belong to one.
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

// AccountUpdate changes an Account; nil fields are left as they are.
type AccountUpdate struct {
	UID   *string        `json:"uid"`
	Notes *string        `json:"notes"`
	Props map[string]any `json:"props"` // replaces the props when set
}

// AccountRef names an Account: by ID, or by UID when ByUID.
type AccountRef struct {
	Value string
	ByUID bool
}

// maxUIDLen bounds an Account UID.
const maxUIDLen = 200

func validUID(uid string) error {
	if strings.TrimSpace(uid) == "" {
		return Errorf(KindInvalid, "uid is required")
	}
	if len(uid) > maxUIDLen {
		return Errorf(KindInvalid, "uid must have at most %d characters", maxUIDLen)
	}
	return nil
}

// CreateAccount creates an Account. It needs accounts.write and, since a
// new Account is another tenant, accounts.all.
func (s *Service) CreateAccount(ctx context.Context, in AccountInput) (*Account, error) {
	p, err := s.authorizeAll(ctx, "account.create", FlagAccountsWrite, FlagAllAccounts)
	if err != nil {
		return nil, err
	}
	if err := validUID(in.UID); err != nil {
		return nil, s.recordFailure(p, "account.create", "", err)
	}
	if err := checkProps("props", in.Props); err != nil {
		return nil, s.recordFailure(p, "account.create", "", err)
	}
	now := s.now().UTC()
	a := &Account{ID: newID(now), UID: in.UID, Notes: in.Notes, Props: cloneMap(in.Props), CreatedAt: now, UpdatedAt: now}
	act := s.newActivity(p, "account.create", "", true, map[string]any{"accountId": a.ID})
	err = s.submit(act, func(tx Txn) error {
		if err := adjustCount(tx, countAccounts, 1, s.opts.Limits.MaxAccounts, "accounts"); err != nil {
			return err
		}
		return putAccount(tx, a, "")
	}, nil)
	if err != nil {
		return nil, err
	}
	return a, nil
}

// authorizeAll is authorize for an operation that needs every one of flags.
func (s *Service) authorizeAll(ctx context.Context, action string, flags ...string) (*Principal, error) {
	var p *Principal
	for _, f := range flags {
		var err error
		if p, err = s.authorize(ctx, action, "", f); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// putAccount writes a, keeping its uid unique; oldUID is the uid a had
// before (empty for a new Account).
func putAccount(tx Txn, a *Account, oldUID string) error {
	if a.UID != oldUID {
		uidKey := join(pfxAccountUI, []byte(a.UID))
		if _, err := tx.Get(uidKey); err == nil {
			return &Error{Kind: KindConflict, Message: "an account with uid " + quote(a.UID) + " already exists",
				Fields: map[string]string{"uid": "already taken"}}
		} else if !isNotFound(err) {
			return err
		}
		if oldUID != "" {
			if err := tx.Delete(join(pfxAccountUI, []byte(oldUID))); err != nil {
				return err
			}
		}
		if err := tx.Set(uidKey, []byte(a.ID)); err != nil {
			return err
		}
	}
	v, err := json.Marshal(a)
	if err != nil {
		return err
	}
	return tx.Set(join(pfxAccount, []byte(a.ID)), v)
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
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
	var a Account
	if _, err := getJSON(tx, join(pfxAccount, []byte(id)), &a, errAccountNotFound); err != nil {
		return nil, err
	}
	return &a, nil
}

// visibleAccount reads an Account the caller may see: its own, or any with
// accounts.all. Others are NotFound.
func visibleAccount(tx Txn, p *Principal, ref AccountRef) (*Account, error) {
	if ref.Value == "" {
		return nil, Errorf(KindInvalid, "account id is required")
	}
	a, err := getAccount(tx, ref.Value, ref.ByUID)
	if err != nil {
		return nil, err
	}
	if !visibleTo(p, a.ID) {
		return nil, Errorf(KindNotFound, "account not found")
	}
	return a, nil
}

// GetAccount returns an Account. It needs accounts.read; without
// accounts.all only the caller's own Account is found.
func (s *Service) GetAccount(ctx context.Context, ref AccountRef) (*Account, error) {
	p, err := s.authorize(ctx, "account.read", "", FlagAccountsRead)
	if err != nil {
		return nil, err
	}
	return audited(s, ctx, p, "account.read", "", func(tx Txn) (*Account, map[string]any, error) {
		a, err := visibleAccount(tx, p, ref)
		if err != nil {
			return nil, nil, err
		}
		return a, map[string]any{"accountId": a.ID}, nil
	})
}

// ListAccounts pages through the Accounts, oldest first. It needs
// accounts.read; without accounts.all the list holds the caller's own
// Account only.
func (s *Service) ListAccounts(ctx context.Context, req PageRequest) (*List[*Account], error) {
	p, err := s.authorize(ctx, "account.list", "", FlagAccountsRead)
	if err != nil {
		return nil, err
	}
	ps := pageScan{Scope: "accounts", Prefix: pfxAccount}
	if !p.Can(FlagAllAccounts) {
		ps.Prefix = join(pfxAccount, []byte(p.AccountID))
		ps.Scope = "accounts/" + p.AccountID
	}
	return audited(s, ctx, p, "account.list", "", func(tx Txn) (*List[*Account], map[string]any, error) {
		out := &List[*Account]{Data: []*Account{}}
		ps.Emit = func(_, v []byte) error {
			var a Account
			if err := json.Unmarshal(v, &a); err != nil {
				return err
			}
			out.Data = append(out.Data, &a)
			return nil
		}
		var err error
		out.Pagination, err = s.pager.scan(ctx, tx, req, ps)
		return out, map[string]any{"count": out.Pagination.Count}, err
	})
}

// checkAccountReach applies the reach rule (checkFlagReach) to an Account:
// p covers it when it holds every flag that the Account's API keys and
// Users grant. It reads them in the write's transaction, so that a
// credential added meanwhile counts, and its cost grows with them; a
// caller with "*" holds every flag and reads none.
func checkAccountReach(tx Txn, p *Principal, a *Account) error {
	if p.Can(FlagRoot) {
		return nil
	}
	what := "account " + a.UID
	keys := join(pfxAPIAccount, []byte(a.ID), sep)
	err := tx.Scan(ScanOptions{Prefix: keys, KeysOnly: true}, func(k, _ []byte) (bool, error) {
		ak, err := getAPIKey(tx, string(k[len(keys):]))
		if isNotFound(err) {
			return true, nil
		} else if err != nil {
			return false, err
		}
		return true, checkFlagReach(p, what, "its API key "+ak.KeyID, ak.Flags)
	})
	if err != nil {
		return err
	}
	return tx.Scan(ScanOptions{Prefix: join(pfxUserAccount, []byte(a.ID), sep)}, func(_, id []byte) (bool, error) {
		u, err := getUser(tx, string(id))
		if isNotFound(err) {
			return true, nil
		} else if err != nil {
			return false, err
		}
		return true, checkFlagReach(p, what, "its user "+u.Username, u.Flags)
	})
}

// UpdateAccount changes an Account. It needs accounts.write and the reach
// rule: the caller must hold every flag that the Account's API keys and
// Users grant (checkAccountReach). Without accounts.all only the caller's
// own Account.
func (s *Service) UpdateAccount(ctx context.Context, ref AccountRef, in AccountUpdate) (*Account, error) {
	p, err := s.authorize(ctx, "account.update", "", FlagAccountsWrite)
	if err != nil {
		return nil, err
	}
	if in.UID != nil {
		if err := validUID(*in.UID); err != nil {
			return nil, s.recordFailure(p, "account.update", "", err)
		}
	}
	if err := checkProps("props", in.Props); err != nil {
		return nil, s.recordFailure(p, "account.update", "", err)
	}
	return s.changeAccount(p, "account.update", ref, func(tx Txn, a *Account) error {
		if err := checkAccountReach(tx, p, a); err != nil {
			return err
		}
		old := a.UID
		if in.UID != nil {
			a.UID = *in.UID
		}
		if in.Notes != nil {
			a.Notes = *in.Notes
		}
		if in.Props != nil {
			a.Props = cloneMap(in.Props)
		}
		a.UpdatedAt = s.now().UTC()
		return putAccount(tx, a, old)
	}, nil)
}

// changeAccount runs change, as p's action, over the Account that ref
// names as tx has it (visible to p), and answers the Account as change
// left it; after runs once the change is durable.
func (s *Service) changeAccount(p *Principal, action string, ref AccountRef, change func(tx Txn, a *Account) error, after func()) (*Account, error) {
	var out *Account
	act := s.newActivity(p, action, "", true, map[string]any{"account": ref.Value})
	err := s.submit(act, func(tx Txn) error {
		a, err := visibleAccount(tx, p, ref)
		if err != nil {
			return err
		}
		out = a
		return change(tx, a)
	}, after)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteAccount deletes an Account and answers it as it was. An Account
// that still has API keys or Users cannot be deleted (Conflict): nothing is
// removed in bulk by accident, and the reach rule holds of itself, since an
// empty Account holds no flag. It needs accounts.write and accounts.all,
// and a caller cannot delete the Account it acts for.
func (s *Service) DeleteAccount(ctx context.Context, ref AccountRef) (*Account, error) {
	p, err := s.authorizeAll(ctx, "account.delete", FlagAccountsWrite, FlagAllAccounts)
	if err != nil {
		return nil, err
	}
	return s.changeAccount(p, "account.delete", ref, func(tx Txn, a *Account) error {
		if a.ID == p.AccountID {
			return Errorf(KindConflict, "cannot delete the account of the credential in use")
		}
		for _, owned := range []struct {
			prefix []byte
			what   string
		}{
			{join(pfxAPIAccount, []byte(a.ID), sep), "API keys"},
			{join(pfxUserAccount, []byte(a.ID), sep), "users"},
		} {
			any := false
			err := tx.Scan(ScanOptions{Prefix: owned.prefix, KeysOnly: true}, func(_, _ []byte) (bool, error) {
				any = true
				return false, nil
			})
			if err != nil {
				return err
			}
			if any {
				return Errorf(KindConflict, "account %s still has %s: delete them first", a.UID, owned.what)
			}
		}
		if err := tx.Delete(join(pfxAccount, []byte(a.ID))); err != nil {
			return err
		}
		if err := tx.Delete(join(pfxAccountUI, []byte(a.UID))); err != nil {
			return err
		}
		return adjustCount(tx, countAccounts, -1, 0, "accounts")
	}, func() { s.principals.Reset() })
}
