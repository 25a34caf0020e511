//go:build race

package store

// raceDetector: the race detector slows the pure-Go SQLite some fifty
// times; the larger tests shrink under it.
const raceDetector = true
