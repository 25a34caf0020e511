package mirror

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/go-github/v66/github"
)

// Permissions answers "does login hold triage or more on repo?" from
// GitHub's collaborator-permission endpoint (its role_name: the permission
// field reports triage as read), cached for ten minutes. A failed lookup
// refuses: warden fails closed.
type Permissions struct {
	TTL time.Duration
	Now func() time.Time

	mu    sync.Mutex
	cache map[string]permEntry
}

type permEntry struct {
	role string
	at   time.Time
}

// NewPermissions returns a cache with the contract's ten-minute lifetime.
func NewPermissions() *Permissions {
	return &Permissions{TTL: 10 * time.Minute, Now: time.Now, cache: map[string]permEntry{}}
}

// Role returns login's role_name on owner/repo ("none" for no access).
func (p *Permissions) Role(ctx context.Context, gh *github.Client, owner, repo, login string) (string, error) {
	key := strings.ToLower(owner + "/" + repo + "@" + login)
	p.mu.Lock()
	e, ok := p.cache[key]
	p.mu.Unlock()
	if ok && p.Now().Sub(e.at) < p.TTL {
		return e.role, nil
	}
	perm, resp, err := gh.Repositories.GetPermissionLevel(ctx, owner, repo, login)
	role := ""
	switch {
	case err == nil:
		role = perm.GetRoleName()
		if role == "" {
			role = perm.GetPermission()
		}
	case resp != nil && resp.StatusCode == http.StatusNotFound:
		role = "none"
	default:
		return "", fmt.Errorf("look up %s's role on %s/%s: %w", login, owner, repo, err)
	}
	p.mu.Lock()
	p.cache[key] = permEntry{role: role, at: p.Now()}
	p.mu.Unlock()
	return role, nil
}
