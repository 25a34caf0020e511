package mirror

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/google/go-github/v66/github"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// order tells whether push p came after the push (sha, at) recorded: 1
// after, -1 before, 0 the same push. Pushes are ordered by GitHub's
// pushed_at (seconds); two in the same second by the commit graph (one
// compare GET). With nothing recorded, or no time to compare, p is later
// (the latest delivery wins); so is a push that diverged (a force push).
func (s *SettingsStore) order(ctx context.Context, gh *github.Client, r store.Repo, sha string, at int64, p SettingsPush) (int, error) {
	switch {
	case sha == "":
		return 1, nil
	case sha == p.After:
		return 0, nil
	case at == 0 || p.PushedAt.IsZero():
		return 1, nil
	case p.PushedAt.Unix() > at:
		return 1, nil
	case p.PushedAt.Unix() < at:
		return -1, nil
	}
	owner, name, _ := strings.Cut(r.FullName, "/")
	cmp, _, err := gh.Repositories.CompareCommits(ctx, owner, name, sha, p.After, &github.ListOptions{PerPage: 1})
	if err != nil {
		return 0, fmt.Errorf("order pushes %s and %s of %s: %w", shortSHA(sha), shortSHA(p.After), r.FullName, err)
	}
	switch cmp.GetStatus() {
	case "behind":
		return -1, nil
	case "identical":
		return 0, nil
	}
	return 1, nil
}

// pushedByHuman applies CONTRACT.md §4 to a push: the sender is a User
// account, and neither the pusher nor the sender is ghost, a bot account,
// a configured agent (WARDEN_AGENTS or the repository's agents:, both the
// settings in effect and the file pushed: either makes an agent) or a
// recorded agent. A push naming nobody is no human's. why says why not.
func (s *SettingsStore) pushedByHuman(repoID int64, p SettingsPush, repoAgents ...[]string) (human bool, why string) {
	agents := slices.Clone(s.agents)
	for _, a := range repoAgents {
		agents = append(agents, a...)
	}
	if p.SenderType != "User" {
		if p.SenderType == "" {
			return false, "the sender's account type is unknown"
		}
		return false, "an account of type " + p.SenderType
	}
	var logins []string
	for _, l := range []string{p.PusherLogin, p.SenderLogin} {
		if l != "" && !slices.ContainsFunc(logins, func(x string) bool { return strings.EqualFold(x, l) }) {
			logins = append(logins, l)
		}
	}
	if len(logins) == 0 {
		return false, "the push names no pusher"
	}
	for _, l := range logins {
		switch {
		case strings.EqualFold(l, "ghost"):
			return false, "the ghost account"
		case strings.HasSuffix(strings.ToLower(l), "[bot]"):
			return false, l + " is a bot account"
		case gating.IsAgent(gating.Actor{Login: l, Type: p.SenderType}, agents):
			return false, l + " is a configured agent"
		case s.IsRecordedAgent != nil && s.IsRecordedAgent(repoID, l):
			return false, l + " is a recorded agent"
		}
	}
	return true, ""
}

func pushedBy(p SettingsPush) string {
	if p.PusherLogin != "" {
		return p.PusherLogin
	}
	if p.SenderLogin != "" {
		return p.SenderLogin
	}
	return "(unknown)"
}
