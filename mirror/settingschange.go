package mirror

import (
	"fmt"
	"slices"
	"strings"

	"github.com/wardenhq/warden/gating"
)

func labelNames(s gating.Settings) [][2]string {
	return [][2]string{{"labels.item", s.ItemLabel}, {"labels.admission", s.AdmissionLabel}, {"labels.parked", s.ParkedLabel}}
}

func labelsClash(s gating.Settings) bool {
	return strings.EqualFold(s.ItemLabel, s.AdmissionLabel) || strings.EqualFold(s.ItemLabel, s.ParkedLabel) ||
		strings.EqualFold(s.AdmissionLabel, s.ParkedLabel)
}

// withDefaults fills the fields of lastGood that no valid file leaves
// empty from the defaults; a lastGood with no labels at all (the zero
// value: the caller had none) is the defaults.
func withDefaults(s gating.Settings) gating.Settings {
	def := gating.DefaultSettings()
	if s.ItemLabel == "" && s.AdmissionLabel == "" && s.ParkedLabel == "" {
		return def
	}
	for _, f := range []struct{ v, d *string }{{&s.ItemLabel, &def.ItemLabel}, {&s.AdmissionLabel, &def.AdmissionLabel},
		{&s.ParkedLabel, &def.ParkedLabel}, {&s.RulingOwner, &def.RulingOwner}, {&s.DefaultPriority, &def.DefaultPriority},
		{&s.DefaultPhase, &def.DefaultPhase}} {
		if *f.v == "" {
			*f.v = *f.d
		}
	}
	if s.PoisonThreshold <= 0 {
		s.PoisonThreshold = def.PoisonThreshold
	}
	if s.AgentLease <= 0 {
		s.AgentLease = def.AgentLease
	}
	if labelsClash(s) {
		s.ItemLabel, s.AdmissionLabel, s.ParkedLabel = def.ItemLabel, def.AdmissionLabel, def.ParkedLabel
	}
	s.Agents = slices.Clone(s.Agents)
	s.AgentAssignees = slices.Clone(s.AgentAssignees)
	return s
}

// lastValue renders the value a field keeps.
func lastValue(key string, last gating.Settings) string {
	for _, v := range settingValues(last) {
		if v[0] == key {
			return " " + v[1]
		}
	}
	return ""
}

// settingChange is one field that differs between two settings.
type settingChange struct{ field, from, to string }

// settingValues renders every field, in the file's order.
func settingValues(s gating.Settings) [][2]string {
	return [][2]string{
		{"labels.item", quote(s.ItemLabel)},
		{"labels.admission", quote(s.AdmissionLabel)},
		{"labels.parked", quote(s.ParkedLabel)},
		{"poison_threshold", fmt.Sprint(s.PoisonThreshold)},
		{"agents", loginList(s.Agents)},
		{"ruling_owner", quote(s.RulingOwner)},
		{"defaults.priority", quote(s.DefaultPriority)},
		{"defaults.phase", quote(s.DefaultPhase)},
		{"check_run", fmt.Sprint(s.CheckRun)},
		{"require_item", fmt.Sprint(s.RequireItem)},
		{"dashboard", fmt.Sprint(s.Dashboard)},
		{"post_markers", fmt.Sprint(s.PostMarkers)},
		{"dry_run", fmt.Sprint(s.DryRun)},
		{"close_on_complete", fmt.Sprint(s.CloseOnComplete)},
		{"max_claims_per_owner", fmt.Sprint(s.MaxClaimsPerOwner)},
		{"agent_assignees", loginList(s.AgentAssignees)},
		{"agent_lease", fmtDuration(s.AgentLease)},
	}
}

// settingsDiff lists the fields that differ, in the file's order. agents
// and agent_assignees compare as sets, case-insensitively.
func settingsDiff(a, b gating.Settings) []settingChange {
	var out []settingChange
	av, bv := settingValues(a), settingValues(b)
	for i := range av {
		if av[i][0] == "agents" || av[i][0] == "agent_assignees" {
			if av[i][0] == "agents" && sameLogins(a.Agents, b.Agents) || av[i][0] == "agent_assignees" && sameLogins(a.AgentAssignees, b.AgentAssignees) {
				continue
			}
		} else if av[i][1] == bv[i][1] {
			continue
		}
		out = append(out, settingChange{av[i][0], av[i][1], bv[i][1]})
	}
	return out
}

func sameLogins(a, b []string) bool {
	norm := func(l []string) []string {
		out := make([]string, len(l))
		for i, x := range l {
			out[i] = strings.ToLower(x)
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	return slices.Equal(norm(a), norm(b))
}

func loginList(l []string) string {
	q := make([]string, len(l))
	for i, x := range l {
		q[i] = quote(x)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// DecideSettingsChange applies the human-push rule (CONTRACT.md §2) to
// settings read from a push to the default branch: proposed and problems
// are ParseSettingsFile's answer for the pushed file (read against
// current), current the settings in effect before the push, byHuman
// whether the push was made by a human (§4: the pusher, or for a merge the
// person who merged).
//
// A human's push takes effect: proposed, with the file's problems. Any
// other push changes nothing: current stays, each field the file would have
// changed is reported settings-changed-by-agent (naming the field, its
// value and the value it would have taken; with no line: locateProblems
// finds it in the file), and the file's own problems are reported too (the
// file on the default branch is what a human will fix).
func DecideSettingsChange(current, proposed gating.Settings, problems []SettingsProblem, byHuman bool) (gating.Settings, []SettingsProblem) {
	if byHuman {
		proposed.Agents = slices.Clone(proposed.Agents)
		return proposed, slices.Clone(problems)
	}
	var findings []SettingsProblem
	for _, c := range settingsDiff(current, proposed) {
		findings = append(findings, SettingsProblem{Code: SettingsChangedByAgent, Key: c.field,
			Message: fmt.Sprintf("a push not made by a human would change it from %s to %s; it stays %s until a human pushes the change", c.from, c.to, c.from)})
	}
	current.Agents = slices.Clone(current.Agents)
	return current, append(findings, problems...)
}
