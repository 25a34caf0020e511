package agentapi

import (
	"net/http"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// ReadyItem is one item of the ready set, in claim order: its place
// (gating.ReadyEntry: the item, its priority, and the in-flight items whose
// anchoredTo radius overlaps it, which ordered it after the disjoint ones)
// with the item as GET /items shows it, and its attempts.
type ReadyItem struct {
	Item     gating.ItemID   `json:"item"`
	Priority string          `json:"priority"`
	Overlaps []gating.ItemID `json:"overlaps"`
	ItemView
	Attempts         int `json:"attempts"` // this epoch's
	LifetimeAttempts int `json:"lifetimeAttempts"`
}

// ReadySet is GET /ready: the ready set, what was left out and why, every
// defect the scan found, and the repository-wide alarms. Every list is
// present (empty, never null).
type ReadySet struct {
	Ready    []ReadyItem        `json:"ready"`
	Excluded []gating.Exclusion `json:"excluded"`
	Defects  []gating.Defect    `json:"defects"`
	Alarms   []string           `json:"alarms"`
	// ReadyCount is the size of the whole ready set (Ready may be cut to
	// the limit asked for).
	ReadyCount int `json:"readyCount"`
}

// Ready computes the ready set of a repository snapshot, keeping at most
// limit ready items (0: all).
func Ready(rs *store.Snapshot, limit int) ReadySet {
	return ReadyOf(rs, rs.Ready(), limit)
}

// ReadyOf is Ready for a result already computed from rs.
func ReadyOf(rs *store.Snapshot, r gating.Result, limit int) ReadySet {
	out := ReadySet{Ready: []ReadyItem{}, Excluded: r.Excluded, Defects: r.Defects, Alarms: r.Alarms, ReadyCount: len(r.Ready)}
	for _, e := range r.Ready {
		if limit > 0 && len(out.Ready) >= limit {
			break
		}
		ri := ReadyItem{Item: e.Item, Priority: e.Priority, Overlaps: e.Overlaps}
		if it := rs.Items[e.Item]; it != nil {
			ri.ItemView = ViewOf(*it)
		} else {
			ri.ItemView = ViewOf(store.Item{ID: e.Item})
		}
		ri.Attempts, ri.LifetimeAttempts = rs.Attempts(e.Item)
		if ri.Overlaps == nil {
			ri.Overlaps = []gating.ItemID{}
		}
		out.Ready = append(out.Ready, ri)
	}
	if out.Excluded == nil {
		out.Excluded = []gating.Exclusion{}
	}
	if out.Defects == nil {
		out.Defects = []gating.Defect{}
	}
	if out.Alarms == nil {
		out.Alarms = []string{}
	}
	return out
}

func (h *handler) ready(w http.ResponseWriter, r *http.Request) {
	// Like GET /items: 100 ready items unless asked (1 to 1000);
	// readyCount says how many there are.
	limit, p := parseLimit(r.URL.Query().Get("limit"))
	if p != nil {
		h.fail(w, r, p)
		return
	}
	rs, err := h.ledger.Snapshot(r.Context(), repoOf(r).ID)
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, Ready(rs, limit))
}

func (h *handler) report(w http.ResponseWriter, r *http.Request) {
	rs, err := h.ledger.Snapshot(r.Context(), repoOf(r).ID)
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	// The "where are we" report, clean re-claims (from the grant log) and
	// defaulted leases included; without the latter if they cannot be read.
	rep, err := h.ledger.Report(r.Context(), rs, rs.Ready())
	if err != nil {
		h.log.Warn("agent API: the report goes without its lease-defaulted lines", "repo", repoOf(r).FullName, "err", err)
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, rep)
}
