package gating

import "strings"

// Actor is who performed an act on GitHub, as the rules judge it.
type Actor struct {
	Login string
	Type  string // the account type GitHub reports: User, Bot, Organization
	// Role is the repository role_name (read, triage, write, maintain,
	// admin, none) when it was looked up; RoleKnown is false when the lookup
	// was not made or failed.
	Role      string
	RoleKnown bool
}

// triagePlus are the repository roles that may perform a human act.
var triagePlus = map[string]bool{"triage": true, "write": true, "maintain": true, "admin": true}

// TriagePlus reports whether role is triage or more.
func TriagePlus(role string) bool { return triagePlus[role] }

// IsAgent reports whether an account is an agent by its type or the
// configured agent logins (CONTRACT.md §4; marker posters are added by the
// trail).
func IsAgent(a Actor, agents []string) bool {
	if a.Type == "Bot" {
		return true
	}
	for _, x := range agents {
		if strings.EqualFold(x, a.Login) {
			return true
		}
	}
	return false
}

// Standing is who an account is to warden, decided once for every act
// (CONTRACT.md §4): the gate, the commands, the item label's removal and the
// comment trail all ask Judge.
type Standing int

// Standings, from least to most trusted. StandingUnknown is a lookup that
// failed: not a human's act, and not trusted either (warden fails closed).
const (
	StandingUnknown Standing = iota
	StandingWarden           // warden's own App
	StandingAgent            // a Bot, a configured agent, or a login recorded as an agent
	StandingPerson           // not an agent, and not a human with triage or more
	StandingHuman            // a User with triage or more: its acts are a human's
)

// Identity is what warden knows of an account when it judges one act.
type Identity struct {
	Actor
	// Warden: the login is warden's own bot login.
	Warden bool
	// Recorded: the login is recorded as an agent in the repository (it
	// posted backlog-worker markers, CONTRACT.md §4); RecordedKnown is false
	// when that lookup failed.
	Recorded, RecordedKnown bool
}

// NeedsRole reports whether judging id needs the account's repository
// role: only a User that nothing already shows to be warden or an agent.
// The lookup costs a GitHub call, so it is made only then.
func NeedsRole(id Identity, agents []string) bool {
	return !id.Warden && id.RecordedKnown && !id.Recorded && id.Type == "User" && !IsAgent(id.Actor, agents) &&
		!strings.EqualFold(id.Login, "ghost")
}

// Judge decides an account's standing for one act, and when the act is not
// a human's, why not. agents are the configured agent logins (WARDEN_AGENTS
// and the repository's agents setting).
func Judge(id Identity, agents []string) (Standing, string) {
	switch {
	case id.Warden:
		return StandingWarden, "warden itself"
	case !id.RecordedKnown:
		return StandingUnknown, "who-is-who lookup failed"
	case id.Recorded && id.Type == "User":
		return StandingAgent, "a login seen acting as both an agent and a human (shared-identity)"
	case id.Recorded:
		return StandingAgent, "a login recorded as an agent (it posted backlog-worker markers)"
	}
	ok, why := HumanAct(id.Actor, agents)
	switch {
	case ok:
		return StandingHuman, ""
	case IsAgent(id.Actor, agents):
		return StandingAgent, why
	case why == "permission lookup failed":
		return StandingUnknown, why
	}
	return StandingPerson, why
}

// SharedIdentity reports whether an act by id shows one login acting as
// both an agent and a human: a login recorded as an agent acting as a User
// (CONTRACT.md §4, shared-identity). Such an act is recorded and refused.
func SharedIdentity(id Identity) bool {
	return !id.Warden && id.RecordedKnown && id.Recorded && id.Type == "User"
}

// HasWrite reports whether a repository role has write access or more
// (who may post a trusted backlog-worker marker without being an agent).
func HasWrite(role string) bool {
	switch role {
	case "write", "maintain", "admin":
		return true
	}
	return false
}

// HumanAct decides whether an act counts as a human's with triage or more
// (CONTRACT.md §4): not a Bot, not a configured agent, not ghost, and a
// role_name of triage, write, maintain or admin. An unknown role is a no:
// warden fails closed. The reason says why not.
func HumanAct(a Actor, agents []string) (bool, string) {
	switch {
	case a.Type != "User":
		return false, "an account of type " + a.Type
	case strings.EqualFold(a.Login, "ghost"):
		return false, "the ghost account"
	case IsAgent(a, agents):
		return false, "a configured agent"
	case !a.RoleKnown:
		return false, "permission lookup failed"
	case !TriagePlus(a.Role):
		return false, "below triage"
	}
	return true, ""
}
