package mirror

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// pushPayload is a push webhook payload, decoded once per delivery: the
// settings (settingsPush), the anchors (anchorPush), evidence of work and
// the branch's push log all read this one value.
type pushPayload struct {
	Ref     string `json:"ref"`
	Before  string `json:"before"`
	After   string `json:"after"`
	Created bool   `json:"created"`
	Deleted bool   `json:"deleted"`
	Forced  bool   `json:"forced"`
	Compare string `json:"compare"`
	// BaseRef is the branch whose head the pushed ref now points at, when
	// the push created it there (GitHub's base_ref; null otherwise).
	BaseRef *string `json:"base_ref"`
	// Size and DistinctSize are absent from webhooks and present in the
	// events API's form, where commits are cut to 20.
	Size         *int         `json:"size"`
	DistinctSize *int         `json:"distinct_size"`
	Commits      []pushCommit `json:"commits"`
	HeadCommit   *pushCommit  `json:"head_commit"`
	Pusher       struct {
		Name string `json:"name"`
	} `json:"pusher"`
	Repository struct {
		ID       int64           `json:"id"`
		FullName string          `json:"full_name"`
		PushedAt json.RawMessage `json:"pushed_at"`
	} `json:"repository"`
	Sender struct {
		Login string `json:"login"`
		Type  string `json:"type"`
	} `json:"sender"`
}

// pushCommit is one commit of a push payload with the paths it changed.
type pushCommit struct {
	ID        string   `json:"id"`
	Distinct  *bool    `json:"distinct"`
	Timestamp string   `json:"timestamp"`
	Added     []string `json:"added"`
	Removed   []string `json:"removed"`
	Modified  []string `json:"modified"`
}

// touches reports whether the commit added, modified or removed path.
func (c pushCommit) touches(path string) bool {
	return slices.Contains(c.Added, path) || slices.Contains(c.Modified, path) || slices.Contains(c.Removed, path)
}

// pushCommitLimit: GitHub's push payloads list at most this many commits
// with their files (PROTOCOL: "at most 20"); a push that lists as many may
// have brought more.
const pushCommitLimit = 20

// decodePush decodes a push webhook payload.
func decodePush(payload []byte) (*pushPayload, error) {
	var p pushPayload
	if err := json.Unmarshal(payload, &p); err != nil {
		return nil, payloadErr("push payload: %w", err)
	}
	return &p, nil
}

// created reports whether the push created the branch (nothing before it).
func (p *pushPayload) created() bool { return p.Created || isZeroSHA(p.Before) }

// commitsIncomplete is the one rule for "the payload may not list every
// commit the push brought", so whoever reads the commits' files must ask
// GitHub instead: 20 or more commits (GitHub's cut), a size or
// distinct_size above what is listed (distinct commits counted as GitHub
// flags them), a force push (a rewind drops commits and lists none of
// them), or a push that moved the branch and lists no commit.
func (p *pushPayload) commitsIncomplete() bool {
	n, distinct := len(p.Commits), 0
	for _, c := range p.Commits {
		if c.Distinct == nil || *c.Distinct {
			distinct++
		}
	}
	return n >= pushCommitLimit ||
		p.Size != nil && *p.Size > n ||
		p.DistinctSize != nil && *p.DistinctSize > distinct ||
		p.Forced ||
		n == 0 && p.Before != p.After
}

// pushTime is when the push happened: GitHub's repository.pushed_at (its
// own clock: a number of seconds in push payloads, a timestamp elsewhere),
// else the head commit's timestamp (the committer's clock, so never trusted
// past now: RecordEvidence clamps), else the zero time (= now).
func (p *pushPayload) pushTime() time.Time {
	if raw := bytes.TrimSpace(p.Repository.PushedAt); len(raw) > 0 && !bytes.Equal(raw, []byte("null")) {
		if secs, err := strconv.ParseInt(string(raw), 10, 64); err == nil && secs > 0 {
			return time.Unix(secs, 0).UTC()
		}
		var s string
		if json.Unmarshal(raw, &s) == nil {
			if t, err := time.Parse(time.RFC3339, s); err == nil {
				return t.UTC()
			}
		}
	}
	if p.HeadCommit != nil {
		if t, err := time.Parse(time.RFC3339, p.HeadCommit.Timestamp); err == nil {
			return t.UTC()
		}
	}
	return time.Time{}
}

// headIsNew reports whether the push's head commit is new to the
// repository (GitHub marks it distinct): no check run can be on it yet.
func (p *pushPayload) headIsNew() bool {
	h := p.HeadCommit
	return h != nil && h.ID == p.After && h.Distinct != nil && *h.Distinct
}

// isZeroSHA reports whether sha is GitHub's all-zeros SHA (no commit: a
// created or deleted branch's other end) or empty.
func isZeroSHA(sha string) bool {
	return sha == "" || strings.Trim(sha, "0") == ""
}

// HandlePush follows a push to a branch (CONTRACT.md §3): the settings file
// on the default branch (the store applies the human-push rule), the
// anchors of the items based on the branch (anchorsOnPush), evidence of
// work for the live or lapsed claims it shows alive (§9: a push to the
// claim's branch, a branch created at its head, a push elsewhere by a login
// acting for the holder), and a log of the push for every item that ever
// had a grant on the branch (takeover collisions, §6, and, for a force-push
// or a deletion, prior-branch-rewritten). A deletion is logged and nothing
// else; a push by warden itself is none of these.
func (m *Mirror) HandlePush(ctx context.Context, ev Event) (string, error) {
	if ev.FromSelf {
		return OutcomeIgnored, nil
	}
	p, err := decodePush(ev.Payload)
	if err != nil {
		return "", err
	}
	branch, ok := strings.CutPrefix(p.Ref, "refs/heads/")
	if !ok || branch == "" {
		return "not a branch: " + OutcomeIgnored, nil
	}
	repo, err := m.Ledger.RepoByID(ctx, p.Repository.ID)
	if errors.Is(err, store.ErrNotFound) {
		return "repository not served", nil
	} else if err != nil {
		return "", err
	}
	if p.Deleted {
		return m.logRewrite(ctx, repo, branch, p, "branch deleted")
	}
	var outs []string
	if m.SettingsStore != nil {
		out, check, err := m.SettingsStore.onPush(ctx, repo, p.settingsPush())
		if err != nil {
			return "", err
		}
		if out != "" {
			outs = append(outs, out)
		}
		cctx := ctx
		if p.headIsNew() {
			cctx = withNewHead(ctx, p.After) // no run can be on a commit pushed for the first time
		}
		if out, err := m.settingsCheckRun(cctx, repo, check); err != nil {
			return "", err
		} else if out != "" {
			outs = append(outs, out)
		}
	}
	at := p.pushTime()
	// Anchors of the items based on this branch (CONTRACT.md §3).
	if out, err := m.anchorsOnPush(ctx, repo, p, branch, at); err != nil {
		return "", err
	} else if out != "" {
		outs = append(outs, out)
	}
	got, err := m.Ledger.RecordPushEvidence(ctx, repo.ID, branch, at, p.Sender.Login)
	if err != nil {
		return "", err
	}
	act, err := m.Ledger.RecordActivity(ctx, repo.ID, store.Activity{Kind: store.ActivityPush, Login: p.Sender.Login, Branch: branch,
		BaseRef: strings.TrimPrefix(deref(p.BaseRef), "refs/heads/"), Rewrite: p.rewrite(), At: at})
	if err != nil {
		return "", err
	}
	got = append(got, act.Evidence...)
	if len(got) == 0 {
		outs = append(outs, "no claim on "+branch)
	} else {
		parts := make([]string, len(got))
		for i, g := range got {
			parts[i] = fmt.Sprintf("%s (fence %d, %s)", g.Item, g.Fence, g.Owner)
		}
		outs = append(outs, "evidence of work for "+strings.Join(parts, ", "))
	}
	// Every item that ever had a claim on this branch logs the push: a push
	// by a prior owner after a takeover is a collision (CONTRACT.md §6).
	nums, err := m.Ledger.RecordBranchPush(ctx, repo.ID, branch, at, p.Sender.Login, p.rewrite())
	if err != nil {
		return "", err
	}
	settled, err := m.settleAll(ctx, repo, append(nums, act.Logged...))
	if err != nil {
		return "", err
	}
	return strings.Join(append(outs, settled...), "; "), nil
}

// logRewrite logs a deletion of branch (at warden's clock: a deletion's
// payload carries no time of its own) for every item that ever had a grant
// on it, and settles them (prior-branch-rewritten).
func (m *Mirror) logRewrite(ctx context.Context, repo store.Repo, branch string, p *pushPayload, what string) (string, error) {
	nums, err := m.Ledger.RecordBranchPush(ctx, repo.ID, branch, m.now(), p.Sender.Login, p.rewrite())
	if err != nil {
		return "", err
	}
	outs := []string{what}
	if len(nums) == 0 {
		outs = append(outs, "no claim ever recorded "+branch)
	}
	settled, err := m.settleAll(ctx, repo, nums)
	if err != nil {
		return "", err
	}
	return strings.Join(append(outs, settled...), "; "), nil
}

// settleAll settles each item once (numbers may repeat). A failure fails
// the delivery, whose retry finds the push already logged.
func (m *Mirror) settleAll(ctx context.Context, repo store.Repo, nums []int) ([]string, error) {
	var outs []string
	seen := map[int]bool{}
	for _, n := range nums {
		if seen[n] {
			continue
		}
		seen[n] = true
		out, err := m.settleItem(ctx, repo, n)
		if err != nil {
			return nil, err
		}
		if out != "" {
			outs = append(outs, out)
		}
	}
	return outs, nil
}

// rewrite is how the push rewrote its branch (gating.RewriteDeleted,
// RewriteForced, or "" for one that only added commits).
func (p *pushPayload) rewrite() string {
	switch {
	case p.Deleted:
		return gating.RewriteDeleted
	case p.Forced:
		return gating.RewriteForced
	}
	return ""
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
