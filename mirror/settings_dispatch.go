package mirror

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v4"

	"github.com/wardenhq/warden/gating"
)

// agentAssigneesField reads agent_assignees (CONTRACT.md §2): more logins
// that count as a dispatched agent when assigned to an item, validated as
// agents: is (GitHub's coding agent and WARDEN_AGENTS always count, and so
// does any Bot assignee: gating.DispatchedAgent).
var agentAssigneesField = settingField{
	set:  func(s *gating.Settings, n *yaml.Node) (err error) { s.AgentAssignees, err = agentsValue(n); return },
	keep: func(s *gating.Settings, l gating.Settings) { s.AgentAssignees = slices.Clone(l.AgentAssignees) },
}

// agentLeaseField reads agent_lease: the lease of the claim warden takes for
// an agent dispatched by assignment, a duration such as 2h or 90m from
// gating.MinAgentLease to gating.MaxAgentLease. The ledger clamps the grant
// to the deployment's ceiling (WARDEN_LEASE_MAX) as it clamps every lease,
// so a setting above it is not refused here: warden cannot know, reading
// the file offline, which deployment will serve it.
var agentLeaseField = settingField{
	set:  func(s *gating.Settings, n *yaml.Node) (err error) { s.AgentLease, err = agentLeaseValue(n); return },
	keep: func(s *gating.Settings, l gating.Settings) { s.AgentLease = l.AgentLease },
}

func agentLeaseValue(n *yaml.Node) (time.Duration, error) {
	bounds := fmt.Sprintf("a duration from %s to %s, such as 2h or 90m", fmtDuration(gating.MinAgentLease), fmtDuration(gating.MaxAgentLease))
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" {
		e := &valueError{msg: "must be " + bounds}
		if n.Kind == yaml.ScalarNode && (n.Tag == "!!int" || n.Tag == "!!float") {
			e.msg = fmt.Sprintf("is a bare number; it must be %s (with its unit)", bounds)
			e.suggestion = n.Value + "m"
		}
		return 0, e
	}
	d, err := time.ParseDuration(n.Value)
	if err != nil {
		return 0, fmt.Errorf("is %s, not a duration; it must be %s", quote(n.Value), bounds)
	}
	if d < gating.MinAgentLease || d > gating.MaxAgentLease {
		return 0, fmt.Errorf("is %s; it must be %s", fmtDuration(d), bounds)
	}
	return d, nil
}

// fmtDuration writes d as the settings file would: 2h, 90m, 1m30s.
func fmtDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
