package gating

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Dispatch by assignment (issue 20): a person or a script that assigns an
// item to an agent account (GitHub's coding agent, or a login the
// deployment or the repository names) hands it work without the agent ever
// asking the ledger. warden treats the assignment as a claim: granted when
// the item is claimable, undone and reported when it is not.

// CodeAgentDispatchRefused is the report line of an agent assigned to an
// item that is not claimable; warden removed the assignee (CONTRACT.md §11).
const CodeAgentDispatchRefused = "agent-dispatch-refused"

// The agent_lease setting's default and bounds. A dispatched agent works
// for a while before its first push, so its lease is long; the ledger still
// clamps it to the deployment's ceiling (WARDEN_LEASE_MAX), as it does
// every lease.
const (
	DefaultAgentLease = 2 * time.Hour
	MinAgentLease     = time.Minute
	MaxAgentLease     = 24 * time.Hour
)

// CodingAgentLogins are the logins GitHub uses for its coding agent: the
// assignee a person picks ("Copilot") and the account it works as.
var CodingAgentLogins = []string{"Copilot", "copilot-swe-agent", "copilot-swe-agent[bot]"}

// IsCodingAgent reports whether login is GitHub's coding agent under any
// of the logins GitHub uses for it, case-insensitively.
func IsCodingAgent(login string) bool {
	for _, l := range CodingAgentLogins {
		if strings.EqualFold(l, login) {
			return true
		}
	}
	return false
}

// DispatchedAgent reports whether an assignee is a dispatched agent: GitHub's
// coding agent, a login of deployment (WARDEN_AGENTS) or of repo (the
// repository's agent_assignees), matched case-insensitively, or any account
// whose user type is Bot. A login that is empty is nobody.
func DispatchedAgent(login, userType string, deployment, repo []string) bool {
	if login == "" {
		return false
	}
	if IsCodingAgent(login) || strings.EqualFold(userType, "Bot") {
		return true
	}
	for _, list := range [][]string{deployment, repo} {
		for _, l := range list {
			if strings.EqualFold(l, login) {
				return true
			}
		}
	}
	return false
}

// DispatchAgentName is the name warden acts under for a dispatched agent:
// the login in lower case, its "[bot]" suffix dropped, every character
// outside a-z, 0-9, "-" and "_" written "-". GitHub's coding agent is
// "copilot" under each of its logins, so its custody is one principal.
func DispatchAgentName(login string) string {
	if IsCodingAgent(login) {
		return "copilot"
	}
	l := strings.TrimSuffix(strings.ToLower(login), "[bot]")
	var b strings.Builder
	for _, r := range l {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	if b.Len() == 0 || !startsAlnum(b.String()) {
		return "agent-" + b.String()
	}
	return b.String()
}

// DispatchOwner is the owner of the claim warden takes for login assigned
// to issue n: "<DispatchAgentName>/issue-<n>", which the ledger's owner
// rules accept for a worker named DispatchAgentName (OwnedBy).
func DispatchOwner(login string, n int) string {
	return DispatchAgentName(login) + "/" + string(IDFor(n))
}

// IsDispatchOwner reports whether owner is the owner DispatchOwner gives
// login on issue n.
func IsDispatchOwner(owner, login string, n int) bool {
	return owner == DispatchOwner(login, n)
}

// DispatchRefusalReason is the reason a refused dispatch is counted and
// reported under: the exclusion code when the item is not ready (the
// ready set's own reason), otherwise the ledger's reason, in the report's
// lower-case spelling.
func DispatchRefusalReason(reason, exclusion string) string {
	if exclusion != "" {
		return exclusion
	}
	switch reason {
	case "ForeignRegion":
		return ExForeignRegion
	case "contended":
		// Claimable leaves a held claim to the store, which answers
		// contended: the item is held by another owner.
		return ExHeld
	case "":
		return "not-claimable"
	}
	return strings.ToLower(reason)
}

// DispatchRefusedDetail is the agent-dispatch-refused line's detail: who was
// assigned, why the item is not claimable (code), what was done, and what
// would make the item claimable (the code's ResolveHint). why is the
// ledger's own sentence when it gave one ("" when not).
func DispatchRefusedDetail(login string, n int, code, why string, at time.Time, dry bool) string {
	done := "warden removed the assignee"
	if dry {
		done = "dry_run: the assignee would be removed"
	}
	s := fmt.Sprintf("%s was assigned to issue #%d at %s, which is not claimable (%s", mkrQuote(login), n, at.UTC().Format(time.RFC3339), code)
	if why != "" {
		s += ": " + why
	}
	return s + "); " + done + ". To make it claimable: " + ResolveHint(code)
}

// DispatchOutcomeMarker is the outcome marker warden posts when a dispatch
// claim ends, under the claim's owner and fence, so the trail counts the
// custody as closed: result=released when it ended without a completion
// (the agent unassigned, or its pull request closed unmerged),
// result=complete when warden recorded the completion its merged pull
// request proved.
func DispatchOutcomeMarker(item ItemID, owner string, fence int64, result string) string {
	return OutcomePrefix + "item=" + MarkerValue(string(item)) + " owner=" + MarkerValue(owner) +
		" fence=" + strconv.FormatInt(fence, 10) + " result=" + MarkerValue(result) + markerSuffix
}
