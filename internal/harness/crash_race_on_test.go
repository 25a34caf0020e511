//go:build race

package harness

// crashRace: the race detector slows warden (and its pure-Go SQLite) many
// times over; the crash suites act more slowly under it, so that warden
// keeps up as it does in a plain build.
const crashRace = true
