package client

import "github.com/ringkms/kms"

// ActivityFilter selects activity records in SearchActivity: the body of
// POST /auth/search/activity (SPEC.md 4.5). It is kms.ActivityFilter.
type ActivityFilter = kms.ActivityFilter
