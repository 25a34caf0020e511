package mirror

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/go-github/v66/github"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// commandCalls are the GitHub calls of the /backlog commands themselves:
// the answer (a reaction), the label a done admit or unpark takes off, and
// the read of a pull request to recheck. What a command sets in motion (a
// park, a settle, a check run) makes its own.
type commandCalls interface {
	labelCalls
	// react puts the reaction content on issue comment commentID.
	react(ctx context.Context, commentID int64, content string) error
	// pull reads pull request n.
	pull(ctx context.Context, n int) (*github.PullRequest, error)
}

// commandRefusal is a command warden does not carry out, and why.
type commandRefusal struct{ why string }

func (r *commandRefusal) Error() string { return r.why }

func refuseCommand(format string, a ...any) error { return &commandRefusal{fmt.Sprintf(format, a...)} }

// handleCommand answers a `/backlog` command in a newly created comment on
// an item's issue, or /backlog recheck on a pull request (onPR) (CONTRACT.md §7): the first command line counts, each
// comment once; commands from warden or any bot are ignored; the
// permission rule, then the rate limit (one a minute per user and item),
// then the act. The answer is a reaction (+1 done, confused refused); a
// refusal to a person with triage or more also gets a line in the report
// comment saying why.
func (m *Mirror) handleCommand(ctx context.Context, ev Event, repo store.Repo, p *issueCommentPayload, onPR bool) (string, error) {
	if ev.Action != "created" || ev.FromSelf {
		return "", nil
	}
	login, typ := p.Comment.User.Login, p.Comment.User.Type
	if typ != "User" || strings.EqualFold(login, m.botLogin()) || strings.EqualFold(login, "ghost") {
		return "", nil
	}
	cmd, ok := gating.ParseCommand(p.Comment.Body)
	if !ok {
		return "", nil
	}
	done, err := m.Acts.Answered(ctx, repo.ID, p.Comment.ID)
	if err != nil || done {
		return "command already answered", err
	}
	at, ok := parseGHTime(p.Comment.CreatedAt)
	if !ok {
		return "", fmt.Errorf("comment %d: created_at %q is no time", p.Comment.ID, p.Comment.CreatedAt)
	}
	n := p.Issue.Number
	verb := cmd.Verb
	if verb == "" {
		verb = "?"
	}
	// Who is asking: the role is looked up (cached) only when the verb needs
	// triage, or to decide whether a refusal gets a line in the report.
	var role string
	var roleErr error
	looked := false
	lookup := func() (string, error) {
		if !looked {
			looked = true
			role, roleErr = m.role(ctx, repo, login)
		}
		return role, roleErr
	}

	result, outcome := store.CommandDone, ""
	last, err := m.Acts.LastCommand(ctx, repo.ID, n, login, p.Comment.ID, at)
	if err != nil {
		return "", err
	}
	switch {
	case gating.RateLimited(last, at):
		result, err = store.CommandRateLimited, refuseCommand("one command a minute per person and item; the last was at %s", last.Format(time.RFC3339))
	case cmd.Refused():
		err = refuseCommand("%s", cmd.Refusal)
	default:
		outcome, err = m.runCommand(ctx, repo, n, cmd, login, typ, lookup, at, onPR, payloadSpec(p.Issue.Title, p.Issue.Body, p.Issue.UpdatedAt))
	}
	var refusal *commandRefusal
	switch {
	case errors.As(err, &refusal):
		if result == store.CommandDone {
			result = store.CommandRefused
		}
		outcome = fmt.Sprintf("/backlog %s by %s refused: %s", verb, login, refusal.why)
		if r, err := lookup(); err == nil && gating.TriagePlus(r) && m.Reports != nil {
			line := fmt.Sprintf("`/backlog %s` by %s at %s was refused: %s", verb, login, at.Format(time.RFC3339), refusal.why)
			if _, err := m.Reports.Refuse(ctx, repo, n, line); err != nil {
				return "", err
			}
		}
	case err != nil:
		return "", err // retried; nothing logged, so the retry answers it
	}
	reaction := "+1"
	if result != store.CommandDone {
		reaction = "confused"
	}
	if err := m.react(ctx, repo, p.Comment.ID, reaction); err != nil {
		return "", err
	}
	if err := m.Acts.LogCommand(ctx, repo.ID, p.Comment.ID, n, login, verb, at, result); err != nil {
		return "", err
	}
	return outcome, nil
}

// runCommand checks the permission rule and carries the command out; spec
// is the issue's text as the command's payload showed it (what /backlog
// admit admits). A *commandRefusal is a refusal; any other error is
// retried.
func (m *Mirror) runCommand(ctx context.Context, repo store.Repo, n int, cmd gating.Command, login, typ string, lookup func() (string, error), at time.Time, onPR bool, spec gating.SpecState) (string, error) {
	if onPR && cmd.Verb != gating.VerbRecheck {
		return "", refuseCommand("only /backlog recheck works on a pull request; /backlog %s is for an item's issue", cmd.Verb)
	}
	needsHuman, needsTriage := gating.CommandRule(cmd.Verb)
	if needsTriage {
		role, roleErr := lookup()
		if roleErr != nil {
			return "", refuseCommand("the permission lookup failed, so warden cannot tell whether %s has triage or more (fail closed); try again", login)
		}
		if !gating.TriagePlus(role) {
			return "", refuseCommand("/backlog %s needs triage or more on the repository", cmd.Verb)
		}
	}
	if needsHuman {
		if who := m.judge(ctx, repo, login, typ); !who.Human {
			return "", refuseCommand("/backlog %s is a human act, and %s is %s", cmd.Verb, login, who.Why)
		}
	}
	id := gating.IDFor(n)
	set := m.settings(ctx, repo)
	switch cmd.Verb {
	case gating.VerbStatus:
		if m.Reports == nil {
			return "status: no report comments", nil
		}
		return m.Reports.Refresh(ctx, repo, n)
	case gating.VerbRecheck:
		if onPR {
			return m.recheckPR(ctx, repo, n)
		}
		if err := m.reconcileItems(ctx, repo); err != nil {
			return "", err
		}
		out, err := m.settleItem(ctx, repo, n)
		return "rechecked " + string(id) + ": " + out, err
	case gating.VerbAdmit:
		if err := m.admit(ctx, repo, n, login, at, "/backlog admit", spec); err != nil {
			return "", err
		}
		c, err := m.callsFor(repo)
		if err != nil {
			return "", err
		}
		if err := m.removeLabel(ctx, c, repo, set, n, set.AdmissionLabel); err != nil {
			return "", err
		}
		return fmt.Sprintf("%s admitted by %s (/backlog admit)", id, login), nil
	case gating.VerbUnpark:
		it, err := m.Ledger.Get(ctx, repo.ID, id)
		if err != nil {
			return "", err
		}
		if !it.HasTag("state:parked") {
			return "", refuseCommand("%s is not parked", id)
		}
		out, err := m.unpark(ctx, repo, n, login, at, "/backlog unpark")
		if err != nil {
			return "", err
		}
		c, err := m.callsFor(repo)
		if err != nil {
			return "", err
		}
		return out, m.removeLabel(ctx, c, repo, set, n, set.ParkedLabel)
	case gating.VerbPark:
		return m.manualPark(ctx, repo, set, n, login, cmd.RulingOwner, cmd.RulingTopic, cmd.Question, at)
	case gating.VerbUndelivered:
		return m.undelivered(ctx, repo, n, cmd.PR, login, at)
	case gating.VerbDispatch:
		return m.forceDispatch(ctx, repo, set, n, cmd.Agent, login, at)
	case gating.VerbResolve:
		rs, err := m.Ledger.ClaimSnapshot(ctx, repo.ID, id)
		if err != nil {
			return "", err
		}
		tr := rs.Trails[id]
		hold := tr.CollisionHold
		rewritten := slices.ContainsFunc(tr.Findings, func(f gating.TrailFinding) bool { return f.Code == gating.CodePriorBranchRewritten })
		// A pm's edge removals are acknowledged too (edge-removed).
		acked, err := m.Acts.AckEdgeRemovals(ctx, repo.ID, n, "", "", login, "/backlog resolve", m.now())
		if err != nil {
			return "", err
		}
		if !hold && !rewritten && acked == 0 {
			return "", refuseCommand("%s has no takeover-collision hold, no prior-branch-rewritten and no edge removal to resolve", id)
		}
		var outs []string
		if hold || rewritten {
			if err := m.Acts.Resolve(ctx, repo.ID, n, m.now(), login); err != nil {
				return "", err
			}
			if hold {
				outs = append(outs, "takeover collision resolved")
			}
			if rewritten {
				outs = append(outs, "prior branch rewrite acknowledged")
			}
		}
		if acked > 0 {
			outs = append(outs, fmt.Sprintf("%d edge removal(s) acknowledged", acked))
		}
		return fmt.Sprintf("%s: %s by %s", id, strings.Join(outs, ", "), login), nil
	}
	return "", refuseCommand("unknown command")
}

// undelivered records a human's ruling that merged pull request pr did not
// deliver item n (/backlog undelivered #<pr>), then re-derives the
// divergences, so the pull request makes no merged-not-complete for the
// item and the ready set offers it again (unless something else excludes
// it), and settles the item. The ruling is refused unless warden recorded
// pr as merged and it links the item (gating.UndeliveredRefusal); a ruling
// already recorded is answered as done.
func (m *Mirror) undelivered(ctx context.Context, repo store.Repo, n, pr int, login string, at time.Time) (string, error) {
	id := gating.IDFor(n)
	f, err := m.repoFacts(ctx, repo)
	if err != nil {
		return "", err
	}
	if why := gating.UndeliveredRefusal(f, id, pr); why != "" {
		return "", refuseCommand("%s", why)
	}
	fresh, err := m.Acts.Disown(ctx, repo.ID, n, pr, login, at)
	if err != nil {
		return "", err
	}
	if err := m.reconcileItems(ctx, repo); err != nil {
		return "", err
	}
	out, err := m.settleItem(ctx, repo, n)
	if err != nil {
		return "", err
	}
	what := fmt.Sprintf("%s: pull request #%d ruled not to have delivered it by %s (/backlog undelivered)", id, pr, login)
	if !fresh {
		what = fmt.Sprintf("%s: pull request #%d was already ruled not to have delivered it (/backlog undelivered by %s)", id, pr, login)
	}
	if out != "" {
		what += "; " + out
	}
	return what, nil
}

// react puts a reaction on a comment (GitHub answers 200 for one already
// there). dry_run writes nothing to GitHub, reactions included.
func (m *Mirror) react(ctx context.Context, repo store.Repo, commentID int64, content string) error {
	if m.settings(ctx, repo).DryRun {
		m.heldWrite(repo, "reaction", "comment", commentID, "content", content)
		return nil
	}
	c, err := m.callsFor(repo)
	if err != nil {
		return err
	}
	if err := c.react(ctx, commentID, content); err != nil {
		return fmt.Errorf("react %s to comment %d on %s: %w", content, commentID, repo.FullName, err)
	}
	return nil
}

// recheckPR reads the pull request afresh (one read), records it and
// re-runs the check run on its head, then re-derives the divergences of the
// items it links.
func (m *Mirror) recheckPR(ctx context.Context, repo store.Repo, n int) (string, error) {
	c, err := m.callsFor(repo)
	if err != nil {
		return "", err
	}
	pr, err := c.pull(ctx, n)
	if err != nil {
		return "", fmt.Errorf("read pull request #%d: %w", n, err)
	}
	rec := pullRecordOf(pr)
	if _, err := m.Ledger.RecordPull(ctx, repo.ID, rec); err != nil {
		return "", err
	}
	out, err := m.checkHead(ctx, repo, rec.HeadSHA)
	if err != nil {
		return "", err
	}
	if err := m.reconcileItems(ctx, repo); err != nil {
		return "", err
	}
	if out == "" {
		out = fmt.Sprintf("check run on %s unchanged", shortSHA(rec.HeadSHA))
	}
	return fmt.Sprintf("pull request #%d rechecked: %s", n, out), nil
}
