package mirror

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/google/go-github/v66/github"
	"github.com/wardenhq/warden/mirror/store"
)

// compareFileLimit is how many files GitHub's compare lists at most: a
// compare that lists this many may have left some out.
const compareFileLimit = 300

func isCommitSHA(s string) bool {
	if len(s) != 40 {
		return false
	}
	for _, r := range s {
		if !strings.ContainsRune("0123456789abcdef", r) {
			return false
		}
	}
	return true
}

// readAnchor reads path at ref with one contents GET, cached per commit
// when ref is a commit SHA: the blob SHA of a file, DirBlob for a
// non-empty directory, "" when nothing is there.
func (m *Mirror) readAnchor(ctx context.Context, gh *github.Client, repo store.Repo, ref, path string) (string, error) {
	path = strings.TrimSuffix(path, "/")
	cache := isCommitSHA(ref)
	if cache {
		if b, ok, err := m.Ledger.CachedBlob(ctx, repo.ID, ref, path); err != nil {
			return "", err
		} else if ok {
			return b, nil
		}
	}
	owner, name, _ := strings.Cut(repo.FullName, "/")
	blob := ""
	if path == "." || path == "" {
		blob = store.DirBlob
	} else {
		fc, dir, resp, err := gh.Repositories.GetContents(ctx, owner, name, path, &github.RepositoryContentGetOptions{Ref: ref})
		switch {
		case err != nil && resp != nil && resp.StatusCode == http.StatusNotFound:
			// Nothing at the path, or no such branch: either way no anchor.
		case err != nil:
			return "", fmt.Errorf("read anchor %s of %s at %s: %w", path, repo.FullName, shortSHA(ref), err)
		case fc != nil:
			blob = fc.GetSHA()
		case len(dir) > 0:
			blob = store.DirBlob
		}
	}
	if cache {
		if err := m.Ledger.CacheBlob(ctx, repo.ID, ref, path, blob); err != nil {
			return "", err
		}
	}
	return blob, nil
}

// branchMissing reports whether branch is absent from the repository (one
// branch read).
func branchMissing(ctx context.Context, gh *github.Client, repo store.Repo, branch string) (bool, error) {
	owner, name, _ := strings.Cut(repo.FullName, "/")
	_, resp, err := gh.Repositories.GetBranch(ctx, owner, name, branch, 0)
	if err != nil && resp != nil && resp.StatusCode == http.StatusNotFound {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("read branch %s of %s: %w", branch, repo.FullName, err)
	}
	return false, nil
}

// AnchorsWritten follows a write of an item's anchoredTo links (the agent
// API's PATCH, and POST /items for the anchors an item is made with): each
// added anchor is re-validated — read on the item's base branch (one
// contents read), its blob SHA recorded and its stale and dangling marks
// cleared (dangling and stale at once if nothing is there) — and each
// removed one forgotten. On a base branch that does not exist yet (one
// branch read tells) the anchor is left unrecorded, as is one whose read
// failed (not stale): the next push to the branch records it.
func (m *Mirror) AnchorsWritten(ctx context.Context, repo store.Repo, it store.Item, added, removed []string) error {
	base := store.BaseOf(it.Tags, repo.DefaultBranch)
	n := it.ID.Number()
	for _, p := range removed {
		if !slices.Contains(added, p) {
			if err := m.Ledger.DropAnchor(ctx, repo.ID, n, p); err != nil {
				return err
			}
		}
	}
	if len(added) == 0 {
		return nil
	}
	gh, ghErr := m.GitHub.Installation(repo.Installation)
	var firstErr error
	var branchGone *bool
	for _, p := range added {
		blob, err := "", ghErr
		if err == nil {
			blob, err = m.readAnchor(ctx, gh, repo, base, p)
		}
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			if derr := m.Ledger.DropAnchor(ctx, repo.ID, n, p); derr != nil {
				return derr
			}
			continue
		}
		if blob == "" {
			if branchGone == nil {
				gone, err := branchMissing(ctx, gh, repo, base)
				if err != nil && firstErr == nil {
					firstErr = err
				}
				gone = gone || err != nil
				branchGone = &gone
			}
			if *branchGone {
				// The base branch does not exist yet (an epic's branch not
				// pushed): nothing can be judged; the first push to it
				// records the anchor.
				if err := m.Ledger.DropAnchor(ctx, repo.ID, n, p); err != nil {
					return err
				}
				continue
			}
		}
		st := store.AnchorState{Number: n, Path: p, BaseBranch: base, BlobSHA: blob, ValidatedCommit: base, ValidatedAt: m.now()}
		if blob == "" {
			st.Stale, st.Dangling, st.StaleReason = true, true, fmt.Sprintf("nothing is at %s on %s when the link was written", p, base)
		}
		if err := m.Ledger.PutAnchor(ctx, repo.ID, st); err != nil {
			return err
		}
	}
	return firstErr
}
