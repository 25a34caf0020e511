package agentapi

import (
	"context"
	"errors"
	"net/http"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// claimNextRequest is POST /ready/claim.
type claimNextRequest struct {
	Owner        string   `json:"owner"`
	LeaseSeconds *float64 `json:"leaseSeconds"`
	RequestID    *string  `json:"requestId"`
}

// ClaimNextResult is POST /ready/claim's answer: a claim result (the
// claim route's fields) for the item claimed, which Item names (as Key
// does), or, when none was, why: Reason (not-ready, with Exclusion
// owner-cap when the owner holds max_claims_per_owner live claims;
// contended when every candidate went to other claimants first) and Tried
// (each candidate refused, in order). ReadyCount is the size of the ready
// set the candidates came from, Excluded its exclusions counted by reason
// (why nothing else was ready). A resend of a requestId answers the first
// grant again, Replayed true.
type ClaimNextResult struct {
	store.ClaimResult
	Item       gating.ItemID  `json:"item"`
	Tried      []ClaimTry     `json:"tried"`
	ReadyCount int            `json:"readyCount"`
	Excluded   map[string]int `json:"excluded"`
}

// ClaimTry is a candidate POST /ready/claim tried and was refused.
type ClaimTry struct {
	Item      gating.ItemID `json:"item"`
	Reason    string        `json:"reason"`
	Exclusion string        `json:"exclusion,omitempty"`
}

// claimNext is POST /ready/claim: the best ready item in one call. The
// candidates are gating.ClaimCandidates of the ready set (the head of the
// ready order, jittered among equals); the ledger tries them in turn, each
// in its own claim transaction (store.Ledger.ClaimNext). Nothing is
// decided here.
func (h *handler) claimNext(w http.ResponseWriter, r *http.Request) {
	var req claimNextRequest
	if p := decode(w, r, &req, false); p != nil {
		h.fail(w, r, p)
		return
	}
	c := credOf(r)
	prob := checkOwner(c, req.Owner)
	if prob == nil && req.LeaseSeconds == nil {
		prob = invalid("leaseSeconds", "leaseSeconds is required here: name the lease your work needs (it is clamped to the ceiling; act on the returned leaseSeconds), never the short default")
	}
	if prob == nil {
		prob = checkLease("leaseSeconds", req.LeaseSeconds)
	}
	if prob == nil {
		prob = checkRequestID(req.RequestID)
	}
	if prob == nil {
		prob = checkWorkerOwner(c, req.Owner)
	}
	if prob != nil {
		h.fail(w, r, prob)
		return
	}
	repo := repoOf(r)
	rs, err := h.ledger.Snapshot(r.Context(), repo.ID)
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	ready := rs.Ready()
	cands := gating.ClaimCandidates(ready.Ready, h.shuffle)
	res, err := h.ledger.ClaimNext(r.Context(), repo.ID, cands, store.ClaimRequest{Owner: req.Owner, LeaseSeconds: req.LeaseSeconds,
		RequestID: deref(req.RequestID)}, actorOf(r))
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	out := ClaimNextResult{ClaimResult: res.ClaimResult, Item: gating.ItemID(res.Key), Tried: []ClaimTry{}, ReadyCount: len(ready.Ready),
		Excluded: gating.ExclusionCounts(ready.Excluded)}
	for _, t := range res.Tried {
		out.Tried = append(out.Tried, ClaimTry{Item: gating.ItemID(t.Key), Reason: deref(t.Reason), Exclusion: deref(t.Exclusion)})
	}
	if res.Granted && !res.Replayed && h.opt.Writes != nil {
		h.opt.Writes.AfterClaim(context.WithoutCancel(r.Context()), repo, out.Item, res.ClaimResult, "")
	}
	writeJSON(w, http.StatusOK, out)
}

// checkRequestID checks an optional requestId (claim, renew, release,
// /ready/claim): 1 to store.MaxRequestID letters, digits and . _ : / -.
func checkRequestID(v *string) *Problem {
	if v == nil {
		return nil
	}
	if *v == "" {
		return invalid("requestId", "requestId is empty: omit it, or send 1 to %d letters, digits and . _ : / - (a UUID, fresh for each new request and the same on its retries)", store.MaxRequestID)
	}
	if err := store.CheckRequestID(*v); err != nil {
		var ref *gating.Refusal
		if errors.As(err, &ref) {
			return invalid("requestId", "%s", ref.Detail)
		}
		return invalid("requestId", "%s", err.Error())
	}
	return nil
}

// deref is *p, or the zero value for nil.
func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
