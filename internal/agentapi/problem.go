package agentapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
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
		p := problem(http.StatusConflict, string(fe.Verdict), "%s", fenceDetail(fe))
		item := string(fe.Item)
		cur := fe.Current
		p.Item, p.PresentedToken, p.CurrentFencingToken = &item, fe.Presented, &cur
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

func fenceDetail(fe *store.FenceError) string {
	what := map[gating.Verdict]string{
		gating.StaleToken:    "the fencing token is older than the item's current fence: another claim superseded yours",
		gating.ClaimRequired: "the item is under a live claim: present its fencing token",
		gating.ClaimReleased: "the claim behind this fencing token was released: claim the item again",
		gating.ForeignRegion: "the claim was taken in another region",
		gating.UnissuedToken: "no claim was ever granted with this fencing token",
	}[fe.Verdict]
	if what == "" {
		return fe.Error()
	}
	return what + " (" + fe.Error() + ")"
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
