package gating

// MaxAdoptedFence bounds the fencing token a ledger rebuilt from GitHub
// continues above: a marker naming a larger one is hostile or broken, and
// is not followed (a token near the int64 limit would leave no room).
const MaxAdoptedFence = 1 << 40

// TrailFence is the highest fencing token the item's trusted worker markers
// name (a claim's or an outcome's fence, a takeover's prior fence), 0 for
// none, and the claim marker that announced that token when one did (nil
// otherwise); markers naming more than MaxAdoptedFence are ignored. A
// ledger that lost its grant log (a new database, a restore from an older
// backup) raises the item's fence to it, so that no token a worker ever
// held is issued again, and records that claim as the grant that owns the
// fence. Markers count as the trail counts them: from an agent, warden, or
// a login with write access, in the text first seen.
func TrailFence(id ItemID, comments []TrailComment) (int64, *Marker) {
	var most int64
	var claim *Marker
	for i := range comments {
		c := &comments[i]
		if !(c.AuthorIsAgent || c.AuthorIsWarden || c.AuthorHasWrite) {
			continue
		}
		m, st := ParseMarker(c.Body, id)
		if st != MarkerValid || !m.Kind.Worker() {
			continue
		}
		for _, f := range []int64{m.Fence, m.PriorFence} {
			if f > most && f <= MaxAdoptedFence {
				most, claim = f, nil
			}
		}
		if m.Kind == KindClaim && m.Fence == most && claim == nil {
			claim = &m
		}
	}
	return most, claim
}
