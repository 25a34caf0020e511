package gating

import "strings"

// OwnedBy reports whether a claim owner belongs to a worker token named
// tokenName: a worker claims, writes, renews and releases only under owners
// beginning with its token's name and "/" (CONTRACT.md §4).
func OwnedBy(owner, tokenName string) bool {
	return tokenName != "" && strings.HasPrefix(owner, tokenName+"/")
}

// Authors reports whether a role may create and forget items and take
// maintenance claims: pm, human, and warden (which may do what a pm may).
func Authors(r Role) bool {
	return r == RolePM || r == RoleHuman || r == RoleWarden
}
