package store

import (
	"math"
	"unicode"
	"unicode/utf8"

	"github.com/wardenhq/warden/gating"
)

// The checks of a claim request that read nothing (claims.go).

func checkOwner(owner string) error {
	n := utf8.RuneCountInString(owner)
	if !utf8.ValidString(owner) || n < 1 || n > 200 {
		return refusal(ReasonInvalidRequest, "owner %q must be 1 to 200 characters of UTF-8", owner)
	}
	for _, r := range owner {
		if unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return refusal(ReasonInvalidRequest, "owner %q contains a space or a control character", owner)
		}
	}
	return nil
}

func checkSeconds(field string, v *float64, max float64) error {
	if v == nil {
		return nil
	}
	if math.IsNaN(*v) || math.IsInf(*v, 0) || *v < 0 {
		return refusal(ReasonInvalidRequest, "%s %v must be a non-negative number of seconds", field, *v)
	}
	if max > 0 && *v > max {
		return refusal(ReasonInvalidRequest, "%s %v is more than %v", field, *v, max)
	}
	return nil
}

// checkClaimRequest is every check of a claim that reads nothing.
func checkClaimRequest(req ClaimRequest, actor Actor) error {
	if err := checkActor(actor); err != nil {
		return err
	}
	if err := checkOwner(req.Owner); err != nil {
		return err
	}
	switch req.Purpose {
	case "":
	case "maintenance":
		if !gating.Authors(actor.Role) {
			return refusal(ReasonRoleNotAllowed, "maintenance claims are for pm, human and warden; this token is %s", actor.Role)
		}
	default:
		return refusal(ReasonInvalidRequest, "purpose %q is neither empty nor \"maintenance\"", req.Purpose)
	}
	if actor.Role == gating.RoleWorker && !gating.OwnedBy(req.Owner, actor.Name) {
		return refusal(ReasonOwnerNotAllowed, "worker %s claims only under owners beginning with %q; asked for %q", actor.Name, actor.Name+"/", req.Owner)
	}
	if len(req.Branch) > maxBranch || !utf8.ValidString(req.Branch) ||
		containsFunc(req.Branch, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) {
		return refusal(ReasonInvalidRequest, "branch %q must be at most %d printable characters without spaces", req.Branch, maxBranch)
	}
	if err := checkSeconds("leaseSeconds", req.LeaseSeconds, 0); err != nil {
		return err
	}
	return checkSeconds("maxWaitSeconds", req.MaxWaitSeconds, gating.MaxWait.Seconds())
}

func containsFunc(s string, f func(rune) bool) bool {
	for _, r := range s {
		if f(r) {
			return true
		}
	}
	return false
}
