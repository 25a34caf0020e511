package app

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/go-github/v66/github"
)

// RateLimitedError reports that a request was not sent, or not retried,
// because GitHub's rate limit for an installation is exhausted and the reset
// is further away than the access layer may wait ([Config.MaxWait], or the
// request context's deadline). Callers should back off until Reset.
//
// The access layer returns it from RoundTrip, so go-github callers receive it
// wrapped in a *url.Error; use [IsRateLimited] to find it.
type RateLimitedError struct {
	// Installation is the installation whose budget is exhausted;
	// AppInstallation for App (JWT) calls, UnknownInstallation when the
	// error was translated from go-github's own client-side check.
	Installation int64
	// Reset is when GitHub will accept requests again.
	Reset time.Time
	// Secondary is true for a secondary (abuse) rate limit, false for the
	// primary hourly budget.
	Secondary bool
}

// UnknownInstallation is the Installation of a [RateLimitedError] that
// [IsRateLimited] translated from a go-github rate-limit error, which does not
// say which installation it concerns.
const UnknownInstallation int64 = -1

// Error describes the limit, whose budget it is and when it resets.
func (e *RateLimitedError) Error() string {
	kind := "primary"
	if e.Secondary {
		kind = "secondary"
	}
	who := "installation " + strconv.FormatInt(e.Installation, 10)
	switch e.Installation {
	case AppInstallation:
		who = "the app (JWT)"
	case UnknownInstallation:
		who = "an unknown installation"
	}
	return fmt.Sprintf("github %s rate limit exceeded for %s; not retrying before %s",
		kind, who, e.Reset.UTC().Format(time.RFC3339))
}

// IsRateLimited reports whether err is, or wraps, a rate-limit refusal, and
// returns it. Besides the access layer's own [*RateLimitedError] (which
// go-github wraps in a *url.Error), it recognises go-github's
// *github.RateLimitError and *github.AbuseRateLimitError: go-github refuses
// calls client-side, without reaching the access layer, after it has seen a
// response with x-ratelimit-remaining: 0.
func IsRateLimited(err error) (*RateLimitedError, bool) {
	if err == nil {
		return nil, false
	}
	var rl *RateLimitedError
	if errors.As(err, &rl) {
		return rl, true
	}
	var primary *github.RateLimitError
	if errors.As(err, &primary) {
		return &RateLimitedError{
			Installation: UnknownInstallation,
			Reset:        primary.Rate.Reset.Time,
		}, true
	}
	var secondary *github.AbuseRateLimitError
	if errors.As(err, &secondary) {
		reset := time.Now().Add(defaultSecondaryWait)
		if secondary.RetryAfter != nil {
			reset = time.Now().Add(*secondary.RetryAfter)
		}
		return &RateLimitedError{
			Installation: UnknownInstallation,
			Reset:        reset,
			Secondary:    true,
		}, true
	}
	return nil, false
}
