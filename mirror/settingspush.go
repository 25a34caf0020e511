package mirror

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// settingsPushPayload is the part of a push webhook payload the settings
// read.
type settingsPushPayload struct {
	Ref          string               `json:"ref"`
	Before       string               `json:"before"`
	After        string               `json:"after"`
	Created      bool                 `json:"created"`
	Deleted      bool                 `json:"deleted"`
	Forced       bool                 `json:"forced"`
	Size         *int                 `json:"size"`
	DistinctSize *int                 `json:"distinct_size"`
	Commits      []settingsPushCommit `json:"commits"`
	HeadCommit   *settingsPushCommit  `json:"head_commit"`
	Pusher       struct {
		Name string `json:"name"`
	} `json:"pusher"`
	Sender struct {
		Login string `json:"login"`
		Type  string `json:"type"`
	} `json:"sender"`
	Repository struct {
		PushedAt json.RawMessage `json:"pushed_at"`
	} `json:"repository"`
}

type settingsPushCommit struct {
	ID        string   `json:"id"`
	Distinct  *bool    `json:"distinct"`
	Timestamp string   `json:"timestamp"`
	Added     []string `json:"added"`
	Modified  []string `json:"modified"`
	Removed   []string `json:"removed"`
}

func (c settingsPushCommit) touches(path string) bool {
	return slices.Contains(c.Added, path) || slices.Contains(c.Modified, path) || slices.Contains(c.Removed, path)
}

// SettingsPushFromPayload reads a push webhook payload for OnPush. Touched
// is set when a listed commit added, modified or removed SettingsPath, and
// also whenever the list may not show every commit: 20 or more commits, a
// size or distinct_size above what is listed, a force push (a rewind lists
// nothing), or a push that moved the branch and lists no commit.
func SettingsPushFromPayload(payload []byte) (SettingsPush, error) {
	var p settingsPushPayload
	if err := json.Unmarshal(payload, &p); err != nil {
		return SettingsPush{}, fmt.Errorf("push payload: %w", err)
	}
	out := SettingsPush{Ref: p.Ref, After: p.After, PusherLogin: p.Pusher.Name, SenderLogin: p.Sender.Login,
		SenderType: p.Sender.Type, PushedAt: p.pushedAt()}
	if p.Deleted {
		return out, nil
	}
	distinct := 0
	for _, c := range p.Commits {
		if c.Distinct == nil || *c.Distinct {
			distinct++
		}
		if c.touches(SettingsPath) {
			out.Touched = true
		}
	}
	switch {
	case len(p.Commits) >= maxSettingsPushCommits,
		p.Size != nil && *p.Size > len(p.Commits),
		p.DistinctSize != nil && *p.DistinctSize > distinct,
		p.Forced,
		len(p.Commits) == 0 && p.Before != p.After:
		out.Touched = true
	}
	return out, nil
}

// pushedAt is GitHub's repository.pushed_at (seconds in push payloads, a
// timestamp elsewhere), else the head commit's timestamp, else zero.
func (p *settingsPushPayload) pushedAt() time.Time {
	if raw := bytes.TrimSpace(p.Repository.PushedAt); len(raw) > 0 && !bytes.Equal(raw, []byte("null")) {
		if secs, err := strconv.ParseInt(string(raw), 10, 64); err == nil && secs > 0 {
			return time.Unix(secs, 0).UTC()
		}
		var str string
		if json.Unmarshal(raw, &str) == nil {
			if t, err := time.Parse(time.RFC3339, str); err == nil {
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

func isZeroSHA(sha string) bool {
	return sha == "" || strings.Trim(sha, "0") == ""
}
