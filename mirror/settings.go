package mirror

import (
	"fmt"
	"strings"

	"github.com/wardenhq/warden/gating"
)

// labelSpec is a label warden needs, with the colour and description it
// creates it with.
type labelSpec struct{ name, color, description string }

func labelSpecs(s gating.Settings) []labelSpec {
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
