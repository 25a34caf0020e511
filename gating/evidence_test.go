package gating

import (
	"strings"
	"testing"
)

// TestActEvidence: what an act is as evidence of work for a live claim.
func TestActEvidence(t *testing.T) {
	holder := ActClaim{Item: 1, Owner: "w/a", Branch: "feat/a", Holder: true}
	other := ActClaim{Item: 1, Owner: "w/a", Branch: "feat/a"}
	cases := []struct {
		name   string
		act    Act
		c      ActClaim
		prHead string
		shared bool
		kind   string
		detail string
	}{
		{"a push to the claim's branch is found by branch", Act{Kind: ActPush, Login: "bot", Branch: "feat/a"}, holder, "", false, "", ""},
		{"a branch created at its head, by anyone", Act{Kind: ActPush, Login: "x", Branch: "feat/a2", BaseRef: "feat/a"}, other, "", false, EvidencePushDescendant, `at the head of "feat/a"`},
		{"a holder's push elsewhere", Act{Kind: ActPush, Login: "bot", Branch: "scratch"}, holder, "", false, EvidencePushByHolder, `a push to "scratch" by "bot"`},
		{"a shared login's push elsewhere", Act{Kind: ActPush, Login: "bot", Branch: "scratch"}, holder, "", true, "", ""},
		{"a stranger's push elsewhere", Act{Kind: ActPush, Login: "x", Branch: "scratch"}, other, "", false, "", ""},
		{"a deletion", Act{Kind: ActPush, Login: "bot", Branch: "scratch", Rewrite: RewriteDeleted}, holder, "", false, "", ""},
		{"a PR from the claim's branch, by anyone", Act{Kind: ActPull, Login: "x", Branch: "feat/a", PR: 9, Action: "opened"}, other, "", true, EvidencePullRequest, "pull request #9 from"},
		{"a holder's PR from elsewhere", Act{Kind: ActPull, Login: "bot", Branch: "other", PR: 9, Action: "edited"}, holder, "", false, EvidencePullRequest, "which acts for"},
		{"a holder's comment on the item, shared or not", Act{Kind: ActComment, Login: "bot", Item: 1}, holder, "", true, EvidenceComment, "on the item"},
		{"a holder's comment on its PR", Act{Kind: ActComment, Login: "bot", PR: 9}, holder, "feat/a", true, EvidencePullRequest, "a comment on pull request #9"},
		{"a holder's comment elsewhere", Act{Kind: ActComment, Login: "bot", Item: 2}, holder, "", false, EvidenceComment, "elsewhere"},
		{"a shared login's comment elsewhere", Act{Kind: ActComment, Login: "bot", Item: 2}, holder, "", true, "", ""},
		{"a stranger's comment on the item", Act{Kind: ActComment, Login: "x", Item: 1}, other, "", false, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			kind, detail := ActEvidence(c.act, c.c, c.prHead, c.shared)
			if kind != c.kind || !strings.Contains(detail, c.detail) {
				t.Errorf("ActEvidence = %q, %q; want %q containing %q", kind, detail, c.kind, c.detail)
			}
		})
	}
}

func TestSharedLogin(t *testing.T) {
	cases := []struct {
		claims []ActClaim
		want   bool
	}{
		{nil, false},
		{[]ActClaim{{Owner: "a", Holder: true}, {Owner: "a", Holder: true}}, false},
		{[]ActClaim{{Owner: "a", Holder: true}, {Owner: "b"}}, false},
		{[]ActClaim{{Owner: "a", Holder: true}, {Owner: "b", Holder: true}}, true},
	}
	for i, c := range cases {
		if got := SharedLogin(c.claims); got != c.want {
			t.Errorf("case %d: SharedLogin = %v, want %v", i, got, c.want)
		}
	}
}
