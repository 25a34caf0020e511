package mirror

import (
	"errors"
	"fmt"
)

// PayloadError is a delivery's payload that no retry can cure: it does not
// decode, or lacks what its event must carry. The dispatcher makes such a
// delivery a dead letter at once, naming it.
type PayloadError struct{ err error }

// Error is the problem, naming the event.
func (e *PayloadError) Error() string { return e.err.Error() }

// Unwrap returns the decoding error, if any.
func (e *PayloadError) Unwrap() error { return e.err }

// payloadErr makes a PayloadError from a format and its arguments (%w
// wraps, as with fmt.Errorf).
func payloadErr(format string, args ...any) error {
	return &PayloadError{err: fmt.Errorf(format, args...)}
}

// IsPayloadError reports whether err is, or wraps, a [PayloadError].
func IsPayloadError(err error) bool {
	var p *PayloadError
	return errors.As(err, &p)
}
