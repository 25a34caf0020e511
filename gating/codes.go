package gating

import "slices"

// KnownCodes lists every code ResolveHint has a line of its own for, sorted:
// the defect codes of the report, the exclusion reasons of the ready set
// and the write refusals that carry a hint. The user documentation
// (docs/defects.md) is held to this list by a test; a code added to the
// report's hints is a code the documentation must describe.
func KnownCodes() []string {
	out := make([]string, 0, len(reportHints))
	for c := range reportHints {
		out = append(out, c)
	}
	slices.Sort(out)
	return out
}
