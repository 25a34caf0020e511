package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-github/v66/github"
	"github.com/wardenhq/warden/mirror/store"
)

// HandleReviewComment follows a pull request review comment, a reply to a
// review included (CONTRACT.md §9): evidence of work for the claims whose
// holder the commenter acts for — on a pull request from the claim's
// branch, or anywhere when the login acts for one holder only. It reads
// nothing else of the comment and writes nothing to GitHub.
func (m *Mirror) HandleReviewComment(ctx context.Context, ev Event) (string, error) {
	if ev.FromSelf {
		return OutcomeIgnored, nil
	}
	switch ev.Action {
	case "created", "edited":
	default:
		return OutcomeIgnored, nil
	}
	var p github.PullRequestReviewCommentEvent
	if err := json.Unmarshal(ev.Payload, &p); err != nil {
		return "", payloadErr("pull_request_review_comment payload: %w", err)
	}
	if p.Comment == nil || p.PullRequest == nil || p.GetPullRequest().GetNumber() <= 0 {
		return "", payloadErr("pull_request_review_comment payload: no comment or pull request")
	}
	repo, err := m.Ledger.RepoByID(ctx, p.GetRepo().GetID())
	if errors.Is(err, store.ErrNotFound) {
		return "repository not served", nil
	} else if err != nil {
		return "", err
	}
	pr := p.GetPullRequest()
	head := ""
	if strings.EqualFold(pr.GetHead().GetRepo().GetFullName(), repo.FullName) {
		head = pr.GetHead().GetRef() // a fork's branch of the same name is not a claim's
	}
	at := p.GetComment().GetUpdatedAt().UTC()
	res, err := m.Ledger.RecordActivity(ctx, repo.ID, store.Activity{Kind: store.ActivityComment, Login: p.GetComment().GetUser().GetLogin(),
		PR: pr.GetNumber(), Branch: head, At: at})
	if err != nil {
		return "", err
	}
	out := fmt.Sprintf("review comment %d on pull request #%d %s", p.GetComment().GetID(), pr.GetNumber(), ev.Action)
	for _, e := range res.Evidence {
		out += fmt.Sprintf("; evidence of work for %s fence %d", e.Item, e.Fence)
	}
	return out, nil
}
