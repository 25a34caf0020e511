package agentapi

import (
	"context"
	"math"
	"net/http"
	"strings"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// claimRequest is POST /items/{id}/claim.
type claimRequest struct {
	Owner          string   `json:"owner"`
	LeaseSeconds   *float64 `json:"leaseSeconds"`
	MaxWaitSeconds *float64 `json:"maxWaitSeconds"`
	Branch         string   `json:"branch"`
	Purpose        string   `json:"purpose"`
	RequestID      *string  `json:"requestId"`
}

// renewRequest is POST /items/{id}/renew.
type renewRequest struct {
	FencingToken *int64   `json:"fencingToken"`
	LeaseSeconds *float64 `json:"leaseSeconds"`
	RequestID    *string  `json:"requestId"`
}

// releaseRequest is POST /items/{id}/release.
type releaseRequest struct {
	FencingToken *int64  `json:"fencingToken"`
	RequestID    *string `json:"requestId"`
}

func checkLease(field string, v *float64) *Problem {
	if v != nil && (math.IsNaN(*v) || *v <= 0) {
		return invalid(field, "%s must be a number of seconds above 0 (the lease granted is clamped to the ceiling; act on the returned leaseSeconds)", field)
	}
	return nil
}

// checkOwner checks the shape of a claim's owner (every route that takes
// one: a claim, a maintenance claim): present, a marker field value
// (ownerRe), and, when it has a run name (gating.OwnerRunName: for a worker
// what follows "<token name>/", for another role what follows the first
// "/"), a valid one (gating.RunNameProblem). A worker's owner that does not
// begin with its token's name and "/" passes here; checkWorkerOwner
// refuses it once the rest of the request is known to be well formed.
func checkOwner(c *credential, owner string) *Problem {
	example := c.name + "/run-1"
	if owner == "" {
		return invalid("owner", "owner is required (who holds the claim, e.g. %q)", example)
	}
	if run, has := gating.OwnerRunName(owner, c.role, c.name); has {
		if why := gating.RunNameProblem(run); why != "" {
			prefix, _ := strings.CutSuffix(owner, run)
			return invalid("owner", "owner %q names no valid run: %s; an owner is %q followed by a run name that begins with a letter or a digit, e.g. %q",
				owner, why, prefix, prefix+"run-1")
		}
	}
	if !ownerRe.MatchString(owner) {
		return invalid("owner", "owner %q must be 1 to 200 characters of letters, digits and . _ / @ : + - (no spaces: it goes into claim markers)", owner)
	}
	return nil
}

// checkWorkerOwner refuses (403 owner-not-allowed) a worker's owner that is
// not its own: its token's name, "/" and a run name (CONTRACT.md §4, §9).
func checkWorkerOwner(c *credential, owner string) *Problem {
	if c.role != gating.RoleWorker || gating.OwnedBy(owner, c.name) {
		return nil
	}
	return forbidden(ReasonOwnerNotAllowed, "a worker token named %s claims only under owners beginning with %q and a run name (e.g. %q), not %q",
		c.name, c.name+"/", c.name+"/run-1", owner)
}

func (h *handler) claim(w http.ResponseWriter, r *http.Request) {
	id, ok := h.pathID(w, r)
	if !ok {
		return
	}
	var req claimRequest
	if p := decode(w, r, &req, false); p != nil {
		h.fail(w, r, p)
		return
	}
	prob := checkOwner(credOf(r), req.Owner)
	if prob == nil && req.Branch != "" {
		prob = checkBranch("branch", req.Branch)
	}
	if prob == nil {
		prob = checkLease("leaseSeconds", req.LeaseSeconds)
	}
	if prob == nil && req.MaxWaitSeconds != nil && (math.IsNaN(*req.MaxWaitSeconds) || *req.MaxWaitSeconds < 0 || *req.MaxWaitSeconds > maxWait) {
		prob = invalid("maxWaitSeconds", "maxWaitSeconds must be from 0 to %d", maxWait)
	}
	if prob == nil && req.Purpose != "" && req.Purpose != "maintenance" {
		prob = invalid("purpose", "purpose is %q; it may only be omitted or \"maintenance\"", req.Purpose)
	}
	if prob == nil {
		prob = checkRequestID(req.RequestID)
	}
	if prob != nil {
		h.fail(w, r, prob)
		return
	}
	c := credOf(r)
	if req.Purpose == "maintenance" {
		if p := requireRole(r, "a maintenance claim", gating.RolePM, gating.RoleHuman); p != nil {
			h.fail(w, r, p)
			return
		}
	}
	if p := checkWorkerOwner(c, req.Owner); p != nil {
		h.fail(w, r, p)
		return
	}
	res, err := h.ledger.Claim(r.Context(), repoOf(r).ID, id, store.ClaimRequest{Owner: req.Owner, LeaseSeconds: req.LeaseSeconds,
		MaxWaitSeconds: req.MaxWaitSeconds, Branch: req.Branch, Purpose: req.Purpose, RequestID: deref(req.RequestID)}, actorOf(r))
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	// A replayed grant was told to the mirror when it was made.
	if res.Granted && !res.Replayed && h.opt.Writes != nil {
		h.opt.Writes.AfterClaim(context.WithoutCancel(r.Context()), repoOf(r), id, res, req.Purpose)
	}
	writeJSON(w, http.StatusOK, res)
}

func (h *handler) renew(w http.ResponseWriter, r *http.Request) {
	id, ok := h.pathID(w, r)
	if !ok {
		return
	}
	var req renewRequest
	if p := decode(w, r, &req, false); p != nil {
		h.fail(w, r, p)
		return
	}
	prob := checkToken("fencingToken", req.FencingToken, true)
	if prob == nil {
		prob = checkLease("leaseSeconds", req.LeaseSeconds)
	}
	if prob == nil {
		prob = checkRequestID(req.RequestID)
	}
	if prob != nil {
		h.fail(w, r, prob)
		return
	}
	res, err := h.ledger.RenewWith(r.Context(), repoOf(r).ID, id, store.RenewRequest{FencingToken: *req.FencingToken,
		LeaseSeconds: req.LeaseSeconds, RequestID: deref(req.RequestID)}, actorOf(r))
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

func (h *handler) release(w http.ResponseWriter, r *http.Request) {
	id, ok := h.pathID(w, r)
	if !ok {
		return
	}
	var req releaseRequest
	if p := decode(w, r, &req, false); p != nil {
		h.fail(w, r, p)
		return
	}
	prob := checkToken("fencingToken", req.FencingToken, true)
	if prob == nil {
		prob = checkRequestID(req.RequestID)
	}
	if prob != nil {
		h.fail(w, r, prob)
		return
	}
	res, err := h.ledger.ReleaseWith(r.Context(), repoOf(r).ID, id, store.ReleaseRequest{FencingToken: *req.FencingToken,
		RequestID: deref(req.RequestID)}, actorOf(r))
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	if res.Released && !res.Replayed && h.opt.Writes != nil {
		h.opt.Writes.AfterRelease(context.WithoutCancel(r.Context()), repoOf(r), id)
	}
	writeJSON(w, http.StatusOK, res)
}

func (h *handler) claimStatus(w http.ResponseWriter, r *http.Request) {
	id, ok := h.pathID(w, r)
	if !ok {
		return
	}
	st, err := h.ledger.Status(r.Context(), repoOf(r).ID, id)
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}
