package agentapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror"
	"github.com/wardenhq/warden/mirror/store"
)

// createRequest is POST /items.
type createRequest struct {
	Title         *string  `json:"title"`
	Specification *string  `json:"specification"`
	Author        *string  `json:"author"`
	Provenance    *string  `json:"provenance"`
	Tags          []string `json:"tags"`
	Links         []linkIn `json:"links"`
	Body          *string  `json:"body"`
}

// adoptRequest is POST /items/adopt.
type adoptRequest struct {
	Number     *int     `json:"number"`
	Tags       []string `json:"tags"`
	Links      []linkIn `json:"links"`
	Title      *string  `json:"title"`
	Author     *string  `json:"author"`
	Provenance *string  `json:"provenance"`
}

// IssueRef names the issue an item mirrors.
type IssueRef struct {
	Number int    `json:"number"`
	URL    string `json:"url,omitempty"`
}

// Create outcomes.
const (
	OutcomeCreated  = "created"  // a new issue and item
	OutcomeAdopted  = "adopted"  // an earlier attempt's issue was adopted (no second issue)
	OutcomeReplayed = "replayed" // the item already existed: nothing was written
)

// CreateResult answers POST /items and /items/adopt.
type CreateResult struct {
	ItemView
	Issue   IssueRef `json:"issue"`
	Outcome string   `json:"outcome"`
}

// IdempotencyHeader keys a create request for retries.
const IdempotencyHeader = "Idempotency-Key"

// markerPrefix starts the hidden request marker at the end of an issue body.
const markerPrefix = "<!-- warden-request: "

func requestMarker(key string) string { return markerPrefix + key + " -->" }

// hasMarker reports whether an issue body ends with the marker.
func hasMarker(body, marker string) bool {
	b := strings.TrimRight(strings.ReplaceAll(body, "\r\n", "\n"), " \t\n")
	return strings.HasSuffix(b, marker)
}

// fingerprint is a digest of what a create request asks for: its title,
// specification, tags and links, in a canonical order.
func fingerprint(title, spec string, tags []string, links []gating.Link) string {
	ts := append([]string(nil), tags...)
	sort.Strings(ts)
	ls := make([]string, len(links))
	for i, l := range links {
		ls[i] = string(l.Rel) + "\x00" + l.Target
	}
	sort.Strings(ls)
	b, _ := json.Marshal([]any{title, spec, ts, ls})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// requestKey is the key a create request is remembered by: the
// Idempotency-Key when given, else the fingerprint; scoped to the repository
// and the token, and hashed so that the issue body reveals neither.
func requestKey(repoID int64, token, idem, fp string) string {
	kind, v := "body", fp
	if idem != "" {
		kind, v = "key", idem
	}
	sum := sha256.Sum256([]byte("warden-request/v1\x00" + kind + "\x00" + strconv.FormatInt(repoID, 10) + "\x00" + token + "\x00" + v))
	return hex.EncodeToString(sum[:16])
}

func checkIdempotencyKey(k string) *Problem {
	if len(k) > 255 {
		return invalid(IdempotencyHeader, "the Idempotency-Key header must be at most 255 characters")
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return invalid(IdempotencyHeader, "the Idempotency-Key header must be printable ASCII without spaces")
		}
	}
	return nil
}

// withDefaults fills the mandatory tags a request left out with the
// repository's defaults: backlog, priority:P2, phase:implementation,
// homeRegion:<Region>, and baseBranch: the default branch — or, for an item
// partOf an epic, the epic's baseBranch.
func (h *handler) withDefaults(ctx context.Context, repo store.Repo, set repoSettings, tags []string, links []gating.Link) ([]string, error) {
	out := append([]string{}, tags...)
	has := func(prefix string) bool {
		for _, t := range out {
			if strings.HasPrefix(t, prefix+":") {
				return true
			}
		}
		return false
	}
	if !containsStr(out, "backlog") {
		out = append(out, "backlog")
	}
	if !has("priority") {
		out = append(out, "priority:"+set.priority)
	}
	if !has("phase") {
		out = append(out, "phase:"+set.phase)
	}
	if !has("homeRegion") {
		out = append(out, "homeRegion:"+h.opt.Region)
	}
	if !has("baseBranch") {
		base := repo.DefaultBranch
		for _, l := range links {
			if l.Rel != gating.PartOf {
				continue
			}
			epic, err := h.ledger.Get(ctx, repo.ID, gating.ItemID(l.Target))
			if errors.Is(err, store.ErrNotFound) {
				break // the ledger refuses the dangling edge
			}
			if err != nil {
				return nil, err
			}
			if b, ok := epic.Snapshot().Tag("baseBranch"); ok && b != "" {
				base = b
			}
			break
		}
		if base != "" {
			out = append(out, "baseBranch:"+base)
		}
	}
	return out, nil
}

// epicOf returns the number of the epic an item is partOf, or 0.
func epicOf(links []gating.Link) int {
	for _, l := range links {
		if l.Rel == gating.PartOf {
			return gating.ItemID(l.Target).Number()
		}
	}
	return 0
}

func onePartOf(field string, links []gating.Link) *Problem {
	n := 0
	for _, l := range links {
		if l.Rel == gating.PartOf {
			n++
		}
	}
	if n > 1 {
		return invalid(field, "an item is partOf at most one epic (a GitHub issue has one parent); this one names %d", n)
	}
	return nil
}

// wantLabels are the labels an item made through the API carries: the item
// label, and the admission label unless a human token made it.
func wantLabels(set repoSettings, role gating.Role) []string {
	ls := []string{set.itemLabel}
	if role != gating.RoleHuman {
		ls = append(ls, set.admissionLabel)
	}
	return ls
}

// ensureLabels adds any wanted label the issue lacks (GitHub drops labels
// silently on create in some cases), checks that GitHub kept them, and
// records the issue's labels as warden now knows them (the ready set reads
// the admission label from that record).
func (h *handler) ensureLabels(ctx context.Context, repo store.Repo, issue Issue, want []string) error {
	labels := issue.Labels
	if missing := missingLabels(issue.Labels, want); len(missing) > 0 {
		h.log.Info("re-adding labels GitHub dropped", "repo", repo.FullName, "issue", issue.Number, "labels", missing)
		now, err := h.gh.AddLabels(ctx, repo, issue.Number, missing)
		if err != nil {
			return err
		}
		if still := missingLabels(now, want); len(still) > 0 {
			return &GitHubError{Op: fmt.Sprintf("label issue #%d", issue.Number), Status: http.StatusBadGateway,
				Message: "GitHub did not keep the labels " + strings.Join(still, ", ")}
		}
		labels = now
	}
	// Bookkeeping: the issue's own deliveries (FromSelf) record it too, and
	// a later updated_at wins. The answer's updated_at predates labels added
	// just now, so any delivery about them replaces this record.
	state := issue.State
	if state == "" {
		state = store.IssueOpen
	}
	st := store.IssueState{State: state, Labels: labels, UpdatedAt: issue.UpdatedAt}
	if issue.Title != "" {
		st.SpecDigest = gating.SpecDigest(issue.Title, issue.Body)
	}
	_, err := h.ledger.RecordIssueState(ctx, repo.ID, issue.Number, st)
	return err
}

func missingLabels(have, want []string) []string {
	var out []string
	for _, w := range want {
		found := false
		for _, h := range have {
			if strings.EqualFold(strings.TrimSpace(h), strings.TrimSpace(w)) {
				found = true
				break
			}
		}
		if !found {
			out = append(out, w)
		}
	}
	return out
}

// attachToEpic makes the issue a native sub-issue of its epic's issue.
func (h *handler) attachToEpic(ctx context.Context, repo store.Repo, links []gating.Link, issue Issue) error {
	epic := epicOf(links)
	if epic == 0 {
		return nil
	}
	err := h.gh.AddSubIssue(ctx, repo, epic, issue)
	var ge *GitHubError
	if errors.As(err, &ge) && ge.Status == http.StatusUnprocessableEntity {
		// GitHub's own limits (one parent, 100 sub-issues, 8 levels).
		return problem(http.StatusConflict, ReasonSubIssue, "GitHub refused #%d as a sub-issue of the epic's issue #%d: %s", issue.Number, epic, ge.Message)
	}
	return err
}

func dryRun(repo store.Repo, set repoSettings) *Problem {
	if set.dryRun {
		return problem(http.StatusConflict, ReasonDryRun, "%s is in dry_run: warden writes nothing to GitHub there, so it opens and adopts no issues", repo.FullName)
	}
	return nil
}

func (h *handler) createItem(w http.ResponseWriter, r *http.Request) {
	ctx, repo, actor := r.Context(), repoOf(r), actorOf(r)
	if p := requireRole(r, "creating an item", gating.RolePM, gating.RoleHuman); p != nil {
		h.fail(w, r, p)
		return
	}
	set := h.settings(ctx, repo)
	if p := dryRun(repo, set); p != nil {
		h.fail(w, r, p)
		return
	}
	idem := r.Header.Get(IdempotencyHeader)
	if p := checkIdempotencyKey(idem); p != nil {
		h.fail(w, r, p)
		return
	}
	var req createRequest
	if p := decode(w, r, &req, false); p != nil {
		h.fail(w, r, p)
		return
	}
	links, prob := h.checkCreate(repo, &req)
	if prob != nil {
		h.fail(w, r, prob)
		return
	}
	title, spec := *req.Title, *req.Specification
	fp := fingerprint(title, spec, req.Tags, links)
	key := requestKey(repo.ID, actor.Name, idem, fp)
	marker := requestMarker(key)
	issueBody := spec + "\n\n" + marker
	if n := utf8.RuneCountInString(issueBody); n > maxSpec {
		h.fail(w, r, invalid("specification", "specification is too long: with warden's %d-character request marker the issue body would be %d characters, above GitHub's %d", len(marker)+2, n, maxSpec))
		return
	}
	tags, err := h.withDefaults(ctx, repo, set, req.Tags, links)
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	author := actor.Name
	if req.Author != nil {
		author = *req.Author
	}
	var provenance string
	if req.Provenance != nil {
		provenance = *req.Provenance
	}
	in := store.NewItem{Title: title, Author: author, Provenance: provenance, Tags: tags, Links: links}

	// Two replicas given the same request (an agent retrying through a
	// load balancer) must not both open an issue.
	unlock, err := h.locks.Lock(ctx, "create/"+key)
	if err != nil {
		h.failErr(w, r, fmt.Errorf("wait for an earlier request with the same key: %w", err))
		return
	}
	defer unlock()

	// 1. An item this process already created from the same request.
	if e, ok := h.recent.get(key); ok {
		if idem != "" && e.fingerprint != fp {
			h.fail(w, r, problem(http.StatusUnprocessableEntity, ReasonKeyReused, "Idempotency-Key %q was used for a different request (issue #%d); use a new key for a new item", idem, e.number))
			return
		}
		it, err := h.ledger.Get(ctx, repo.ID, gating.IDFor(e.number))
		if err == nil {
			if err := h.recordAdmission(ctx, repo, e.number, actor, nil); err != nil {
				h.failErr(w, r, err)
				return
			}
			writeJSON(w, http.StatusOK, CreateResult{ItemView: ViewOf(it), Issue: IssueRef{Number: e.number, URL: e.url}, Outcome: OutcomeReplayed})
			return
		}
		if !errors.Is(err, store.ErrNotFound) {
			h.failErr(w, r, err)
			return
		}
	}
	// 2. Everything the ledger would refuse is refused before GitHub is
	// touched.
	if err := h.ledger.Validate(ctx, repo.ID, in, actor, store.WriteOptions{}); err != nil {
		h.failErr(w, r, err)
		return
	}
	// 3. An issue an earlier attempt opened (its marker), else a new one.
	bot, err := h.gh.BotLogin(ctx)
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	recent, err := h.gh.RecentIssuesBy(ctx, repo, bot)
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	var issue *Issue
	for i := range recent {
		if !recent[i].IsPull && hasMarker(recent[i].Body, marker) {
			issue = &recent[i]
			break
		}
	}
	outcome := OutcomeCreated
	if issue != nil {
		it, err := h.ledger.Get(ctx, repo.ID, gating.IDFor(issue.Number))
		if err == nil {
			if err := h.recordAdmission(ctx, repo, issue.Number, actor, issue); err != nil {
				h.failErr(w, r, err)
				return
			}
			h.recent.put(key, recentEntry{number: issue.Number, url: issue.URL, fingerprint: fp})
			writeJSON(w, http.StatusOK, CreateResult{ItemView: ViewOf(it), Issue: IssueRef{Number: issue.Number, URL: issue.URL}, Outcome: OutcomeReplayed})
			return
		}
		if !errors.Is(err, store.ErrNotFound) {
			h.failErr(w, r, err)
			return
		}
		outcome = OutcomeAdopted
		h.log.Info("adopting the issue of an earlier attempt", "repo", repo.FullName, "issue", issue.Number)
	} else {
		created, err := h.gh.CreateIssue(ctx, repo, title, issueBody, wantLabels(set, actor.Role))
		if err != nil {
			h.failErr(w, r, err)
			return
		}
		issue = &created
	}
	// 4. The labels GitHub may have dropped, the epic's sub-issue, then the
	// ledger row. A failure here leaves the issue for a retry to adopt.
	if err := h.ensureLabels(ctx, repo, *issue, wantLabels(set, actor.Role)); err != nil {
		h.failErr(w, r, err)
		return
	}
	if err := h.attachToEpic(ctx, repo, links, *issue); err != nil {
		h.failErr(w, r, err)
		return
	}
	in.Number = issue.Number
	in.Body = mirror.ResumeBody(issue.Number, issue.URL, req.Body)
	it, err := h.ledger.Create(ctx, repo.ID, in, actor, store.WriteOptions{})
	status := http.StatusCreated
	if errors.Is(err, store.ErrExists) {
		it, err = h.ledger.Get(ctx, repo.ID, gating.IDFor(issue.Number))
		status, outcome = http.StatusOK, OutcomeReplayed
	}
	if err != nil {
		h.log.Warn("issue opened but the item was not written; a retry adopts it", "repo", repo.FullName, "issue", issue.Number, "err", err)
		h.failErr(w, r, err)
		return
	}
	if err := h.recordAdmission(ctx, repo, issue.Number, actor, issue); err != nil {
		h.failErr(w, r, err)
		return
	}
	if status == http.StatusCreated {
		h.anchorsCreated(ctx, repo, it)
	}
	h.recent.put(key, recentEntry{number: issue.Number, url: issue.URL, fingerprint: fp})
	w.Header().Set("Location", strings.TrimSuffix(r.URL.Path, "/")+"/"+string(it.ID))
	writeJSON(w, status, CreateResult{ItemView: ViewOf(it), Issue: IssueRef{Number: issue.Number, URL: issue.URL}, Outcome: outcome})
}

// checkCreate validates a create request field by field and returns its
// links normalised.
func (h *handler) checkCreate(repo store.Repo, req *createRequest) ([]gating.Link, *Problem) {
	if req.Title == nil {
		return nil, invalid("title", "title is required")
	}
	if p := checkText("title", *req.Title, 1, maxTitle); p != nil {
		return nil, p
	}
	if req.Specification == nil {
		return nil, invalid("specification", "specification is required (it becomes the issue's body)")
	}
	if p := checkText("specification", *req.Specification, 1, maxSpec); p != nil {
		return nil, p
	}
	if req.Author != nil {
		if p := checkText("author", *req.Author, 0, maxAuthor); p != nil {
			return nil, p
		}
	}
	if req.Provenance != nil {
		if p := checkText("provenance", *req.Provenance, 0, maxProvenance); p != nil {
			return nil, p
		}
	}
	if req.Body != nil {
		if p := checkText("body", *req.Body, 0, maxBody-200); p != nil {
			return nil, p
		}
	}
	if p := checkTags("tags", req.Tags); p != nil {
		return nil, p
	}
	links, p := h.normalizeLinks("links", repo, req.Links)
	if p != nil {
		return nil, p
	}
	if p := onePartOf("links", links); p != nil {
		return nil, p
	}
	return links, nil
}

func (h *handler) adoptItem(w http.ResponseWriter, r *http.Request) {
	ctx, repo, actor := r.Context(), repoOf(r), actorOf(r)
	if p := requireRole(r, "adopting an issue", gating.RolePM, gating.RoleHuman); p != nil {
		h.fail(w, r, p)
		return
	}
	set := h.settings(ctx, repo)
	if p := dryRun(repo, set); p != nil {
		h.fail(w, r, p)
		return
	}
	var req adoptRequest
	if p := decode(w, r, &req, false); p != nil {
		h.fail(w, r, p)
		return
	}
	var prob *Problem
	switch {
	case req.Number == nil:
		prob = invalid("number", "number is required (the issue to adopt)")
	case *req.Number < 1:
		prob = invalid("number", "number must be an issue number (1 or more)")
	case req.Title != nil:
		prob = checkText("title", *req.Title, 1, maxTitle)
	}
	if prob == nil && req.Author != nil {
		prob = checkText("author", *req.Author, 0, maxAuthor)
	}
	if prob == nil && req.Provenance != nil {
		prob = checkText("provenance", *req.Provenance, 0, maxProvenance)
	}
	if prob == nil {
		prob = checkTags("tags", req.Tags)
	}
	var links []gating.Link
	if prob == nil {
		links, prob = h.normalizeLinks("links", repo, req.Links)
	}
	if prob == nil {
		prob = onePartOf("links", links)
	}
	if prob != nil {
		h.fail(w, r, prob)
		return
	}
	number := *req.Number
	id := gating.IDFor(number)
	if _, err := h.ledger.Get(ctx, repo.ID, id); err == nil {
		h.fail(w, r, problem(http.StatusConflict, ReasonExists, "#%d is already the item %s", number, id))
		return
	} else if !errors.Is(err, store.ErrNotFound) {
		h.failErr(w, r, err)
		return
	}
	issue, err := h.gh.Issue(ctx, repo, number)
	if s := githubStatus(err); s == http.StatusNotFound || s == http.StatusGone {
		h.fail(w, r, problem(http.StatusNotFound, ReasonMissing, "%s has no issue #%d", repo.FullName, number))
		return
	}
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	if issue.IsPull {
		h.fail(w, r, problem(http.StatusConflict, ReasonPullRequest, "#%d is a pull request; pull requests are never items", number))
		return
	}
	tags, err := h.withDefaults(ctx, repo, set, req.Tags, links)
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	title := issue.Title
	if req.Title != nil {
		title = *req.Title
	}
	author := actor.Name
	if req.Author != nil {
		author = *req.Author
	}
	var provenance string
	if req.Provenance != nil {
		provenance = *req.Provenance
	}
	in := store.NewItem{Number: number, Title: title, Body: mirror.ResumeBody(number, issue.URL, nil), Author: author,
		Provenance: provenance, Tags: tags, Links: links}
	var opts store.WriteOptions
	if containsStr(tags, "state:complete") {
		snap := &gating.Item{ID: id, Title: title, Tags: tags, Links: links}
		if !containsStr(tags, directDeployedTag) {
			opts = store.WriteOptions{CompletionReason: reasonUnproven, CompletionDetail: fmt.Sprintf(
				"an adopted item is born state:complete only as a direct-deployment ledger row: state:complete, pr:<n> (merged) and %s", directDeployedTag)}
		} else if opts, err = h.proveCompletion(ctx, repo, snap, nil, nil, true); err != nil {
			h.failErr(w, r, err)
			return
		}
	}
	if err := h.ledger.Validate(ctx, repo.ID, in, actor, opts); err != nil {
		h.failErr(w, r, err)
		return
	}
	if err := h.ensureLabels(ctx, repo, issue, wantLabels(set, actor.Role)); err != nil {
		h.failErr(w, r, err)
		return
	}
	if err := h.attachToEpic(ctx, repo, links, issue); err != nil {
		h.failErr(w, r, err)
		return
	}
	it, err := h.ledger.Create(ctx, repo.ID, in, actor, opts)
	if errors.Is(err, store.ErrExists) {
		h.fail(w, r, problem(http.StatusConflict, ReasonExists, "#%d is already the item %s", number, id))
		return
	}
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	if err := h.recordAdmission(ctx, repo, number, actor, &issue); err != nil {
		h.failErr(w, r, err)
		return
	}
	h.anchorsCreated(ctx, repo, it)
	w.Header().Set("Location", strings.TrimSuffix(r.URL.Path, "/adopt")+"/"+string(it.ID))
	writeJSON(w, http.StatusCreated, CreateResult{ItemView: ViewOf(it), Issue: IssueRef{Number: number, URL: issue.URL}, Outcome: OutcomeAdopted})
}

// recordAdmission records that a human token made the item, which admits it
// at creation (CONTRACT.md §4, §5), with the issue's text as the admitted
// specification (issue nil: not known here; warden trusts the text as of
// the admission on first use). Recording again changes nothing, so the
// replay of a create records it too (the first attempt may have failed
// after the item was written).
func (h *handler) recordAdmission(ctx context.Context, repo store.Repo, number int, actor store.Actor, issue *Issue) error {
	if actor.Role != gating.RoleHuman || h.opt.Admissions == nil {
		return nil
	}
	adm := store.Admission{By: actor.Name, At: h.now().UTC(), How: "human token"}
	if issue != nil && issue.Title != "" && !issue.UpdatedAt.IsZero() {
		adm.Spec = gating.SpecState{Digest: gating.SpecDigest(issue.Title, issue.Body), At: issue.UpdatedAt}
	}
	return h.opt.Admissions.RecordAdmission(ctx, repo.ID, number, adm)
}

// anchorsCreated checks the anchoredTo links an item was made with as a
// PATCH that adds them does (AnchorWriter): each is read on the item's base
// branch at once, so an anchor at nothing reads dangling and stale from the
// first recall, not only after the next push.
func (h *handler) anchorsCreated(ctx context.Context, repo store.Repo, it store.Item) {
	aw, ok := h.opt.Writes.(AnchorWriter)
	if !ok {
		return
	}
	if added := anchorTargets(it.Links); len(added) > 0 {
		if err := aw.AnchorsWritten(context.WithoutCancel(ctx), repo, it, added, nil); err != nil {
			h.log.Warn("anchors: the anchoredTo links of a new item were not validated", "repo", repo.FullName, "item", it.ID, "err", err)
		}
	}
}
