package mirror

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/go-github/v66/github"
)

// findOwnComment looks on GitHub for a comment warden (login bot) made on
// issue n since the given time, whose body begins with prefix, other than
// comment not: a write whose record was lost (its writer stopped between
// the post and the record) is adopted rather than made twice. One read per
// page of the comments since then. Without warden's own login it refuses
// rather than risk a second comment.
func findOwnComment(ctx context.Context, gh *github.Client, owner, name string, n int, bot, prefix string, since time.Time, not int64) (int64, error) {
	if bot == "" {
		return 0, fmt.Errorf("#%d: warden's own login is not known yet", n)
	}
	after := since.Add(-time.Second) // GitHub's times have one-second resolution
	opt := &github.IssueListCommentsOptions{Since: &after, ListOptions: github.ListOptions{PerPage: 100}}
	for {
		cs, resp, err := gh.Issues.ListComments(ctx, owner, name, n, opt)
		if err != nil {
			return 0, fmt.Errorf("list the comments of #%d: %w", n, err)
		}
		for _, c := range cs {
			if c.GetID() != not && strings.EqualFold(c.GetUser().GetLogin(), bot) && strings.HasPrefix(c.GetBody(), prefix) {
				return c.GetID(), nil
			}
		}
		if resp.NextPage == 0 {
			return 0, nil
		}
		opt.Page = resp.NextPage
	}
}
