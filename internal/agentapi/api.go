// Package agentapi is warden's agent API (CONTRACT.md §9), mounted at
// /api/v1 on the public listener: the backlog ledger over HTTP for the
// project-manager agent, worker agents and people's CLIs, each with a bearer
// token that carries a role (§4).
//
// Every answer is JSON in camelCase; every error is application/problem+json
// with a machine-readable reason. Item creation opens the GitHub issue first
// (identity is mirroring) and is safe to retry: a retry after a failure
// between the issue and the ledger row adopts the issue instead of opening a
// second one.
package agentapi

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/config"
	"github.com/wardenhq/warden/internal/db"
	"github.com/wardenhq/warden/mirror/store"
)

// Options are the repository settings the API needs (until per-repository
// settings exist, one set for every repository). Zero values take the
// contract's defaults.
type Options struct {
	// ItemLabel marks an issue as a backlog item (default "backlog").
	ItemLabel string
	// AdmissionLabel is the admission gate (default "needs-specification").
	AdmissionLabel string
	// DefaultPriority and DefaultPhase fill a missing priority: or phase:
	// tag on create and adopt (defaults "P2" and "implementation").
	DefaultPriority string
	DefaultPhase    string
	// Region is WARDEN_REGION: a missing homeRegion: tag takes it (default
	// "local").
	Region string
	// DryRun reports whether a repository is in dry_run; POST /items and
	// /items/adopt are then refused (they would write to GitHub). Nil: never.
	DryRun func(store.Repo) bool
	// RepoKeys maps the repoId of protocol keys (repo/{repoId}/mem/…) to
	// owner/repo (WARDEN_MCP_REPOS). A key's repoId may also be the
	// repository's numeric GitHub id.
	RepoKeys map[string]string
	// Settings, when set, gives a repository's settings
	// (.github/backlog.yml); its labels, defaults and dry_run then take the
	// place of ItemLabel, AdmissionLabel, DefaultPriority, DefaultPhase and
	// DryRun (empty values fall back to them).
	Settings func(ctx context.Context, r store.Repo) gating.Settings
	// Admissions records the admission act of an item a human token made
	// (CONTRACT.md §4: a human token creates admitted items); *store.Acts.
	// Nil: not recorded (the item then reads admission-unrecorded).
	Admissions AdmissionRecorder
	// Writes, when set, is told of every claim, release and update the API
	// made (the mirror brings GitHub in step: claim markers under
	// post_markers, parking when a release leaves an item poisoned, the
	// parked label and a new epoch when a human token parks or unparks).
	// It runs after the ledger's write and cannot undo it.
	Writes WriteObserver
	// Locks serialise the creates that share a request key, across every
	// replica (*db.DB); nil: within this process only (&db.Local{}).
	Locks Locker
}

// Locker takes named locks (*db.DB across replicas, *db.Local in one
// process).
type Locker interface {
	Lock(ctx context.Context, name string) (release func(), err error)
}

// WriteObserver hears of the API's ledger writes (*mirror.Mirror).
type WriteObserver interface {
	AfterClaim(ctx context.Context, repo store.Repo, id gating.ItemID, res store.ClaimResult, purpose string)
	AfterRelease(ctx context.Context, repo store.Repo, id gating.ItemID)
	AfterUpdate(ctx context.Context, repo store.Repo, before, after store.Item, actor store.Actor)
}

// AdmissionRecorder records a human's admission act (*store.Acts).
type AdmissionRecorder interface {
	RecordAdmission(ctx context.Context, repoID int64, number int, adm store.Admission) error
}

// repoSettings are the settings one request works with.
type repoSettings struct {
	itemLabel, admissionLabel string
	priority, phase           string
	dryRun                    bool
}

func (h *handler) settings(ctx context.Context, r store.Repo) repoSettings {
	s := repoSettings{itemLabel: h.opt.ItemLabel, admissionLabel: h.opt.AdmissionLabel,
		priority: h.opt.DefaultPriority, phase: h.opt.DefaultPhase, dryRun: h.opt.DryRun(r)}
	if h.opt.Settings == nil {
		return s
	}
	rs := h.opt.Settings(ctx, r)
	pick := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	pick(&s.itemLabel, rs.ItemLabel)
	pick(&s.admissionLabel, rs.AdmissionLabel)
	pick(&s.priority, rs.DefaultPriority)
	pick(&s.phase, rs.DefaultPhase)
	s.dryRun = s.dryRun || rs.DryRun
	return s
}

func (o *Options) defaults() {
	if o.ItemLabel == "" {
		o.ItemLabel = "backlog"
	}
	if o.AdmissionLabel == "" {
		o.AdmissionLabel = "needs-specification"
	}
	if o.DefaultPriority == "" {
		o.DefaultPriority = "P2"
	}
	if o.DefaultPhase == "" {
		o.DefaultPhase = "implementation"
	}
	if o.Region == "" {
		o.Region = "local"
	}
	if o.DryRun == nil {
		o.DryRun = func(store.Repo) bool { return false }
	}
}

// ledger is the part of *store.Ledger the API uses (a seam for tests that
// inject failures).
type ledger interface {
	Repo(ctx context.Context, fullName string) (store.Repo, error)
	Validate(ctx context.Context, repoID int64, in store.NewItem, actor store.Actor, o store.WriteOptions) error
	Create(ctx context.Context, repoID int64, in store.NewItem, actor store.Actor, o store.WriteOptions) (store.Item, error)
	Get(ctx context.Context, repoID int64, id gating.ItemID) (store.Item, error)
	List(ctx context.Context, repoID int64, after int, limit int) ([]store.Item, error)
	Update(ctx context.Context, repoID int64, id gating.ItemID, p store.Patch, actor store.Actor, o store.WriteOptions) (store.Item, error)
	Forget(ctx context.Context, repoID int64, id gating.ItemID, token *int64, actor store.Actor) error
	Claim(ctx context.Context, repoID int64, id gating.ItemID, req store.ClaimRequest, actor store.Actor) (store.ClaimResult, error)
	RenewWith(ctx context.Context, repoID int64, id gating.ItemID, req store.RenewRequest, actor store.Actor) (store.ClaimResult, error)
	ReleaseWith(ctx context.Context, repoID int64, id gating.ItemID, req store.ReleaseRequest, actor store.Actor) (store.ReleaseResult, error)
	ClaimNext(ctx context.Context, repoID int64, ids []gating.ItemID, req store.ClaimRequest, actor store.Actor) (store.NextResult, error)
	Status(ctx context.Context, repoID int64, id gating.ItemID) (store.ClaimStatus, error)
	Grants(ctx context.Context, repoID int64, id gating.ItemID) ([]store.Grant, error)
	ClaimSnapshot(ctx context.Context, repoID int64, id gating.ItemID) (*store.Snapshot, error)
	Snapshot(ctx context.Context, repoID int64) (*store.Snapshot, error)
	Report(ctx context.Context, rs *store.Snapshot, r gating.Result) (gating.Report, error)
	RecordIssueState(ctx context.Context, repoID int64, number int, st store.IssueState) (bool, error)
	TrailComments(ctx context.Context, repoID int64, id gating.ItemID) ([]store.TrailRecord, error)
}

var _ ledger = (*store.Ledger)(nil)

type handler struct {
	ledger ledger
	gh     GitHub
	creds  []credential
	opt    Options
	log    *slog.Logger
	now    func() time.Time

	locks  Locker
	recent *recentKeys
	// shuffle jitters POST /ready/claim's candidates (rand.Shuffle).
	shuffle func(n int, swap func(i, j int))
}

// New returns the agent API over the ledger, to be mounted at /api/v1
// (routes are relative: /repos/{owner}/{repo}/items…). gh makes the GitHub
// calls (AppGitHub over the service's App); tokens are WARDEN_API_TOKENS.
func New(ledger *store.Ledger, gh GitHub, tokens []config.APIToken, o Options, log *slog.Logger) http.Handler {
	return newHandler(ledger, gh, tokens, o, log)
}

func newHandler(l ledger, gh GitHub, tokens []config.APIToken, o Options, log *slog.Logger) http.Handler {
	o.defaults()
	if log == nil {
		log = slog.Default()
	}
	h := &handler{ledger: l, gh: gh, creds: newCredentials(tokens), opt: o, log: log.With("component", "agentapi"),
		now: time.Now, recent: newRecentKeys(4096), shuffle: rand.Shuffle}
	h.locks = o.Locks
	if h.locks == nil {
		h.locks = &db.Local{}
	}
	return h.routes()
}

func (h *handler) routes() http.Handler {
	r := chi.NewRouter()
	r.Use(h.recoverer, h.authn)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		h.fail(w, r, problem(http.StatusNotFound, ReasonNotFound, "no such route: %s %s", r.Method, r.URL.Path))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		h.fail(w, r, problem(http.StatusMethodNotAllowed, ReasonMethod, "%s is not allowed on %s", r.Method, r.URL.Path))
	})
	r.Get("/regions", h.regions)
	r.Route("/repos/{owner}/{repo}", func(r chi.Router) {
		r.Use(h.repository)
		r.Post("/items", h.createItem)
		r.Post("/items/adopt", h.adoptItem)
		r.Get("/items", h.listItems)
		r.Get("/items/{id}", h.getItem)
		r.Patch("/items/{id}", h.patchItem)
		r.Delete("/items/{id}", h.deleteItem)
		r.Post("/items/{id}/claim", h.claim)
		r.Get("/items/{id}/claim", h.claimStatus)
		r.Post("/items/{id}/renew", h.renew)
		r.Post("/items/{id}/release", h.release)
		r.Get("/ready", h.ready)
		r.Post("/ready/claim", h.claimNext)
		r.Get("/report", h.report)
		r.Get("/related", h.related)
	})
	return r
}

func (h *handler) fail(w http.ResponseWriter, r *http.Request, p *Problem) {
	writeProblem(w, r, h.log, p)
}

func (h *handler) failErr(w http.ResponseWriter, r *http.Request, err error) {
	h.failWrite(w, r, err, nil, "this write")
}

func (h *handler) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				h.log.Error("agent API handler panicked", "method", r.Method, "path", r.URL.Path, "panic", v)
				h.fail(w, r, problem(http.StatusInternalServerError, ReasonInternal, "warden could not complete the request; see its log"))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// recentKeys remembers, per request key, the item it created and the
// request's fingerprint (a bounded map; GitHub's issue marker is the durable
// record).
type recentKeys struct {
	mu    sync.Mutex
	max   int
	order []string
	m     map[string]recentEntry
}

type recentEntry struct {
	number      int
	url         string
	fingerprint string
}

func newRecentKeys(max int) *recentKeys {
	return &recentKeys{max: max, m: map[string]recentEntry{}}
}

func (c *recentKeys) get(key string) (recentEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	return e, ok
}

func (c *recentKeys) put(key string, e recentEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[key]; !ok {
		c.order = append(c.order, key)
	}
	c.m[key] = e
	for len(c.order) > c.max {
		delete(c.m, c.order[0])
		c.order = c.order[1:]
	}
}
