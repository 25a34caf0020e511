// Package mcpapi is warden's MCP endpoint (CONTRACT.md §3): POST /mcp and
// GET /mcp on the public listener, the MCP streamable-HTTP transport of the
// official Go SDK, serving the tools the protocol's agents already call —
// repocontext_remember, _update, _recall, _scan, _forget, _claim,
// _renew_claim, _release_claim, _claim_status, _neighbors, and the binding
// reads repocontext_list_repos, lattice_list_regions and repocontext_related
// — and warden's own backlog_ready, backlog_claim_next and backlog_report.
//
// One implementation, two surfaces: every tool is a request to the agent
// API (internal/agentapi), made in process with the caller's own bearer
// token, and its answer mapped to the protocol's result fields. Roles,
// fences, validation and every refusal are therefore the agent API's; a
// refusal (problem+json with a reason) becomes a tool error carrying the
// same reason. What this package adds is the protocol's vocabulary: keys
// (repo/{repoId}/mem/backlog/issue-N), the fields/addLinks shapes, and the
// protocol's result records.
package mcpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wardenhq/warden/internal/agentapi"
	"github.com/wardenhq/warden/internal/config"
	"github.com/wardenhq/warden/mirror/store"
)

// Options wire the endpoint to the service.
type Options struct {
	// API is the agent API's handler (agentapi.New), whose routes are
	// relative to /api/v1: /repos/{owner}/{repo}/….
	API http.Handler
	// Tokens are WARDEN_API_TOKENS: an MCP request without one of them is
	// refused (401) before any MCP processing.
	Tokens []config.APIToken
	// RepoKeys is WARDEN_MCP_REPOS: repoId -> owner/repo.
	RepoKeys map[string]string
	// Repos lists the repositories warden serves (store.Ledger.Repos): a
	// repoId without a RepoKeys entry names the one whose name it equals.
	Repos func(ctx context.Context) ([]store.Repo, error)
	// Version is reported to clients in the initialize answer.
	Version string
	// SessionTimeout closes a session idle this long (0: 30 minutes).
	SessionTimeout time.Duration
	Log            *slog.Logger
}

// New returns the MCP endpoint, to be mounted at /mcp.
func New(o Options) http.Handler {
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.SessionTimeout <= 0 {
		o.SessionTimeout = 30 * time.Minute
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	s := &service{api: o.API, repoKeys: o.RepoKeys, repos: o.Repos, creds: newCredentials(o.Tokens),
		log: o.Log.With("component", "mcpapi")}
	server := mcp.NewServer(&mcp.Implementation{Name: "warden", Title: "warden backlog ledger", Version: o.Version},
		&mcp.ServerOptions{Instructions: instructions, Logger: s.log})
	s.register(server)
	server.AddReceivingMiddleware(refusalsCarryReasons)
	stream := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{
		SessionTimeout: o.SessionTimeout,
		Logger:         s.log,
		// Every request carries a bearer token a browser does not hold,
		// so DNS rebinding gains an attacker nothing; and warden usually
		// sits behind a proxy on localhost that forwards its public Host.
		DisableLocalhostProtection: true,
		MaxRequestBodyBytes:        agentapi.MaxBody + 64<<10,
	})
	// The SDK's bearer middleware binds each session to the token's name,
	// so a session id presented with another token is refused (403).
	bound := auth.RequireBearerToken(s.verify, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(stream)
	return s.authn(bound)
}

const instructions = `warden's backlog ledger, with the item-store tools of the agent-operated backlog protocol.
Resolve your bindings first: repocontext_list_repos gives {repoId}, lattice_list_regions the routable {homeRegion} values.
Keys are repo/{repoId}/mem/backlog/issue-N (N is the mirrored GitHub issue's number); only the backlog topic is kept.
Claim before you write a claimed item: pass the claim's fencingToken on every repocontext_update, renew with an explicit leaseSeconds, release on the exact token.
Refusals are tool errors whose structured content carries the agent API's problem document; its reason is machine-readable (StaleToken, ClaimRequired, HumanActRequired, role-not-allowed, ...).
backlog_ready answers the ready set with every exclusion and defect; backlog_claim_next claims its best item in one call; repocontext_related an item's blast radius; backlog_report the "where are we" report.`

// service holds what the tools share.
type service struct {
	api      http.Handler
	repoKeys map[string]string
	repos    func(ctx context.Context) ([]store.Repo, error)
	creds    []credential
	log      *slog.Logger
}

// credential is one configured token, kept as a digest (as the agent API
// keeps it) so that comparisons take the same time whatever is presented.
type credential struct {
	digest [sha256.Size]byte
	name   string
	repos  []string
}

func newCredentials(tokens []config.APIToken) []credential {
	out := make([]credential, 0, len(tokens))
	for _, t := range tokens {
		out = append(out, credential{digest: sha256.Sum256([]byte(t.Token)), name: t.Name, repos: append([]string(nil), t.Repos...)})
	}
	return out
}

// bearer reads the token of an Authorization header ("" when there is none).
func bearer(header string) string {
	scheme, tok, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(tok)
}

// authenticate finds the credential of a token, comparing its digest with
// every configured one without stopping at a match.
func (s *service) authenticate(tok string) (*credential, bool) {
	if tok == "" {
		return nil, false
	}
	sum := sha256.Sum256([]byte(tok))
	match := -1
	for i := range s.creds {
		eq := subtle.ConstantTimeCompare(sum[:], s.creds[i].digest[:])
		match = subtle.ConstantTimeSelect(eq, i, match)
	}
	if match < 0 {
		return nil, false
	}
	return &s.creds[match], true
}

// authn refuses a request without a known bearer token (401, the agent
// API's problem document) before the MCP transport reads anything.
func (s *service) authn(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := s.authenticate(bearer(r.Header.Get("Authorization"))); !ok {
			detail := "no bearer token: send Authorization: Bearer <token>"
			if r.Header.Get("Authorization") != "" {
				detail = "the bearer token is not one warden knows"
			}
			h := w.Header()
			h.Set("Content-Type", "application/problem+json")
			h.Set("Cache-Control", "no-store")
			h.Set("WWW-Authenticate", `Bearer realm="warden"`)
			w.WriteHeader(http.StatusUnauthorized)
			json.NewEncoder(w).Encode(agentapi.Problem{Type: "about:blank", Title: http.StatusText(http.StatusUnauthorized),
				Status: http.StatusUnauthorized, Detail: detail, Reason: agentapi.ReasonUnauthenticated})
			return
		}
		if r.Method == http.MethodGet {
			// The event stream outlives the public server's write timeout
			// (60 s); an authenticated stream is kept open until the client
			// or the session goes.
			_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
		}
		next.ServeHTTP(w, r)
	})
}

// tokenRepos is the TokenInfo.Extra key of a token's repository list.
const tokenRepos = "repos"

// verify is the SDK's token verifier: after authn it always succeeds, and
// names the session's user (the token's name) and its repositories.
func (s *service) verify(_ context.Context, tok string, _ *http.Request) (*auth.TokenInfo, error) {
	c, ok := s.authenticate(tok)
	if !ok {
		return nil, auth.ErrInvalidToken
	}
	return &auth.TokenInfo{UserID: c.name, Extra: map[string]any{tokenRepos: c.repos}}, nil
}
