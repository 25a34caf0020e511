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
