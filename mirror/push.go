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

// isZeroSHA reports whether sha is GitHub's all-zeros SHA (no commit: a
// created or deleted branch's other end) or empty.
func isZeroSHA(sha string) bool {
	return sha == "" || strings.Trim(sha, "0") == ""
}

// HandlePush follows a push to a branch (CONTRACT.md §3): the settings file
// on the default branch (the store applies the human-push rule), the
// anchors of the items based on the branch (anchorsOnPush), evidence of
// work for the live or lapsed claims whose recorded branch it is (§9), and
// a log of the push for every item that ever had a grant on the branch
// (takeover collisions, §6). A branch deletion is none of these, nor is a
// push by warden itself.
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
	if p.Deleted {
		return "branch deleted: " + OutcomeIgnored, nil
	}
	repo, err := m.Ledger.RepoByID(ctx, p.Repository.ID)
	if errors.Is(err, store.ErrNotFound) {
		return "repository not served", nil
	} else if err != nil {
		return "", err
	}
	var outs []string
	if m.SettingsStore != nil {
		out, err := m.SettingsStore.OnPush(ctx, repo, p.settingsPush())
		if err != nil {
			return "", err
		}
		if out != "" {
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
	got, err := m.Ledger.RecordPushEvidence(ctx, repo.ID, branch, at)
	if err != nil {
		return "", err
	}
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
	nums, err := m.Ledger.RecordBranchPush(ctx, repo.ID, branch, at, p.Sender.Login)
	if err != nil {
		return "", err
	}
	for _, n := range nums {
		out, err := m.settleItem(ctx, repo, n)
		if err != nil {
			return "", err
		}
		if out != "" {
			outs = append(outs, out)
		}
	}
	return strings.Join(outs, "; "), nil
}
