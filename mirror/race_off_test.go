//go:build !race

package mirror

// raceDetector: see race_on_test.go.
const raceDetector = false
