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

// AnchorsWritten follows a write of an item's anchoredTo links (the agent
// API's PATCH): each added anchor is re-validated — read on the item's base
// branch (one contents read), its blob SHA recorded and its stale and
// dangling marks cleared (dangling again if nothing is there) — and each
// removed one forgotten. A failed read leaves the anchor unrecorded (not
// stale): the next push to the branch records it.
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
