package agentapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/wardenhq/warden/app"
	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// Problem is an RFC 9457 problem document (application/problem+json) with
// warden's machine-readable reason. Rejected lists the values a refusal
// rejected (each rejected blocker, say); Field names the request field at
// fault for a malformed request.
type Problem struct {
	Type     string   `json:"type"`
	Title    string   `json:"title"`
	Status   int      `json:"status"`
	Detail   string   `json:"detail"`
	Reason   string   `json:"reason"`
	Field    string   `json:"field,omitempty"`
	Rejected []string `json:"rejected,omitempty"`
	// Fence details of a write refused by the write-admission table.
	Item                *string `json:"item,omitempty"`
	PresentedToken      *int64  `json:"presentedFencingToken,omitempty"`
	CurrentFencingToken *int64  `json:"currentFencingToken,omitempty"`

	retryAfter time.Duration
	cause      error // logged, never shown
}

func (p *Problem) Error() string { return fmt.Sprintf("%d %s: %s", p.Status, p.Reason, p.Detail) }

// Reasons the API itself gives (the ledger's refusals carry their own).
const (
	ReasonUnauthenticated  = "Unauthenticated"
	ReasonRepoNotAllowed   = "RepoNotAllowed"
	ReasonRepoNotServed    = "RepoNotServed"
	ReasonRoleNotAllowed   = "role-not-allowed"
	ReasonOwnerNotAllowed  = "owner-not-allowed"
	ReasonHumanAct         = "HumanActRequired"
	ReasonInvalidRequest   = "invalid-request"
	ReasonInvalidJSON      = "invalid-json"
	ReasonTooLarge         = "too-large"
	ReasonUnsupportedMedia = "unsupported-media-type"
	ReasonMissing          = "missing"
	ReasonExists           = "exists"
	ReasonPullRequest      = "pull-request"
	ReasonDryRun           = "DryRun"
	ReasonSubIssue         = "sub-issue-refused"
	ReasonKeyReused        = "idempotency-key-reused"
	ReasonNotFound         = "not-found"
	ReasonMethod           = "method-not-allowed"
	ReasonGitHub           = "github-error"
	ReasonRateLimited      = "github-rate-limited"
	ReasonGitHubFailing    = "github-failing"
	ReasonInternal         = "internal"
)

func problem(status int, reason, format string, a ...any) *Problem {
	return &Problem{Type: "about:blank", Title: http.StatusText(status), Status: status, Reason: reason, Detail: fmt.Sprintf(format, a...)}
}

// invalid is a 422 naming the field at fault.
func invalid(field, format string, a ...any) *Problem {
	p := problem(http.StatusUnprocessableEntity, ReasonInvalidRequest, format, a...)
	p.Field = field
	return p
}

func forbidden(reason, format string, a ...any) *Problem {
	return problem(http.StatusForbidden, reason, format, a...)
}

// forbiddenReasons are refusals of who is asking, not of what is asked.
var forbiddenReasons = map[string]bool{
	ReasonHumanAct: true, ReasonOwnerNotAllowed: true, ReasonRoleNotAllowed: true, ReasonRepoNotAllowed: true,
}

// malformedReasons are refusals of the request's shape.
var malformedReasons = map[string]bool{
	ReasonInvalidRequest: true, "invalid-tag": true, "invalid-link": true, "invalid-field": true,
	ReasonKeyReused: true,
}

// toProblem maps an error from the ledger, GitHub or this package to a
// problem document.
func toProblem(err error) *Problem {
	var p *Problem
	if errors.As(err, &p) {
		return p
	}
	var ref *gating.Refusal
	if errors.As(err, &ref) {
		status := http.StatusConflict
		switch {
		case forbiddenReasons[ref.Reason]:
			status = http.StatusForbidden
		case malformedReasons[ref.Reason]:
			status = http.StatusUnprocessableEntity
		}
		p := problem(status, ref.Reason, "%s", ref.Detail)
		p.Rejected = ref.Rejected
		return p
	}
	var fe *store.FenceError
	if errors.As(err, &fe) {
		p := problem(http.StatusConflict, string(fe.Verdict), "%s", fenceDetail(fe, nil, nil, "this write", ""))
		item := string(fe.Item)
		p.Item, p.PresentedToken = &item, fe.Presented
		if fe.Current > 0 {
			cur := fe.Current
			p.CurrentFencingToken = &cur
		}
		return p
	}
	switch {
	case errors.Is(err, store.ErrNotFound):
		return problem(http.StatusNotFound, ReasonMissing, "no such item")
	case errors.Is(err, store.ErrExists):
		return problem(http.StatusConflict, ReasonExists, "the item already exists")
	}
	if rl, ok := app.IsRateLimited(err); ok {
		p := problem(http.StatusServiceUnavailable, ReasonRateLimited, "GitHub's rate limit for this installation is exhausted until %s; nothing was written, retry then", rl.Reset.UTC().Format(time.RFC3339))
		p.retryAfter = time.Until(rl.Reset)
		p.cause = err
		return p
	}
	if u, ok := app.IsUnavailable(err); ok {
		p := problem(http.StatusServiceUnavailable, ReasonGitHubFailing, "GitHub is failing for this installation (%d requests in a row, last: %s): warden did not send this request's GitHub call; retry after %s",
			u.Failures, u.Last, u.Until.UTC().Format(time.RFC3339))
		p.retryAfter = time.Until(u.Until)
		p.cause = err
		return p
	}
	var ge *GitHubError
	if errors.As(err, &ge) {
		p := problem(http.StatusBadGateway, ReasonGitHub, "%s", ge.Error())
		p.cause = err
		return p
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		p := problem(http.StatusServiceUnavailable, "timeout", "the request was cancelled or timed out before it completed")
		p.cause = err
		return p
	}
	p = problem(http.StatusInternalServerError, ReasonInternal, "warden could not complete the request; see its log")
	p.cause = err
	return p
}

// fenceDetail says in words why a write was refused by the write-admission
// table, or by the ledger's rule that the resume block and completion are
// written only under the current claim's fencing token: what is true of the
// item's claim (st, as GET /items/{id}/claim reads it; nil when unknown),
// what the caller presented, and what to do. what names the fenced part of
// the write ("state:complete", "the resume block (body)", "this write");
// region is this replica's. The numbers are the refusal's own; a status
// read since the refusal that shows another fence is not used.
func fenceDetail(fe *store.FenceError, presented *int64, st *store.ClaimStatus, what, region string) string {
	item, fence := string(fe.Item), fe.Current
	if fe.Presented != nil {
		presented = fe.Presented
	}
	if st != nil {
		f := int64(0)
		if st.FencingToken != nil {
			f = *st.FencingToken
		}
		if f != fence {
			st = nil
		}
	}
	at := fmt.Sprintf("at fence %d", fence)
	if st != nil && st.Owner != nil {
		at += " by " + *st.Owner
	}
	claim := "the claim " + at
	tok := "no fencing token"
	if presented != nil {
		tok = fmt.Sprintf("fencing token %d", *presented)
	}
	completing := strings.HasPrefix(what, "state:complete")
	maintenance := ""
	if completing {
		maintenance = " (a reserved merge is completed under a maintenance claim: purpose \"maintenance\", with a pm or human token)"
	}
	switch fe.Verdict {
	case gating.ClaimRequired:
		switch {
		case fence <= 0:
			d := item + " has never been claimed"
			if presented != nil {
				d += fmt.Sprintf(", so fencing token %d was never issued for it", *presented)
			}
			return d + ": " + what + " is written only under the current claim's fencing token, and there is no claim to write under; claim the item first and write with the token the claim returns" + maintenance
		case st == nil:
			return fmt.Sprintf("%s is refused with %s: it is written only under the fencing token of %s's live claim (%s's fence is %d; GET /items/%s/claim says who holds it)", what, tok, item, item, fence, item)
		case !st.Claimed:
			return fmt.Sprintf("%s's last claim, %s, was released, and no claim holds the item now: %s is written only under a live claim's fencing token; claim the item again and write with the new token%s", item, at, what, maintenance)
		}
		var state string
		switch st.State {
		case string(gating.StateHeld):
			state = "held"
			if st.LeaseExpiresAtUtc != nil {
				state += " until " + *st.LeaseExpiresAtUtc
			}
		case string(gating.StateLapsed):
			state = "lapsed: its lease expired, but its holder showed evidence of work, so it is quarantined, not released"
		case string(gating.StateAbandoned):
			return fmt.Sprintf("%s is under %s, abandoned (its lease expired with no evidence of work) but never released: %s needs that claim's fencing token; or claim the item (a new claim supersedes the abandoned one) and write with the new token", item, claim, what)
		default:
			state = "not released"
		}
		return fmt.Sprintf("%s is under %s (%s), and this request presents no fencing token: %s needs that claim's fencing token", item, claim, state, what)
	case gating.StaleToken:
		return fmt.Sprintf("%s is older than %s's current fence %d (%s): a later claim superseded the one it came from, and nothing is written under it; read GET /items/%s/claim and, if the item is free, claim it again",
			tok, item, fence, claimWithState(claim, st), item)
	case gating.UnissuedToken:
		if fence <= 0 {
			return fmt.Sprintf("%s was never issued for %s: the item has never been claimed", tok, item)
		}
		return fmt.Sprintf("%s was never issued for %s: its latest claim is %s; write with the token your claim returned", tok, item, claimWithState(claim, st))
	case gating.ClaimReleased:
		return fmt.Sprintf("%s belongs to %s, which was released: nothing is written under a released claim; claim the item again and write with the new token", tok, claim)
	case gating.ForeignRegion:
		where := "another region"
		if st != nil && st.Region != nil {
			where = "region " + *st.Region
		}
		serves := "another region"
		if region != "" {
			serves = "region " + region
		}
		return fmt.Sprintf("%s belongs to %s, taken in %s; this replica serves %s: write through a replica that serves the claim's region", tok, claim, where, serves)
	}
	return fe.Error()
}

// claimWithState is claim ("the claim at fence N by O") with its state, when
// st knows it.
func claimWithState(claim string, st *store.ClaimStatus) string {
	if st == nil || st.State == "" {
		return claim
	}
	s := claim + ", " + st.State
	if st.State == string(gating.StateHeld) && st.LeaseExpiresAtUtc != nil {
		s += " until " + *st.LeaseExpiresAtUtc
	}
	return s
}

// fenceProblem is the problem document of a write refused on its fencing
// token: the ledger's verdict as reason, fenceDetail as detail (the item's
// claim status read for it), and the item, the presented token and the
// item's fence (omitted when it was never claimed: 0 is no fence). presented
// is the token the request carried, when the refusal does not say.
func (h *handler) fenceProblem(ctx context.Context, repo store.Repo, fe *store.FenceError, presented *int64, what string) *Problem {
	if fe.Presented != nil {
		presented = fe.Presented
	}
	var sp *store.ClaimStatus
	if st, err := h.ledger.Status(ctx, repo.ID, fe.Item); err == nil {
		sp = &st
	} else {
		h.log.Warn("agent API: the claim status for a fence refusal could not be read", "repo", repo.FullName, "item", fe.Item, "err", err)
	}
	p := problem(http.StatusConflict, string(fe.Verdict), "%s", fenceDetail(fe, presented, sp, what, h.opt.Region))
	item := string(fe.Item)
	p.Item, p.PresentedToken = &item, presented
	if fe.Current > 0 {
		cur := fe.Current
		p.CurrentFencingToken = &cur
	}
	return p
}

// failWrite answers a failed write: a fence refusal with fenceProblem (what
// names the write's fenced part, presented the token it carried), anything
// else as toProblem maps it.
func (h *handler) failWrite(w http.ResponseWriter, r *http.Request, err error, presented *int64, what string) {
	var fe *store.FenceError
	repo, ok := r.Context().Value(repoKey).(store.Repo)
	if !ok || !errors.As(err, &fe) {
		h.fail(w, r, toProblem(err))
		return
	}
	h.fail(w, r, h.fenceProblem(r.Context(), repo, fe, presented, what))
}

// writeProblem sends p as application/problem+json.
func writeProblem(w http.ResponseWriter, r *http.Request, log *slog.Logger, p *Problem) {
	if p.cause != nil && log != nil {
		lvl := slog.LevelWarn
		if p.Status >= 500 && p.Reason == ReasonInternal {
			lvl = slog.LevelError
		}
		log.Log(r.Context(), lvl, "agent API request failed", "method", r.Method, "path", r.URL.Path,
			"status", p.Status, "reason", p.Reason, "err", p.cause)
	}
	if p.Type == "" {
		p.Type = "about:blank"
	}
	if p.Title == "" {
		p.Title = http.StatusText(p.Status)
	}
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	if p.Status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="warden"`)
	}
	if p.retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(int(p.retryAfter.Seconds())+1))
	}
	w.WriteHeader(p.Status)
	json.NewEncoder(w).Encode(p)
}

// writeJSON sends v as application/json.
func writeJSON(w http.ResponseWriter, status int, v any) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
