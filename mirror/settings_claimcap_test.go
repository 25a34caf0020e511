package mirror

import (
	"strings"
	"testing"

	"github.com/wardenhq/warden/gating"
)

// TestMaxClaimsPerOwnerSetting: max_claims_per_owner is a whole number
// from 0 (no cap, the default) to MaxClaimsPerOwnerLimit; anything else is
// settings-invalid and keeps the last good value; an agent's push cannot
// change it.
func TestMaxClaimsPerOwnerSetting(t *testing.T) {
	last := gating.DefaultSettings()
	last.MaxClaimsPerOwner = 4
	for _, c := range []struct {
		file    string
		want    int
		problem string // a substring of the one problem; "" for none
	}{
		{"", 0, ""},
		{"dry_run: false\n", 0, ""},
		{"max_claims_per_owner: 3\n", 3, ""},
		{"max_claims_per_owner: 0\n", 0, ""},
		{"max_claims_per_owner: ~\n", 0, ""},
		{"max_claims_per_owner: 1000\n", 1000, ""},
		{"max_claims_per_owner: 1001\n", 4, "from 0 (no cap) to 1000"},
		{"max_claims_per_owner: -1\n", 4, "from 0 (no cap) to 1000"},
		{"max_claims_per_owner: 2.5\n", 4, "whole number"},
		{"max_claims_per_owner: two\n", 4, "whole number"},
		{"max_claims_per_owner: true\n", 4, "whole number"},
		{"max_claims_per_owner: [1]\n", 4, "whole number"},
		{"max_claims_per_owner: 2\nmax_claims_per_owner: 3\n", 4, "given twice"},
	} {
		got, probs := ParseSettingsFile([]byte(c.file), last)
		if got.MaxClaimsPerOwner != c.want {
			t.Errorf("%q: max_claims_per_owner %d, want %d (%+v)", c.file, got.MaxClaimsPerOwner, c.want, probs)
		}
		switch {
		case c.problem == "" && len(probs) != 0:
			t.Errorf("%q: problems %+v", c.file, probs)
		case c.problem != "" && (len(probs) != 1 || probs[0].Key != "max_claims_per_owner" || !strings.Contains(probs[0].String(), c.problem) ||
			probs[0].Code != SettingsInvalid || !strings.Contains(probs[0].String(), "keeps its last good value 4")):
			t.Errorf("%q: problems %+v, want one settings-invalid on max_claims_per_owner saying %q and keeping 4", c.file, probs, c.problem)
		}
	}
	if _, probs := ParseSettingsFile([]byte("max-claims-per-owner: 2\n"), last); len(probs) != 1 || !strings.Contains(probs[0].String(), "did you mean max_claims_per_owner?") {
		t.Errorf("a misspelt key: %+v", probs)
	}
	// An agent's push: nothing changes, the field is named.
	proposed, probs := ParseSettingsFile([]byte("max_claims_per_owner: 9\n"), gating.DefaultSettings())
	got, findings := DecideSettingsChange(gating.DefaultSettings(), proposed, probs, false)
	if got.MaxClaimsPerOwner != 0 || len(findings) != 1 || findings[0].Code != SettingsChangedByAgent || findings[0].Key != "max_claims_per_owner" {
		t.Errorf("an agent's push: %+v %+v", got, findings)
	}
	if got, _ := DecideSettingsChange(gating.DefaultSettings(), proposed, probs, true); got.MaxClaimsPerOwner != 9 {
		t.Errorf("a human's push: %+v", got)
	}
}
