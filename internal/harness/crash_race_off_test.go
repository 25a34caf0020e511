//go:build !race

package harness

// crashRace: see crash_race_on_test.go.
const crashRace = false
