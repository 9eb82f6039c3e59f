//go:build !linux

package main

import "github.com/rs/zerolog"

// mlockall does nothing outside Linux, where kmsd does not lock its
// memory; see mlock_linux.go.
func mlockall(log *zerolog.Logger) {
	log.Info().Msg("memory not locked: kmsd locks memory on Linux only")
}
