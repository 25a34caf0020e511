package gating

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
}

// DefaultSettings are the contract's defaults: among them the dashboard
// on (a repository opts out with `dashboard: false`) and the check run on.
func DefaultSettings() Settings {
	return Settings{ItemLabel: "backlog", AdmissionLabel: "needs-specification", ParkedLabel: "stale",
		PoisonThreshold: 3, RulingOwner: "pm", DefaultPriority: "P2", DefaultPhase: "implementation", CheckRun: true,
		Dashboard: true, CloseOnComplete: true}
}
