package agentapi

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/wardenhq/warden/mirror"
)

// TestSubIssueProblem: a sub-issue change GitHub (or warden) refused is 409
// sub-issue-refused, as POST /items answers; a failed call is 502; an error
// that is not about the sub-issue keeps its own mapping.
func TestSubIssueProblem(t *testing.T) {
	cases := []struct {
		name   string
		err    error
		status int
		reason string
		detail string
	}{
		{"refused", &mirror.SubIssueError{Issue: 4, Epic: 7, Refused: true, Msg: "issue already has parent #9"}, http.StatusConflict, ReasonSubIssue, "#9"},
		{"refused removal", &mirror.SubIssueError{Issue: 4, From: 7, Refused: true, Msg: "no"}, http.StatusConflict, ReasonSubIssue, "detach #4 from #7"},
		{"failed", &mirror.SubIssueError{Issue: 4, Epic: 7, Msg: "502 Bad Gateway", Err: errors.New("502")}, http.StatusBadGateway, ReasonGitHub, "nothing was written"},
		{"other", errors.New("disk on fire"), http.StatusInternalServerError, ReasonInternal, ""},
	}
	for _, c := range cases {
		p := subIssueProblem(c.err)
		if p.Status != c.status || p.Reason != c.reason || !strings.Contains(p.Detail, c.detail) {
			t.Errorf("%s: %d %s %q, want %d %s containing %q", c.name, p.Status, p.Reason, p.Detail, c.status, c.reason, c.detail)
		}
	}
}
