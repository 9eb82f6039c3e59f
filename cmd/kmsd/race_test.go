//go:build race

package main

// raceEnabled builds the kmsd of the end-to-end tests with the race
// detector when the tests themselves run with it.
const raceEnabled = true
