package mirror

import (
	"fmt"
	"strings"
)

// RepoSettings are a repository's backlog settings (CONTRACT.md §2,
// `.github/backlog.yml`); Defaults returns the values used when the file is
// absent.
type RepoSettings struct {
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
}

// DefaultSettings are the contract's defaults.
func DefaultSettings() RepoSettings {
	return RepoSettings{ItemLabel: "backlog", AdmissionLabel: "needs-specification", ParkedLabel: "stale",
		PoisonThreshold: 3, RulingOwner: "pm", DefaultPriority: "P2", DefaultPhase: "implementation", CheckRun: true}
}

// labelSpec is a label warden needs, with the colour and description it
// creates it with.
type labelSpec struct{ name, color, description string }

func (s RepoSettings) labels() []labelSpec {
	return []labelSpec{
		{s.ItemLabel, "0e8a16", "A backlog item (warden keeps it honest)"},
		{s.AdmissionLabel, "fbca04", "Awaiting a human's admission: remove this label to admit the item"},
		{s.ParkedLabel, "b60205", "Parked: a human's ruling is needed before more attempts"},
	}
}

// ResumeBody is a new item's body: a pointer to the issue (which holds the
// specification, the human's) and the resume block, empty unless given.
func ResumeBody(number int, url string, given *string) string {
	ptr := fmt.Sprintf("See #%d", number)
	if url != "" {
		ptr += ": " + url
	}
	block := "lastLocation:\nresumeNote:"
	if given != nil && strings.TrimSpace(*given) != "" {
		block = *given
	}
	return ptr + "\n\n" + block
}
