package mirror

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/go-github/v66/github"
	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// anchorPush is what a push payload says about the files it changed.
type anchorPush struct {
	before, after string
	forced        bool
	changes       []gating.PathChange
	truncated     bool
}

func (p *pushPayload) anchorPush() anchorPush {
	ap := anchorPush{before: p.Before, after: p.After, forced: p.Forced}
	for _, c := range p.Commits {
		for _, f := range c.Added {
			ap.changes = append(ap.changes, gating.PathChange{Path: f, Kind: gating.ChangeAdded, Commit: c.ID})
		}
		for _, f := range c.Modified {
			ap.changes = append(ap.changes, gating.PathChange{Path: f, Kind: gating.ChangeModified, Commit: c.ID})
		}
		for _, f := range c.Removed {
			ap.changes = append(ap.changes, gating.PathChange{Path: f, Kind: gating.ChangeRemoved, Commit: c.ID})
		}
	}
	// A created branch has no before to compare with: its listed commits
	// are all there is to read.
	ap.truncated = !p.created() && p.commitsIncomplete()
	return ap
}

// compareChanges lists the files changed between base and head (one
// compare); all is true when GitHub may have left some out.
func compareChanges(ctx context.Context, gh *github.Client, repo store.Repo, base, head string) (changes []gating.PathChange, all bool, err error) {
	owner, name, _ := strings.Cut(repo.FullName, "/")
	c, resp, err := gh.Repositories.CompareCommits(ctx, owner, name, base, head, &github.ListOptions{PerPage: 1})
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusNotFound {
			return nil, true, nil // an unknown commit: nothing can be ruled out
		}
		return nil, false, fmt.Errorf("compare %s...%s on %s: %w", shortSHA(base), shortSHA(head), repo.FullName, err)
	}
	for _, f := range c.Files {
		pc := gating.PathChange{Path: f.GetFilename(), Commit: head}
		switch f.GetStatus() {
		case "added", "copied":
			pc.Kind = gating.ChangeAdded
		case "removed":
			pc.Kind = gating.ChangeRemoved
		case "renamed":
			pc.Kind, pc.Previous = gating.ChangeRenamed, f.GetPreviousFilename()
		default:
			pc.Kind = gating.ChangeModified
		}
		changes = append(changes, pc)
	}
	return changes, len(c.Files) >= compareFileLimit, nil
}

// anchorsOnPush re-evaluates the anchors of the items whose base branch
// the push moved (CONTRACT.md §3): an anchor the push added, modified,
// removed or renamed is marked stale (and dangling when nothing is left at
// it); an anchor never recorded is recorded at the pushed head. A push to a
// branch no anchored item names costs nothing.
func (m *Mirror) anchorsOnPush(ctx context.Context, repo store.Repo, p *pushPayload, branch string, at time.Time) (string, error) {
	items, err := m.Ledger.AnchoredOn(ctx, repo, branch)
	if err != nil || len(items) == 0 {
		return "", err
	}
	if !isCommitSHA(p.After) {
		return "", nil
	}
	ap := p.anchorPush()
	how := "pushed"
	all := false
	var gh *github.Client
	client := func() (*github.Client, error) {
		if gh == nil {
			c, err := m.GitHub.Installation(repo.Installation)
			if err != nil {
				return nil, err
			}
			gh = c
		}
		return gh, nil
	}
	if ap.truncated {
		c, err := client()
		if err != nil {
			return "", err
		}
		// A forced push also drops commits: what they changed moved too
		// (after...before lists it).
		pairs := [][2]string{{ap.before, ap.after}}
		how = "compared " + shortSHA(ap.before) + "..." + shortSHA(ap.after)
		if ap.forced {
			pairs = append(pairs, [2]string{ap.after, ap.before})
			how = "force-pushed over " + shortSHA(ap.before) + "; " + how
		}
		ap.changes = nil
		for _, pr := range pairs {
			ch, a, err := compareChanges(ctx, c, repo, pr[0], pr[1])
			if err != nil {
				return "", err
			}
			for i := range ch {
				ch[i].Commit = ap.after
			}
			ap.changes = append(ap.changes, ch...)
			all = all || a
		}
	}
	if at.IsZero() {
		at = m.now()
	}
	now := m.now()
	var stale, recorded []string
	for _, it := range items {
		for _, path := range it.Anchors {
			st, known := it.State[path]
			// A push older than the anchor's last validation was already
			// seen by it (GitHub does not keep order).
			if known && !st.ValidatedAt.IsZero() && at.Add(time.Second).Before(st.ValidatedAt) {
				continue
			}
			touches := gating.AnchorTouches(path, ap.changes)
			reason := gating.StaleReason(path, touches)
			if all && len(touches) == 0 {
				reason = fmt.Sprintf("push %s changed more files than GitHub lists (%s)", shortSHA(ap.after), how)
			}
			touched := reason != ""
			if touched && ap.truncated {
				reason += " (" + how + ")"
			}
			// A read at the pushed head: for an anchor never recorded, and
			// for one the push may have removed or brought back.
			needRead := !known || (touched && (all || gating.RemovesUnder(path, touches) || st.Dangling || hasAdd(touches)))
			if !known {
				st = store.AnchorState{Number: it.Number, Path: path, BaseBranch: branch, ValidatedCommit: ap.after, ValidatedAt: now}
			}
			if needRead {
				c, err := client()
				if err != nil {
					return "", err
				}
				blob, err := m.readAnchor(ctx, c, repo, ap.after, path)
				if err != nil {
					return "", err
				}
				if !known {
					st.BlobSHA = blob
				}
				st.Dangling = blob == ""
				if !known && blob == "" && !touched {
					touched, reason = true, fmt.Sprintf("nothing is at %s on %s at %s", path, branch, shortSHA(ap.after))
				}
				if !known {
					recorded = append(recorded, fmt.Sprintf("#%d %s", it.Number, path))
				}
			}
			if touched {
				st.Stale = true
				st.StaleReason = reason
				stale = append(stale, fmt.Sprintf("#%d %s", it.Number, path))
			} else if known {
				continue
			}
			if err := m.Ledger.PutAnchor(ctx, repo.ID, st); err != nil {
				return "", err
			}
		}
	}
	var outs []string
	if len(recorded) > 0 {
		outs = append(outs, "anchors recorded: "+strings.Join(recorded, ", "))
	}
	if len(stale) > 0 {
		outs = append(outs, "stale anchors: "+strings.Join(stale, ", "))
	}
	if len(outs) == 0 {
		return "anchors on " + branch + " untouched", nil
	}
	return strings.Join(outs, "; "), nil
}

func hasAdd(cs []gating.PathChange) bool {
	for _, c := range cs {
		if c.Kind == gating.ChangeAdded || c.Kind == gating.ChangeRenamed {
			return true
		}
	}
	return false
}
