package gating

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// FindingsComment is one comment on a research item's issue posted during
// the claim, as the completion proof reads it: its author, whether the
// author is an agent (a Bot, a configured or recorded agent login) or
// warden itself, and whether it is bookkeeping (it starts with a marker)
// rather than prose.
type FindingsComment struct {
	Author string
	At     time.Time
	Agent  bool
	Warden bool
	Marker bool
}

// researchVerdict is the proof of a phase:research item (CONTRACT.md §9: it
// completes once the holder commented its findings on the issue during the
// claim): a prose comment by HolderLogin, the login that posted the claim
// marker of the current fence. A comment by any other login is not the
// findings, and the refusal names whose comments there were and whose they
// must be. When the holder's login is unknown (no marker by the holder is
// recorded: warden posted it under post_markers, or none was posted) a prose
// comment by an agent login (not a human, not warden) counts, and the
// verdict says so.
func researchVerdict(in CompletionInput) CompletionVerdict {
	it, c := in.Item, in.Claim
	var prose []FindingsComment
	for _, fc := range in.Findings {
		if !fc.Marker && !fc.Warden && fc.Author != "" {
			prose = append(prose, fc)
		}
	}
	since := fmt.Sprintf("since the claim at fence %d was granted at %s", c.Fence, fmtTime(c.GrantedAt))
	if h := in.HolderLogin; h != "" {
		for _, fc := range prose {
			if strings.EqualFold(fc.Author, h) {
				return CompletionVerdict{Proven: true, Detail: fmt.Sprintf("%s is phase:research and its findings were commented on issue #%d by %s, the claim holder's login (it posted the claim marker of fence %d), at %s",
					it.ID, it.ID.Number(), fc.Author, c.Fence, fmtTime(fc.At))}
			}
		}
		if len(prose) > 0 {
			return CompletionVerdict{Reason: ReasonCompletionUnproven, Detail: fmt.Sprintf("%s is phase:research: the comments on issue #%d %s are by %s, but the findings must be commented by %s, the claim holder's login (it posted the claim marker of fence %d); another login's comment is not the holder's findings",
				it.ID, it.ID.Number(), since, authors(prose), h, c.Fence)}
		}
		return CompletionVerdict{Reason: ReasonCompletionUnproven, Detail: fmt.Sprintf("%s is phase:research: no findings were commented on issue #%d by %s, the claim holder's login (it posted the claim marker of fence %d), %s",
			it.ID, it.ID.Number(), h, c.Fence, since)}
	}
	unknown := fmt.Sprintf("the claim holder's login is unknown (no claim marker of fence %d by its holder is recorded: warden posted it under post_markers, or none was posted)", c.Fence)
	for _, fc := range prose {
		if fc.Agent {
			return CompletionVerdict{Proven: true, Detail: fmt.Sprintf("%s is phase:research: %s, so the comment by agent login %s on issue #%d at %s, during the claim, was taken as its findings",
				it.ID, unknown, fc.Author, it.ID.Number(), fmtTime(fc.At))}
		}
	}
	if len(prose) > 0 {
		return CompletionVerdict{Reason: ReasonCompletionUnproven, Detail: fmt.Sprintf("%s is phase:research: the comments on issue #%d %s are by %s, who are not agents; %s, so the findings must be commented by an agent login (not a human, not warden)",
			it.ID, it.ID.Number(), since, authors(prose), unknown)}
	}
	return CompletionVerdict{Reason: ReasonCompletionUnproven, Detail: fmt.Sprintf("%s is phase:research: no findings were commented on issue #%d %s; %s, so a comment by an agent login (not a human, not warden) is needed",
		it.ID, it.ID.Number(), since, unknown)}
}

// authors lists the distinct authors of comments, in order.
func authors(cs []FindingsComment) string {
	var out []string
	for _, fc := range cs {
		if !slices.ContainsFunc(out, func(a string) bool { return strings.EqualFold(a, fc.Author) }) {
			out = append(out, fc.Author)
		}
	}
	return strings.Join(out, ", ")
}
