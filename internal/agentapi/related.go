package agentapi

import (
	"net/http"
	"slices"
	"strings"

	"github.com/wardenhq/warden/gating"
)

// Reads the protocol's agents need to resolve their bindings and a
// candidate's blast radius: GET /regions (the routable homeRegion: values)
// and GET /repos/{owner}/{repo}/related (the items whose anchoredTo radius
// overlaps an item's or an anchor's). The overlap rule is gating's
// (gating.AnchorsOverlap, the one step 7 of the ready set applies); claim
// states are gating.ClaimStateOf's.

// Region is one region a replica of this deployment serves.
type Region struct {
	ID string `json:"id"`
	// Current: the region of the replica that answered (the one its claims
	// record).
	Current bool `json:"current"`
}

// Regions is GET /regions: the routable region ids of this deployment.
// Every replica of a deployment serves the same WARDEN_REGION, so there is
// exactly one, and it is current.
type Regions struct {
	Regions []Region `json:"regions"`
	Current string   `json:"current"`
}

func (h *handler) regions(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, Regions{Regions: []Region{{ID: h.opt.Region, Current: true}}, Current: h.opt.Region})
}

// SharedAnchor is one pair of overlapping anchors: Anchor is the seed's
// (the item's, or the anchor asked about), Overlaps the related item's.
type SharedAnchor struct {
	Anchor   string `json:"anchor"`
	Overlaps string `json:"overlaps"`
}

// RelatedItem is an item whose anchoredTo radius overlaps the seed's.
type RelatedItem struct {
	Item  gating.ItemID `json:"item"`
	Title string        `json:"title"`
	// State is the item's state: tag ("" when it has none: pending).
	State string `json:"state"`
	// ClaimState is held, lapsed, abandoned, released or "" (never
	// claimed); InFlight is true while it is held or lapsed, the items step
	// 7 of the ready set orders a candidate after.
	ClaimState gating.ClaimState `json:"claimState"`
	InFlight   bool              `json:"inFlight"`
	Shared     []SharedAnchor    `json:"shared"`
}

// Related is GET /related: the seed (an item, or the anchors asked about),
// its anchors, and every other item whose radius overlaps them, in number
// order; InFlight lists those of them in flight.
type Related struct {
	Item     *gating.ItemID  `json:"item"`
	Anchors  []string        `json:"anchors"`
	Related  []RelatedItem   `json:"related"`
	InFlight []gating.ItemID `json:"inFlight"`
}

// maxRelatedAnchors bounds the anchor parameters of one request.
const maxRelatedAnchors = 100

func (h *handler) related(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	itemArg, anchorArgs := q.Get("item"), q["anchor"]
	switch {
	case itemArg == "" && len(anchorArgs) == 0:
		h.fail(w, r, invalid("item", "name an item (item=issue-N) or one or more anchors (anchor=path)"))
		return
	case itemArg != "" && len(anchorArgs) > 0:
		h.fail(w, r, invalid("anchor", "name an item or anchors, not both: an item's radius is its own anchoredTo anchors"))
		return
	case len(anchorArgs) > maxRelatedAnchors:
		h.fail(w, r, invalid("anchor", "%d anchors: at most %d in one request", len(anchorArgs), maxRelatedAnchors))
		return
	}
	for _, a := range anchorArgs {
		if !gating.ValidAnchor(a) {
			h.fail(w, r, invalid("anchor", "%q is not a repository-relative path (no leading /, no .., no backslash)", a))
			return
		}
	}
	var seed gating.ItemID
	if itemArg != "" {
		id, p := itemID(itemArg)
		if p != nil {
			p.Field = "item"
			h.fail(w, r, p)
			return
		}
		seed = id
	}
	rs, err := h.ledger.Snapshot(r.Context(), repoOf(r).ID)
	if err != nil {
		h.failErr(w, r, err)
		return
	}
	out := Related{Anchors: anchorArgs, Related: []RelatedItem{}, InFlight: []gating.ItemID{}}
	items := rs.Snapshot.Items
	if seed != "" {
		i := slices.IndexFunc(items, func(c gating.Candidate) bool { return c.Item != nil && c.Item.ID == seed })
		if i < 0 {
			h.fail(w, r, problem(http.StatusNotFound, ReasonMissing, "%s is not an item of %s", seed, repoOf(r).FullName))
			return
		}
		out.Item, out.Anchors = &seed, items[i].Item.Targets(gating.AnchoredTo)
	}
	if out.Anchors == nil {
		out.Anchors = []string{}
	}
	for _, c := range items {
		if c.Item == nil || c.Item.ID == seed {
			continue
		}
		var shared []SharedAnchor
		for _, theirs := range c.Item.Targets(gating.AnchoredTo) {
			for _, mine := range out.Anchors {
				if gating.AnchorsOverlap(mine, theirs) {
					shared = append(shared, SharedAnchor{Anchor: mine, Overlaps: theirs})
				}
			}
		}
		if len(shared) == 0 {
			continue
		}
		st := gating.ClaimStateOf(c.Claim, rs.Snapshot.Now, rs.Snapshot.Quarantine)
		state, _ := c.Item.Tag("state")
		ri := RelatedItem{Item: c.Item.ID, Title: c.Item.Title, State: state, ClaimState: st, InFlight: st.InFlight(), Shared: shared}
		out.Related = append(out.Related, ri)
	}
	slices.SortFunc(out.Related, func(a, b RelatedItem) int { return compareIDs(a.Item, b.Item) })
	for _, ri := range out.Related {
		if ri.InFlight {
			out.InFlight = append(out.InFlight, ri.Item)
		}
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, out)
}

// compareIDs orders item ids by issue number (issue-9 before issue-10).
func compareIDs(a, b gating.ItemID) int {
	if c := a.Number() - b.Number(); c != 0 {
		return c
	}
	return strings.Compare(string(a), string(b))
}
