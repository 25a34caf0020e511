// Package gating is the backlog protocol's rules as pure functions over
// snapshots: what an item's tags and links may be, which writes the ledger
// refuses and why, the write-admission table of fenced claims, lease
// clamping, roles, and (in later files) admission, parking, takeovers, the
// ready set, check-run verdicts and command parsing.
//
// Nothing here does I/O: every function takes values and returns a decision,
// so every rule is tested by a table without a server. Storage lives in
// mirror/, GitHub access in app/.
package gating
