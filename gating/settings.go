package gating

import "time"

// Settings are a repository's backlog settings (CONTRACT.md §2,
// `.github/backlog.yml`): the labels the gate watches, the poison threshold
// and the switches of the GitHub side. DefaultSettings are the values in
// effect when the file is absent.
type Settings struct {
	ItemLabel       string
	AdmissionLabel  string
	ParkedLabel     string
	PoisonThreshold int
	Agents          []string
	RulingOwner     string
	DefaultPriority string
	DefaultPhase    string
	CheckRun        bool
	RequireItem     bool
	Dashboard       bool
	PostMarkers     bool
	DryRun          bool
	// MaxClaimsPerOwner is max_claims_per_owner: the live claims one owner
	// (OwnerPrincipal: an agent, not a run) may hold at once; 0 is
	// unlimited (OwnerCap).
	MaxClaimsPerOwner int
	// CloseOnComplete is close_on_complete: when state:complete is
	// recorded, warden closes the item's open issue as completed (a human
	// who reopens it is reported, never fought).
	CloseOnComplete bool
	// AgentAssignees is agent_assignees: more logins that count as a
	// dispatched agent when assigned to an item (GitHub's coding agent and
	// WARDEN_AGENTS always do: DispatchedAgent).
	AgentAssignees []string
	// AgentLease is agent_lease: the lease of the claim warden takes for an
	// agent dispatched by assignment (clamped, like every lease, to the
	// deployment's ceiling).
	AgentLease time.Duration
}

// DefaultSettings are the contract's defaults: among them the dashboard
// on (a repository opts out with `dashboard: false`) and the check run on.
func DefaultSettings() Settings {
	return Settings{ItemLabel: "backlog", AdmissionLabel: "needs-specification", ParkedLabel: "stale",
		PoisonThreshold: 3, RulingOwner: "pm", DefaultPriority: "P2", DefaultPhase: "implementation", CheckRun: true,
		Dashboard: true, CloseOnComplete: true, AgentLease: DefaultAgentLease}
}
