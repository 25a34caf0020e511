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

	"github.com/wardenhq/warden/mirror/store"
)

type pushPayload struct {
	Ref     string `json:"ref"`
	Deleted bool   `json:"deleted"`
	// Before, After, Forced, Compare, Size, DistinctSize and Commits (with
	// their file lists) are what the anchors read (anchors.go); Size and
	// DistinctSize are absent from webhooks and present in the events
	// API's form, where commits are cut to 20.
	Before       string       `json:"before"`
	After        string       `json:"after"`
	Forced       bool         `json:"forced"`
	Compare      string       `json:"compare"`
	Size         *int         `json:"size"`
	DistinctSize *int         `json:"distinct_size"`
	Commits      []pushCommit `json:"commits"`
	HeadCommit   *struct {
		Timestamp string `json:"timestamp"`
	} `json:"head_commit"`
	Repository struct {
		ID       int64           `json:"id"`
		FullName string          `json:"full_name"`
		PushedAt json.RawMessage `json:"pushed_at"`
	} `json:"repository"`
	Sender struct {
		Login string `json:"login"`
	} `json:"sender"`
}

// pushCommit is one commit of a push payload with the paths it changed.
type pushCommit struct {
	ID       string   `json:"id"`
	Added    []string `json:"added"`
	Removed  []string `json:"removed"`
	Modified []string `json:"modified"`
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
	if errors.Is(err, store.ErrNotFound) {
		return "repository not served", nil
	} else if err != nil {
		return "", err
	}
	var outs []string
	if m.SettingsStore != nil {
		sp, err := SettingsPushFromPayload(ev.Payload)
		if err != nil {
			return "", err
		}
		out, err := m.SettingsStore.OnPush(ctx, repo, sp)
		if err != nil {
			return "", err
		}
		if out != "" {
			outs = append(outs, out)
		}
	}
	at := p.pushTime()
	// Anchors of the items based on this branch (CONTRACT.md §3).
	if out, err := m.anchorsOnPush(ctx, repo, &p, branch, at); err != nil {
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
