package mirror

import (
	"github.com/google/go-github/v66/github"
	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// pullRecordOf is a pull request as GitHub carries it (the REST API and
// pull_request webhooks alike).
func pullRecordOf(pr *github.PullRequest) store.PullRecord {
	rec := store.PullRecord{PullRequest: gating.PullRequest{Number: pr.GetNumber(), State: pr.GetState(), Merged: pr.GetMerged() || pr.MergedAt != nil,
		Draft: pr.GetDraft(), Title: pr.GetTitle(), Body: pr.GetBody(), HeadRef: pr.GetHead().GetRef(), HeadSHA: pr.GetHead().GetSHA(),
		HeadRepoFullName: pr.GetHead().GetRepo().GetFullName(), BaseRef: pr.GetBase().GetRef(), Mergeable: pr.Mergeable},
		UpdatedAt: pr.GetUpdatedAt().UTC(), Author: pr.GetUser().GetLogin()}
	if pr.MergedAt != nil {
		rec.MergedAt = pr.GetMergedAt().UTC()
	}
	return rec
}
