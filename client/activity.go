package client

import "github.com/ringkms/kms"

// ActivityFilter selects activity records in SearchActivity: the body of
// POST /auth/search/activity (docs/API.md, "Users, Accounts, API keys, activity"). It is kms.ActivityFilter.
type ActivityFilter = kms.ActivityFilter
