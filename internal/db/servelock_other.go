//go:build !unix

package db

import (
	"errors"
	"os"
)

// errLocked: the lock is held by another open file description.
var errLocked = errors.New("locked")

// flock is not available here: the one-serve lock is not taken (warden's
// supported platforms are Unix).
func flock(*os.File) error { return nil }

func unflock(*os.File) {}
