package mirror

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

type pushPayload struct {
	Ref        string `json:"ref"`
	Deleted    bool   `json:"deleted"`
	HeadCommit *struct {
		Timestamp string `json:"timestamp"`
	} `json:"head_commit"`
	Repository struct {
		ID       int64           `json:"id"`
		FullName string          `json:"full_name"`
		PushedAt json.RawMessage `json:"pushed_at"`
	} `json:"repository"`
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
				return t
			}
		}
	}
	if p.HeadCommit != nil {
		if t, err := time.Parse(time.RFC3339, p.HeadCommit.Timestamp); err == nil {
			return t
		}
	}
	return time.Time{}
}

// HandlePush records a push to a branch as evidence of work for the live or
// lapsed claims whose recorded branch it is (CONTRACT.md §9). A branch
// deletion is no evidence, nor is a push by warden itself. (Settings
// reloads, moved base branches and anchors read pushes in later issues.)
func (m *Mirror) HandlePush(ctx context.Context, ev Event) (string, error) {
	if ev.FromSelf {
		return OutcomeIgnored, nil
	}
	var p pushPayload
	if err := json.Unmarshal(ev.Payload, &p); err != nil {
		return "", fmt.Errorf("push payload: %w", err)
	}
	branch, ok := strings.CutPrefix(p.Ref, "refs/heads/")
	if !ok || branch == "" {
		return "not a branch: " + OutcomeIgnored, nil
	}
	if p.Deleted {
		return "branch deleted: " + OutcomeIgnored, nil
	}
	repo, err := m.Ledger.RepoByID(ctx, p.Repository.ID)
	if errors.Is(err, ErrNotFound) {
		return "repository not served", nil
	} else if err != nil {
		return "", err
	}
	got, err := m.Ledger.RecordPushEvidence(ctx, repo.ID, branch, p.pushTime())
	if err != nil {
		return "", err
	}
	if len(got) == 0 {
		return "no claim on " + branch, nil
	}
	parts := make([]string, len(got))
	for i, g := range got {
		parts[i] = fmt.Sprintf("%s (fence %d, %s)", g.Item, g.Fence, g.Owner)
	}
	return "evidence of work for " + strings.Join(parts, ", "), nil
}
