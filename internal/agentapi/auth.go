package agentapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/config"
	"github.com/wardenhq/warden/mirror/store"
)

// credential is one configured API token, kept as a digest so that every
// comparison takes the same time whatever the presented token's length.
type credential struct {
	digest [sha256.Size]byte
	name   string
	role   gating.Role
	repos  []string // empty: every repository
}

func newCredentials(tokens []config.APIToken) []credential {
	out := make([]credential, 0, len(tokens))
	for _, t := range tokens {
		out = append(out, credential{digest: sha256.Sum256([]byte(t.Token)), name: t.Name,
			role: gating.Role(t.Role), repos: append([]string(nil), t.Repos...)})
	}
	return out
}

// authenticate finds the credential for a bearer token. It compares the
// token's digest with every configured one, in constant time and without
// stopping at a match.
func authenticate(creds []credential, header string) (*credential, bool) {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return nil, false
	}
	tok = strings.TrimSpace(tok)
	if tok == "" {
		return nil, false
	}
	sum := sha256.Sum256([]byte(tok))
	match := -1
	for i := range creds {
		eq := subtle.ConstantTimeCompare(sum[:], creds[i].digest[:])
		match = subtle.ConstantTimeSelect(eq, i, match)
	}
	if match < 0 {
		return nil, false
	}
	return &creds[match], true
}

// allows reports whether a credential may act on the repository owner/name.
func (c *credential) allows(fullName string) bool {
	if len(c.repos) == 0 {
		return true
	}
	for _, r := range c.repos {
		if strings.EqualFold(r, fullName) {
			return true
		}
	}
	return false
}

type ctxKey int

const (
	credKey ctxKey = iota
	repoKey
)

func credOf(r *http.Request) *credential { return r.Context().Value(credKey).(*credential) }

func repoOf(r *http.Request) store.Repo { return r.Context().Value(repoKey).(store.Repo) }

func actorOf(r *http.Request) store.Actor {
	c := credOf(r)
	return store.Actor{Role: c.role, Name: c.name}
}

// authn refuses a request without a known bearer token (401).
func (h *handler) authn(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, ok := authenticate(h.creds, r.Header.Get("Authorization"))
		if !ok {
			reason := "no bearer token: send Authorization: Bearer <token>"
			if r.Header.Get("Authorization") != "" {
				reason = "the bearer token is not one warden knows"
			}
			h.fail(w, r, problem(http.StatusUnauthorized, ReasonUnauthenticated, "%s", reason))
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), credKey, c)))
	})
}

// repository resolves {owner}/{repo}: a token limited to other repositories
// is refused first (403, so that it learns nothing about which repositories
// warden serves), then a repository warden does not serve (404).
func (h *handler) repository(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		full := chi.URLParam(r, "owner") + "/" + chi.URLParam(r, "repo")
		if !credOf(r).allows(full) {
			h.fail(w, r, forbidden(ReasonRepoNotAllowed, "this token is limited to other repositories than %s", full))
			return
		}
		repo, err := h.ledger.Repo(r.Context(), full)
		if errors.Is(err, store.ErrNotFound) {
			h.fail(w, r, problem(http.StatusNotFound, ReasonRepoNotServed, "warden does not serve %s (the App is not installed on it)", full))
			return
		}
		if err != nil {
			h.fail(w, r, toProblem(err))
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), repoKey, repo)))
	})
}

// requireRole refuses (403) an actor whose role is not among roles.
func requireRole(r *http.Request, what string, roles ...gating.Role) *Problem {
	role := credOf(r).role
	for _, x := range roles {
		if role == x {
			return nil
		}
	}
	names := make([]string, len(roles))
	for i, x := range roles {
		names[i] = string(x)
	}
	return forbidden(ReasonRoleNotAllowed, "%s needs a %s token; this one is %s", what, strings.Join(names, " or "), role)
}
