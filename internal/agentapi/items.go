package agentapi

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/wardenhq/warden/app"
	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror"
	"github.com/wardenhq/warden/mirror/store"
)

// ItemView is an item as the API shows it.
type ItemView struct {
	ID         gating.ItemID `json:"id"`
	Number     int           `json:"number"`
	Title      string        `json:"title"`
	Body       string        `json:"body"`
	Author     string        `json:"author"`
	Provenance string        `json:"provenance"`
	CreatedAt  string        `json:"createdAt"`
	UpdatedAt  string        `json:"updatedAt"`
	Tags       []string      `json:"tags"`
	Links      []gating.Link `json:"links"`
}

// ViewOf is an item as the API (and the CLI's --json) shows it: tags and
// links never null, times in the protocol's UTC format.
func ViewOf(it store.Item) ItemView {
	v := ItemView{ID: it.ID, Number: it.ID.Number(), Title: it.Title, Body: it.Body, Author: it.Author,
		Provenance: it.Provenance, Tags: it.Tags, Links: it.Links}
	if !it.CreatedAt.IsZero() {
		v.CreatedAt = store.Timestamp(it.CreatedAt)
	}
	if !it.UpdatedAt.IsZero() {
		v.UpdatedAt = store.Timestamp(it.UpdatedAt)
	}
	if v.Tags == nil {
		v.Tags = []string{}
	}
	if v.Links == nil {
		v.Links = []gating.Link{}
	}
	return v
}

// ItemDetail is GET /items/{id}: the item with its attempts, claim status
// and link findings.
type ItemDetail struct {
	ItemView
	// Attempts counts this epoch's attempts (since the last human unpark):
	// custody changes counted from the comment trail, floored by the grant
	// log; LifetimeAttempts every attempt.
	Attempts         int `json:"attempts"`
	LifetimeAttempts int `json:"lifetimeAttempts"`
	// Claim is the claim status; its state is held, lapsed (quarantined on
	// evidence of work), abandoned, released, or "" when never claimed.
	Claim store.ClaimStatus `json:"claim"`
	// Stale is true when an anchoredTo target moved on the item's base
	// branch since the link was written (StaleLinks names them); re-validate
	// the specification and write the link again. DanglingLinks are links
	// to nothing: targets that are not items, and anchors with nothing left
	// at their path (those are stale too).
	Stale         bool          `json:"stale"`
	StaleLinks    []gating.Link `json:"staleLinks"`
	DanglingLinks []gating.Link `json:"danglingLinks"`
}

// ItemPage is GET /items.
type ItemPage struct {
	Items      []ItemView `json:"items"`
	NextCursor *string    `json:"nextCursor"`
}

func (h *handler) pathID(w http.ResponseWriter, r *http.Request) (gating.ItemID, bool) {
	id, p := itemID(chi.URLParam(r, "id"))
	if p != nil {
		h.fail(w, r, p)
		return "", false
	}
	return id, true
}

func (h *handler) listItems(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	after, p := decodeCursor(q.Get("cursor"))
	if p != nil {
		h.fail(w, r, p)
		return
	}
	limit, p := parseLimit(q.Get("limit"))
	if p != nil {
		h.fail(w, r, p)
		return
	}
	items, err := h.ledger.List(r.Context(), repoOf(r).ID, after, limit)
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	page := ItemPage{Items: make([]ItemView, 0, len(items))}
	for _, it := range items {
		page.Items = append(page.Items, ViewOf(it))
	}
	// A full page may have more behind it; the last page may be empty.
	if len(items) >= limit && len(items) > 0 {
		c := encodeCursor(items[len(items)-1].ID.Number())
		page.NextCursor = &c
	}
	writeJSON(w, http.StatusOK, page)
}

func (h *handler) getItem(w http.ResponseWriter, r *http.Request) {
	id, ok := h.pathID(w, r)
	if !ok {
		return
	}
	ctx, repo := r.Context(), repoOf(r)
	it, err := h.ledger.Get(ctx, repo.ID, id)
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	d, err := Describe(ctx, h.ledger, repo.ID, it)
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// ItemReader is what Describe reads (*store.Ledger).
type ItemReader interface {
	Get(ctx context.Context, repoID int64, id gating.ItemID) (store.Item, error)
	Status(ctx context.Context, repoID int64, id gating.ItemID) (store.ClaimStatus, error)
	ClaimSnapshot(ctx context.Context, repoID int64, id gating.ItemID) (*store.Snapshot, error)
}

// Describe is GET /items/{id}'s answer for an item: its claim status,
// attempts (this epoch's and its lifetime's), its stale anchors (moved on
// its base branch, as push deliveries recorded them) and its dangling links
// (targets that are not items, anchors with nothing left at their path).
func Describe(ctx context.Context, l ItemReader, repoID int64, it store.Item) (ItemDetail, error) {
	d := ItemDetail{ItemView: ViewOf(it), StaleLinks: []gating.Link{}, DanglingLinks: []gating.Link{}}
	st, err := l.Status(ctx, repoID, it.ID)
	if err != nil {
		return d, err
	}
	d.Claim = st
	rs, err := l.ClaimSnapshot(ctx, repoID, it.ID)
	if err != nil {
		return d, err
	}
	d.Attempts, d.LifetimeAttempts = rs.Attempts(it.ID)
	for _, a := range rs.StaleAnchors[it.ID] {
		lk := gating.Link{Rel: gating.AnchoredTo, Target: a.Path}
		d.StaleLinks = append(d.StaleLinks, lk)
		if a.Dangling {
			d.DanglingLinks = append(d.DanglingLinks, lk)
		}
	}
	d.Stale = len(d.StaleLinks) > 0
	seen := map[string]bool{}
	for _, link := range it.Links {
		if link.Rel == gating.AnchoredTo || link.Rel == gating.Claims {
			continue
		}
		exists, ok := seen[link.Target]
		if !ok {
			_, err := l.Get(ctx, repoID, gating.ItemID(link.Target))
			switch {
			case err == nil:
				exists = true
			case errors.Is(err, store.ErrNotFound):
				exists = false
			default:
				return d, err
			}
			seen[link.Target] = exists
		}
		if !exists {
			d.DanglingLinks = append(d.DanglingLinks, link)
		}
	}
	return d, nil
}

// patchRequest is PATCH /items/{id}.
type patchRequest struct {
	Title        *string  `json:"title"`
	Body         *string  `json:"body"`
	Author       *string  `json:"author"`
	Provenance   *string  `json:"provenance"`
	AddTags      []string `json:"addTags"`
	RemoveTags   []string `json:"removeTags"`
	AddLinks     []linkIn `json:"addLinks"`
	RemoveLinks  []linkIn `json:"removeLinks"`
	FencingToken *int64   `json:"fencingToken"`
	// Question is what a park (addTags state:parked) asks its ruling owner:
	// required of a worker's park, optional for a pm's or human's; warden
	// posts it in the park comment on the item's issue.
	Question *string `json:"question"`
}

func (h *handler) patchItem(w http.ResponseWriter, r *http.Request) {
	id, ok := h.pathID(w, r)
	if !ok {
		return
	}
	ctx, repo, actor := r.Context(), repoOf(r), actorOf(r)
	var req patchRequest
	if p := decode(w, r, &req, false); p != nil {
		h.fail(w, r, p)
		return
	}
	p := store.Patch{Title: req.Title, Body: req.Body, Author: req.Author, Provenance: req.Provenance,
		AddTags: req.AddTags, RemoveTags: req.RemoveTags, FencingToken: req.FencingToken}
	var prob *Problem
	if req.Title != nil {
		prob = checkText("title", *req.Title, 1, maxTitle)
	}
	if prob == nil && req.Body != nil {
		prob = checkText("body", *req.Body, 0, maxBody)
	}
	if prob == nil && req.Author != nil {
		prob = checkText("author", *req.Author, 0, maxAuthor)
	}
	if prob == nil && req.Provenance != nil {
		prob = checkText("provenance", *req.Provenance, 0, maxProvenance)
	}
	if prob == nil {
		prob = checkTags("addTags", req.AddTags)
	}
	if prob == nil {
		prob = checkTags("removeTags", req.RemoveTags)
	}
	if prob == nil {
		p.AddLinks, prob = h.normalizeLinks("addLinks", repo, req.AddLinks)
	}
	if prob == nil {
		p.RemoveLinks, prob = h.normalizeLinks("removeLinks", repo, req.RemoveLinks)
	}
	if prob == nil {
		prob = checkToken("fencingToken", req.FencingToken, false)
	}
	if prob == nil && req.Question != nil {
		if !containsStr(req.AddTags, "state:parked") {
			prob = invalid("question", "question is the question a park asks its ruling owner: give it only with addTags state:parked")
		} else {
			prob = checkText("question", *req.Question, 0, gating.MaxParkQuestion)
		}
	}
	if prob == nil && req.Title == nil && req.Body == nil && req.Author == nil && req.Provenance == nil &&
		len(req.AddTags) == 0 && len(req.RemoveTags) == 0 && len(p.AddLinks) == 0 && len(p.RemoveLinks) == 0 {
		prob = invalid("", "the patch changes nothing: give at least one of title, body, author, provenance, addTags, removeTags, addLinks, removeLinks")
	}
	if prob != nil {
		h.fail(w, r, prob)
		return
	}
	// Edges are the pm's (CONTRACT.md §4): refused before anything is read.
	if ref := gating.CheckEdgeEdits(actor.Role, id, p.AddLinks, p.RemoveLinks); ref != nil {
		h.failErr(w, r, ref)
		return
	}
	question := ""
	if req.Question != nil {
		question = strings.TrimSpace(*req.Question)
	}
	parking := containsStr(req.AddTags, "state:parked")
	var parkedBefore bool
	if parking {
		before, err := h.ledger.Get(ctx, repo.ID, id)
		if err != nil {
			h.failErr(w, r, err)
			return
		}
		parkedBefore = before.HasTag("state:parked")
		after := applyTags(before.Tags, req.AddTags, req.RemoveTags)
		if ref := gating.CheckParkNamed(actor.Role, id, before.Tags, after, question); ref != nil {
			p := toProblem(ref)
			if containsStr(ref.Rejected, "question") {
				p.Field = "question"
			}
			h.fail(w, r, p)
			return
		}
	}
	var opts store.WriteOptions
	if containsStr(req.AddTags, "state:complete") {
		before, err := h.ledger.Get(ctx, repo.ID, id)
		if err != nil {
			h.failErr(w, r, err)
			return
		}
		after := before.Snapshot()
		after.Tags = applyTags(after.Tags, req.AddTags, req.RemoveTags)
		if opts, err = h.proveCompletion(ctx, repo, after, &before, req.FencingToken, false); err != nil {
			h.failErr(w, r, err)
			return
		}
	}
	var before store.Item
	if h.opt.Writes != nil {
		var err error
		if before, err = h.ledger.Get(ctx, repo.ID, id); err != nil {
			h.failErr(w, r, err)
			return
		}
	}
	// The transitions GitHub follows (partOf as native sub-issues, the close
	// on completion, edge removals) are recorded first; a sub-issue GitHub
	// refuses refuses the write, as it does for POST /items.
	tw, _ := h.opt.Writes.(TransitionWriter)
	var tr *mirror.Transition
	if tw != nil {
		var err error
		if tr, err = tw.BeforeUpdate(ctx, repo, before, p, actor); err != nil {
			h.fail(w, r, subIssueProblem(err))
			return
		}
	}
	it, err := h.ledger.Update(ctx, repo.ID, id, p, actor, opts)
	if err != nil {
		if tw != nil {
			tw.UpdateRefused(context.WithoutCancel(ctx), repo, tr, true)
		}
		h.failWrite(w, r, err, req.FencingToken, patchFenced(req))
		return
	}
	if tw != nil {
		tw.UpdateCommitted(context.WithoutCancel(ctx), repo, tr, it)
	}
	if po, ok := h.opt.Writes.(ParkObserver); ok && parking && !parkedBefore && question != "" && it.HasTag("state:parked") {
		var fence int64
		if req.FencingToken != nil {
			fence = *req.FencingToken
		}
		po.AfterPark(context.WithoutCancel(ctx), repo, it, fence, actor, question)
	}
	if h.opt.Writes != nil {
		h.opt.Writes.AfterUpdate(context.WithoutCancel(ctx), repo, before, it, actor)
	}
	if aw, ok := h.opt.Writes.(AnchorWriter); ok {
		added, removed := anchorTargets(p.AddLinks), anchorTargets(p.RemoveLinks)
		if len(added)+len(removed) > 0 {
			if err := aw.AnchorsWritten(context.WithoutCancel(ctx), repo, it, added, removed); err != nil {
				h.log.Warn("anchors: the written anchoredTo links were not re-validated", "repo", repo.FullName, "item", id, "err", err)
			}
		}
	}
	writeJSON(w, http.StatusOK, ViewOf(it))
}

// TransitionWriter mirrors a PATCH's transitions to GitHub
// (*mirror.Mirror): BeforeUpdate records them before the ledger writes and
// moves the issue under (or out of) its epic's issue when partOf changes —
// an error refuses the write, nothing written; UpdateRefused undoes the
// records when the ledger refused; UpdateCommitted finishes them (the
// close on completion, edges restored) once it wrote.
type TransitionWriter interface {
	BeforeUpdate(ctx context.Context, repo store.Repo, before store.Item, p store.Patch, actor store.Actor) (*mirror.Transition, error)
	UpdateRefused(ctx context.Context, repo store.Repo, t *mirror.Transition, subIssues bool)
	UpdateCommitted(ctx context.Context, repo store.Repo, t *mirror.Transition, after store.Item)
}

// subIssueProblem is the refusal of a PATCH whose transitions were not
// recorded or whose sub-issue change GitHub did not make: a refusal is
// 409 sub-issue-refused (as POST /items answers), a failed GitHub call
// 502 (rate limits and an open circuit as everywhere).
func subIssueProblem(err error) *Problem {
	var se *mirror.SubIssueError
	if !errors.As(err, &se) {
		return toProblem(err)
	}
	if se.Refused {
		return problem(http.StatusConflict, ReasonSubIssue, "%s; nothing was written", se.Error())
	}
	if _, ok := app.IsRateLimited(err); ok {
		return toProblem(err)
	}
	if _, ok := app.IsUnavailable(err); ok {
		return toProblem(err)
	}
	p := problem(http.StatusBadGateway, ReasonGitHub, "%s; nothing was written, retry", se.Error())
	p.cause = err
	return p
}

// ParkObserver hears of a park a PATCH wrote with its question
// (*mirror.Mirror): warden records the park and posts the park comment
// naming the question, as it does for its own parks.
type ParkObserver interface {
	AfterPark(ctx context.Context, repo store.Repo, it store.Item, fence int64, actor store.Actor, question string)
}

// patchFenced names what of a patch the ledger writes only under the
// current claim's fencing token (the resume block, completion), for a fence
// refusal's detail; "this write" when it is neither.
func patchFenced(req patchRequest) string {
	complete := containsStr(req.AddTags, "state:complete")
	switch {
	case complete && req.Body != nil:
		return "state:complete and the resume block (body)"
	case complete:
		return "state:complete"
	case req.Body != nil:
		return "the resume block (body)"
	}
	return "this write"
}

// AnchorWriter hears of anchoredTo links a PATCH wrote (*mirror.Mirror):
// writing an anchor (again) re-validates it — its blob SHA on the item's
// base branch is recorded and its stale mark cleared.
type AnchorWriter interface {
	AnchorsWritten(ctx context.Context, repo store.Repo, it store.Item, added, removed []string) error
}

func anchorTargets(links []gating.Link) []string {
	var out []string
	for _, l := range links {
		if l.Rel == gating.AnchoredTo {
			out = append(out, l.Target)
		}
	}
	return out
}

// deleteRequest is DELETE /items/{id}'s optional body.
type deleteRequest struct {
	FencingToken *int64 `json:"fencingToken"`
}

func (h *handler) deleteItem(w http.ResponseWriter, r *http.Request) {
	id, ok := h.pathID(w, r)
	if !ok {
		return
	}
	if p := requireRole(r, "forgetting an item", gating.RolePM, gating.RoleHuman); p != nil {
		h.fail(w, r, p)
		return
	}
	var req deleteRequest
	if p := decode(w, r, &req, true); p != nil {
		h.fail(w, r, p)
		return
	}
	if q := r.URL.Query().Get("fencingToken"); q != "" {
		n, err := strconv.ParseInt(q, 10, 64)
		if err != nil {
			h.fail(w, r, invalid("fencingToken", "fencingToken %q is not an integer (send the token your claim returned)", q))
			return
		}
		if p := checkToken("fencingToken", &n, false); p != nil {
			h.fail(w, r, p)
			return
		}
		if req.FencingToken != nil && *req.FencingToken != n {
			h.fail(w, r, invalid("fencingToken", "fencingToken is given twice (query %d, body %d)", n, *req.FencingToken))
			return
		}
		req.FencingToken = &n
	}
	if p := checkToken("fencingToken", req.FencingToken, false); p != nil {
		h.fail(w, r, p)
		return
	}
	if err := h.ledger.Forget(r.Context(), repoOf(r).ID, id, req.FencingToken, actorOf(r)); err != nil {
		h.failWrite(w, r, err, req.FencingToken, "forgetting "+string(id))
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
}

// applyTags returns tags minus remove plus add (no duplicates added).
func applyTags(tags, add, remove []string) []string {
	out := []string{}
	for _, t := range tags {
		if !containsStr(remove, t) {
			out = append(out, t)
		}
	}
	for _, t := range add {
		if !containsStr(out, t) {
			out = append(out, t)
		}
	}
	return out
}

func containsStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
