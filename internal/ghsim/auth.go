package ghsim

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/golang-jwt/jwt/v4"
)

type token struct {
	value   string
	install *Installation
	expires time.Time
}

// caller is who a request authenticated as.
type caller struct {
	known        bool
	app          bool // the App's JWT
	installation int64
	inst         *Installation
	credential   string // for ETag scoping
	err          string // why authentication failed
}

type ctxKey int

const callerKey ctxKey = 1

func callerOf(r *http.Request) caller {
	c, _ := r.Context().Value(callerKey).(caller)
	return c
}

// identify authenticates a request: an App JWT (RS256, iss = the App's id,
// at most 10 minutes long, not expired) or an installation token.
func (s *Sim) identify(r *http.Request) caller {
	auth := r.Header.Get("Authorization")
	scheme, cred, _ := strings.Cut(auth, " ")
	cred = strings.TrimSpace(cred)
	switch strings.ToLower(scheme) {
	case "bearer":
		if strings.Count(cred, ".") == 2 {
			if err := s.verifyJWT(cred); err != "" {
				return caller{err: err}
			}
			return caller{known: true, app: true, installation: 0, credential: "jwt"}
		}
		fallthrough
	case "token":
		s.mu.Lock()
		defer s.mu.Unlock()
		t := s.tokens[cred]
		if t == nil {
			return caller{err: "Bad credentials"}
		}
		if !s.now().Before(t.expires) {
			return caller{err: "Bad credentials"}
		}
		return caller{known: true, installation: t.install.ID, inst: t.install, credential: cred}
	case "":
		return caller{err: "Requires authentication"}
	}
	return caller{err: "Bad credentials"}
}

// verifyJWT judges an App JWT on real time, not on the simulator's clock
// (Options.Now, which a test may move to stand for hours or days passing):
// the App signs its JWTs on its own real clock, and GitHub checks them on
// its real one, so a moved clock must not expire every JWT the App signs.
func (s *Sim) verifyJWT(raw string) string {
	now := time.Now()
	tok, err := jwt.ParseWithClaims(raw, &jwt.RegisteredClaims{}, func(t *jwt.Token) (any, error) {
		if t.Method != jwt.SigningMethodRS256 {
			return nil, fmt.Errorf("unexpected signing method %v", t.Header["alg"])
		}
		return &s.key.PublicKey, nil
	}, jwt.WithoutClaimsValidation())
	if err != nil || !tok.Valid {
		return "A JSON web token could not be decoded"
	}
	c := tok.Claims.(*jwt.RegisteredClaims)
	if c.Issuer != fmt.Sprint(s.opt.AppID) {
		return "A JSON web token could not be decoded"
	}
	if c.ExpiresAt == nil || c.IssuedAt == nil {
		return "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires"
	}
	if !now.Before(c.ExpiresAt.Time) {
		return "'Expiration time' claim ('exp') is too far in the past"
	}
	if c.ExpiresAt.Time.Sub(c.IssuedAt.Time) > 10*time.Minute+time.Second {
		return "'Expiration time' claim ('exp') is too far in the future"
	}
	if c.IssuedAt.Time.After(now.Add(60 * time.Second)) {
		return "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued"
	}
	return ""
}

func (s *Sim) requireJWT(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := s.identify(r)
		if !c.known {
			writeError(w, http.StatusUnauthorized, c.err)
			return
		}
		if !c.app {
			writeError(w, http.StatusUnauthorized, "A JSON web token could not be decoded")
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey, c)))
	})
}

func (s *Sim) requireToken(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := s.identify(r)
		if !c.known {
			writeError(w, http.StatusUnauthorized, c.err)
			return
		}
		if c.app {
			// An App JWT reaches only the App's own endpoints.
			writeError(w, http.StatusForbidden, "Resource not accessible by integration")
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey, c)))
	})
}

type repoKey struct{}

// requireRepo resolves {owner}/{repo}; a repository outside the token's
// installation is 404, as GitHub hides what a credential cannot see.
func (s *Sim) requireRepo(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		full := strings.ToLower(chi.URLParam(r, "owner") + "/" + chi.URLParam(r, "repo"))
		s.mu.Lock()
		repo := s.repos[full]
		c := callerOf(r)
		ok := repo != nil && c.inst != nil && c.inst.Repos[repo.ID] != nil
		s.mu.Unlock()
		if !ok {
			writeError(w, http.StatusNotFound, "Not Found")
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), repoKey{}, repo)))
	})
}

func repoOf(r *http.Request) *Repo {
	rp, _ := r.Context().Value(repoKey{}).(*Repo)
	return rp
}

// actorOf is the account a token-authenticated request acts as: the App's bot.
func (s *Sim) actorOf(r *http.Request) *User { return s.bot }

func (s *Sim) appRoutes(r chi.Router) {
	r.Get("/app", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		writeJSON(w, http.StatusOK, s.appJSON())
	})
	r.Get("/app/installations", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		ids := sortedInstallIDs(s.installs)
		lo, hi := paginate(w, r, len(ids))
		out := []any{}
		for _, id := range ids[lo:hi] {
			out = append(out, s.installationJSON(s.installs[id], true))
		}
		writeJSON(w, http.StatusOK, out)
	})
	r.Get("/app/installations/{id}", func(w http.ResponseWriter, r *http.Request) {
		id, _ := intParam(r, "id")
		s.mu.Lock()
		defer s.mu.Unlock()
		in := s.installs[id]
		if in == nil {
			writeError(w, http.StatusNotFound, "Not Found")
			return
		}
		writeJSON(w, http.StatusOK, s.installationJSON(in, true))
	})
	r.Post("/app/installations/{id}/access_tokens", func(w http.ResponseWriter, r *http.Request) {
		id, _ := intParam(r, "id")
		s.mu.Lock()
		defer s.mu.Unlock()
		in := s.installs[id]
		if in == nil {
			writeError(w, http.StatusNotFound, "Not Found")
			return
		}
		if in.Suspended {
			writeError(w, http.StatusForbidden, "This installation has been suspended")
			return
		}
		b := make([]byte, 18)
		rand.Read(b)
		t := &token{value: "ghs_" + hex.EncodeToString(b), install: in, expires: s.now().Add(s.opt.TokenTTL)}
		s.tokens[t.value] = t
		repos := []any{}
		for _, id := range sortedRepoIDs(in.Repos) {
			repos = append(repos, s.repoJSON(in.Repos[id]))
		}
		writeJSON(w, http.StatusCreated, map[string]any{
			"token": t.value, "expires_at": t.expires.Format(time.RFC3339),
			"permissions":          appPermissions(),
			"repository_selection": "selected", "repositories": repos,
		})
	})
	r.Get("/repos/{owner}/{repo}/installation", func(w http.ResponseWriter, r *http.Request) {
		full := strings.ToLower(chi.URLParam(r, "owner") + "/" + chi.URLParam(r, "repo"))
		s.mu.Lock()
		defer s.mu.Unlock()
		repo := s.repos[full]
		if repo == nil || repo.Install == nil {
			writeError(w, http.StatusNotFound, "Not Found")
			return
		}
		writeJSON(w, http.StatusOK, s.installationJSON(repo.Install, true))
	})
	s.hookRoutes(r)
}

func appPermissions() map[string]string {
	return map[string]string{"issues": "write", "pull_requests": "write", "checks": "write", "contents": "read", "metadata": "read"}
}

func appEvents() []string {
	return []string{"issues", "issue_comment", "pull_request", "pull_request_review_comment", "check_suite", "check_run", "push", "label", "sub_issues"}
}

func (s *Sim) getRateLimit(w http.ResponseWriter, r *http.Request) {
	c := callerOf(r)
	s.mu.Lock()
	rs := s.rateLocked(c.installation)
	s.mu.Unlock()
	core := map[string]any{"limit": rs.limit, "remaining": rs.remaining, "used": rs.limit - rs.remaining, "reset": rs.reset.Unix(), "resource": "core"}
	search := map[string]any{"limit": 30, "remaining": 30, "used": 0, "reset": s.now().Add(time.Minute).Unix(), "resource": "search"}
	writeJSON(w, http.StatusOK, map[string]any{"resources": map[string]any{"core": core, "search": search}, "rate": core})
}

func (s *Sim) getRepo(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	writeJSON(w, http.StatusOK, s.repoJSON(repoOf(r)))
}
