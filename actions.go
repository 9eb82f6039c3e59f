package kms

import (
	"slices"
	"strings"
)

// Operations on key rings, the last segment of keyring.<ring>.<op> flags.
const (
	OpCreate  = "create"  // create the ring
	OpRead    = "read"    // read the ring, its keys' list, a key, its configuration; list rings (keyring.*.read); look up hashes and headers
	OpEncrypt = "encrypt" // POST /ks/encrypt
	OpDecrypt = "decrypt" // POST /ks/decrypt
	OpRotate  = "rotate"  // rotate the ring
	OpConfig  = "config"  // change the ring's configuration
	OpDelete  = "delete"  // delete the ring
	OpKeys    = "keys"    // enable, disable and destroy the ring's keys
	// OpExport hands out the keys of an exportable key that the service
	// holds (a held key): no other operation does, and only a flag
	// naming it grants it (Flags.Allows), "*" aside.
	OpExport = "export"
	// OpSign, OpVerify and OpHMAC sign with a held key, verify a
	// signature or an HMAC of one, and compute an HMAC with one.
	OpSign   = "sign"
	OpVerify = "verify"
	OpHMAC   = "hmac"
)

// RingFlag returns the flag that grants op on the ring named ring.
func RingFlag(ring, op string) string {
	return "keyring." + strings.ToLower(ring) + "." + op
}

// The actions of held keys' calls. They keep the names they had when
// Vault's transit engine was the one protocol mapped onto held keys.
const (
	transitCreateAction  = "transit.key.create"
	transitReadAction    = "transit.key.read"
	transitListAction    = "transit.key.list"
	transitDeleteAction  = "transit.key.delete"
	transitRotateAction  = "transit.key.rotate"
	transitConfigAction  = "transit.key.config"
	transitEncryptAction = "transit.encrypt"
	transitDecryptAction = "transit.decrypt"
	transitRewrapAction  = "transit.rewrap"
	transitDataKeyAction = "transit.datakey"
	heldSignAction       = "transit.sign"
	heldVerifyAction     = "transit.verify"
	heldHMACAction       = "transit.hmac"
	transitExportAction  = "transit.key.export" // ExportHeldKey
	asymExportAction     = "asym.key.export"    // ExportAsymKey

	// The state of a held key as a whole (heldkeys_state.go), its tags
	// (heldkeys_tags.go) and its aliases (heldkeys_alias.go).
	transitDisableAction        = "transit.key.disable"
	transitEnableAction         = "transit.key.enable"
	transitDeleteScheduleAction = "transit.key.delete.schedule"
	transitDeleteCancelAction   = "transit.key.delete.cancel"
	transitTagAction            = "transit.key.tag"
	transitUntagAction          = "transit.key.untag"
	aliasCreateAction           = "transit.alias.create"
	aliasUpdateAction           = "transit.alias.update"
	aliasDeleteAction           = "transit.alias.delete"
	aliasListAction             = "transit.alias.list"
)

// apiKeyLoginAction is the action of LoginAPIKey. validateAction is the
// action of every record of a validation (ValidateAPIKey), and its prop
// via: the record is the service's account of a check, and what the
// caller reports with it (the action, the props) is a claim that no
// index takes for the operation itself.
const (
	apiKeyLoginAction = "apikey.login"
	validateAction    = "validate"
)

// randomAction is the action of GenerateRandom.
const randomAction = "random.generate"

// actions are the actions the Service records of its own, sorted: every
// action of the trail but those that callers of ValidateAPIKey report.
// TestActions keeps the list in step with the code that records them and
// with docs/PERMISSIONS.md.
var actions = []string{
	"account.create",
	"account.delete",
	"account.list",
	"account.read",
	"account.update",
	"activity.read",
	"activity.search",
	"apikey.create",
	"apikey.delete",
	"apikey.list",
	"apikey.login",
	"apikey.read",
	"apikey.search",
	"apikey.update",
	"apikey.validate",
	"asset.delete",
	"asset.lineage",
	"asset.read",
	"asset.search",
	"asym.key.destroy",
	"asym.key.destroy.cancel",
	"asym.key.destroy.schedule",
	"asym.key.export",
	"asym.key.read",
	"asym.key.state",
	"asym.key.usage",
	"asym.keyring.config.read",
	"asym.keyring.config.write",
	"asym.keyring.create",
	"asym.keyring.rotate",
	"asym.keyring.rotate.auto",
	"asym.keyring.rotate.period",
	"backup",
	"bootstrap",
	"decrypt",
	"encrypt",
	"hash.lookup",
	"header.lookup",
	"key.destroy",
	"key.destroy.cancel",
	"key.destroy.schedule",
	"key.hashes",
	"key.list",
	"key.read",
	"key.state",
	"key.usage",
	"keyring.config.read",
	"keyring.config.write",
	"keyring.create",
	"keyring.delete",
	"keyring.list",
	"keyring.read",
	"keyring.rotate",
	"keyring.rotate.auto",
	"keyring.rotate.period",
	"masterkey.rotate",
	"random.generate",
	"ratelimit",
	"signingkey.rotate",
	"transit.alias.create",
	"transit.alias.delete",
	"transit.alias.list",
	"transit.alias.update",
	"transit.datakey",
	"transit.decrypt",
	"transit.encrypt",
	"transit.hmac",
	"transit.key.config",
	"transit.key.create",
	"transit.key.delete",
	"transit.key.delete.cancel",
	"transit.key.delete.schedule",
	"transit.key.disable",
	"transit.key.enable",
	"transit.key.export",
	"transit.key.list",
	"transit.key.read",
	"transit.key.rotate",
	"transit.key.tag",
	"transit.key.untag",
	"transit.rewrap",
	"transit.sign",
	"transit.verify",
	"user.create",
	"user.delete",
	"user.invite",
	"user.invite.complete",
	"user.invite.mail",
	"user.invite.validate",
	"user.list",
	"user.login",
	"user.logout",
	"user.read",
	"user.refresh",
	"user.reset.complete",
	"user.reset.issue",
	"user.reset.mail",
	"user.reset.start",
	"user.reset.validate",
	"user.update",
	"user.update.mail",
	"validate",
}

// Actions returns the actions that the Service records of its own, sorted.
// The trail may hold others: a record of ValidateAPIKey carries the
// action its caller reports (unless the caller reports none: "validate").
// The list is closed and changes only with the code; a metrics system
// labels by it, and counts any other action under one label (package
// metrics: "other"), so that callers cannot add series.
func Actions() []string { return slices.Clone(actions) }

// IsAction reports whether action is one of Actions.
func IsAction(action string) bool {
	_, ok := slices.BinarySearch(actions, action)
	return ok
}
