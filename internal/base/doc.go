// Package base is the vocabulary that the domain package kms shares with
// its mechanisms: the error type with its kinds and sentinels, and the
// storage contract (Store, Txn, Trail and the optional interfaces a
// backend may add). It imports only the standard library, so every
// package of the module can use it; package kms re-exports each name with
// a type alias or a constant, so kms.Error, kms.Store and the others are
// these very types.
package base
