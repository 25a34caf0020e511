package mirror

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// roleCalls is the GitHub read of who may do what on the repository.
type roleCalls interface {
	// role is login's role on the repository from GitHub's
	// collaborator-permission endpoint: its role_name (the permission field
	// reports triage as read), else its permission; "none" when GitHub
	// answers 404 (no access).
	role(ctx context.Context, login string) (string, error)
}

// Permissions answers "does login hold triage or more on repo?" from
// GitHub's collaborator-permission endpoint (roleCalls.role), cached for
// ten minutes. A failed lookup refuses: warden fails closed.
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

// Role returns login's role_name on owner/repo ("none" for no access), from
// the cache or else from lookup (GitHub's answer for login on owner/repo).
func (p *Permissions) Role(ctx context.Context, owner, repo, login string, lookup func(ctx context.Context, login string) (string, error)) (string, error) {
	key := strings.ToLower(owner + "/" + repo + "@" + login)
	p.mu.Lock()
	e, ok := p.cache[key]
	p.mu.Unlock()
	if ok && p.Now().Sub(e.at) < p.TTL {
		return e.role, nil
	}
	role, err := lookup(ctx, login)
	if err != nil {
		return "", fmt.Errorf("look up %s's role on %s/%s: %w", login, owner, repo, err)
	}
	p.mu.Lock()
	p.cache[key] = permEntry{role: role, at: p.Now()}
	p.mu.Unlock()
	return role, nil
}

// person is who did an act, as warden judged it (gating.Judge), and why
// the act is not a human's with triage or more when it is not.
type person struct {
	gating.Identity
	Standing gating.Standing
	Human    bool // Standing is StandingHuman
	Why      string
}

// agent reports whether the act was an agent's (warden's own App counts:
// it is a bot).
func (p person) agent() bool {
	return p.Standing == gating.StandingAgent || p.Standing == gating.StandingWarden
}

// who gathers what warden knows of login (of account type typ) acting on
// repo and judges it, once, by gating.Judge (CONTRACT.md §4): warden's own
// login, the configured agents (WARDEN_AGENTS and the agents setting), the
// logins recorded as agents (one read) and, when withRole and the rule
// needs it, the repository role (gating.NeedsRole; one cached GitHub call,
// a failed lookup leaves it unknown). err is the recorded-agent lookup's
// failure: the person is then StandingUnknown (fail closed), and a caller
// that must not guess retries.
func (m *Mirror) who(ctx context.Context, repo store.Repo, login, typ string, withRole bool) (person, error) {
	id := gating.Identity{Actor: gating.Actor{Login: login, Type: typ}}
	id.Warden = login != "" && strings.EqualFold(login, m.botLogin())
	rec, err := m.Acts.IsRecorded(ctx, repo.ID, login, store.AgentRecorded)
	if err != nil {
		m.Log.Warn("recorded-agent lookup failed; the act is not a human's (fail closed)", "login", login, "err", err)
		err = fmt.Errorf("is %s a recorded agent of %s: %w", login, repo.FullName, err)
	} else {
		id.Recorded, id.RecordedKnown = rec, true
	}
	agents := m.agents(ctx, repo)
	if withRole && gating.NeedsRole(id, agents) {
		if role, rerr := m.role(ctx, repo, login); rerr != nil {
			m.Log.Warn("permission lookup failed; treating the act as not a human's (fail closed)", "login", login, "repo", repo.FullName, "err", rerr)
		} else {
			id.Role, id.RoleKnown = role, true
		}
	}
	p := person{Identity: id}
	p.Standing, p.Why = gating.Judge(id, agents)
	p.Human = p.Standing == gating.StandingHuman
	return p, err
}

// judge is who for a human act: the role is looked up when needed, and a
// recorded agent acting as a User is recorded (once) as a shared identity,
// and refused.
func (m *Mirror) judge(ctx context.Context, repo store.Repo, login, typ string) person {
	p, _ := m.who(ctx, repo, login, typ, true)
	if gating.SharedIdentity(p.Identity) {
		if _, err := m.Acts.RecordAgent(ctx, repo.ID, login, store.SharedIdentity,
			fmt.Sprintf("%s posted backlog-worker markers and then acted as a human", login), m.now()); err != nil {
			m.Log.Warn("recording a shared identity failed", "login", login, "err", err)
		}
	}
	return p
}

// agents are the configured agent logins for repo: WARDEN_AGENTS and the
// repository's agents setting.
func (m *Mirror) agents(ctx context.Context, repo store.Repo) []string {
	return append(append([]string(nil), m.Agents...), m.settings(ctx, repo).Agents...)
}

// role is login's role_name on the repository (cached; an error fails the
// rule that asked, closed).
func (m *Mirror) role(ctx context.Context, repo store.Repo, login string) (string, error) {
	c, err := m.callsFor(repo)
	if err != nil {
		return "", err
	}
	owner, name, _ := strings.Cut(repo.FullName, "/")
	return m.Perms.Role(ctx, owner, name, login, c.role)
}

// botLogin is warden's own bot login, when known.
func (m *Mirror) botLogin() string {
	if m.Bot == nil {
		return ""
	}
	return m.Bot()
}
