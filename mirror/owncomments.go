package mirror

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/go-github/v66/github"
)

// ownCommentCalls is the GitHub read that finds a comment of warden's
// whose record was lost.
type ownCommentCalls interface {
	// issueComments is one page (100) of issue n's comments updated since the
	// given time (100 a page; page 0 is the first), and the next page's
	// number (0: none).
	issueComments(ctx context.Context, n int, since time.Time, page int) (cs []*github.IssueComment, nextPage int, err error)
}

// findOwnComment looks on GitHub for a comment warden (login bot) made
// on issue n since the given time, whose body begins with prefix, other
// than comment not: a write whose record was lost (its writer stopped
// between the post and the record) is adopted rather than made twice. One
// read per page of the comments since then. Without warden's own login it
// refuses rather than risk a second comment.
func findOwnComment(ctx context.Context, c ownCommentCalls, n int, bot, prefix string, since time.Time, not int64) (int64, error) {
	if bot == "" {
		return 0, fmt.Errorf("#%d: warden's own login is not known yet", n)
	}
	after := since.Add(-time.Second) // GitHub's times have one-second resolution
	page := 0
	for {
		cs, next, err := c.issueComments(ctx, n, after, page)
		if err != nil {
			return 0, fmt.Errorf("list the comments of #%d: %w", n, err)
		}
		for _, cm := range cs {
			if cm.GetID() != not && strings.EqualFold(cm.GetUser().GetLogin(), bot) && strings.HasPrefix(cm.GetBody(), prefix) {
				return cm.GetID(), nil
			}
		}
		if next == 0 {
			return 0, nil
		}
		page = next
	}
}
