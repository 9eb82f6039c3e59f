package client

// ActivityFilter selects activity records in SearchActivity: the body of
// POST /auth/search/activity (SPEC.md 4.5). Every field set must match;
// the zero value matches every record the caller may see.
type ActivityFilter struct {
	AccountUID string         `json:"accountUid,omitempty"` // the Account, by UID
	AccountID  string         `json:"accountId,omitempty"`  // the Account, by ID
	Action     string         `json:"action,omitempty"`     // e.g. encrypt, keyring.rotate
	Ring       string         `json:"ring,omitempty"`       // key ring name
	Start      *int64         `json:"start,omitempty"`      // createdAt >= start, epoch milliseconds UTC
	End        *int64         `json:"end,omitempty"`        // createdAt <= end, epoch milliseconds UTC
	KeyID      string         `json:"keyid,omitempty"`      // the API key (or User) that acted
	Valid      *bool          `json:"valid,omitempty"`      // granted (true) or denied (false)
	Props      map[string]any `json:"props,omitempty"`      // records whose props hold any of these members
}
