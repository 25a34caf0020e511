//go:build unix

package db

import (
	"errors"
	"os"
	"syscall"
)

// errLocked: the lock is held by another open file description.
var errLocked = errors.New("locked")

// flock takes an exclusive lock on f without waiting.
func flock(f *os.File) error {
	err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return errLocked
	}
	return err
}

func unflock(f *os.File) { syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }
