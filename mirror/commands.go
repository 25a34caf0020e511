package mirror

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/db"
)

// command_log: every comment warden answered as a command (each comment
// once), with who ran it on which item and when (its created_at: the rate
// limit is GitHub's time, not the order of receipt), and the answer.
var commandMigrations = []db.Migration{{Version: 1, SQL: `CREATE TABLE command_log (
	repo_id BIGINT NOT NULL,
	comment_id BIGINT NOT NULL,
	number BIGINT NOT NULL,
	login TEXT NOT NULL,
	verb TEXT NOT NULL,
	at BIGINT NOT NULL,
	result TEXT NOT NULL,
	PRIMARY KEY (repo_id, comment_id))`}}

// Command answers.
const (
	commandDone        = "done"
	commandRefused     = "refused"
	commandRateLimited = "rate-limited"
)

// answered reports whether the comment was already answered as a command.
func (a *Acts) answered(ctx context.Context, repoID, commentID int64) (bool, error) {
	var n int
	err := a.db.Read.QueryRowContext(ctx, `SELECT COUNT(*) FROM command_log WHERE repo_id = $1 AND comment_id = $2`, repoID, commentID).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("is comment %d answered: %w", commentID, err)
	}
	return n > 0, nil
}

// lastCommand is when login last ran a command (not rate-limited) on the
// item before `before`, other than the comment commentID (zero: never).
func (a *Acts) lastCommand(ctx context.Context, repoID int64, number int, login string, commentID int64, before time.Time) (time.Time, error) {
	var at sql.NullInt64
	err := a.db.Read.QueryRowContext(ctx, `SELECT MAX(at) FROM command_log WHERE repo_id = $1 AND number = $2 AND login = $3
		AND comment_id <> $4 AND at <= $5 AND result <> $6`, repoID, number, strings.ToLower(login), commentID, before.UnixMilli(), commandRateLimited).Scan(&at)
	if err != nil {
		return time.Time{}, fmt.Errorf("last command of %s on #%d: %w", login, number, err)
	}
	if !at.Valid {
		return time.Time{}, nil
	}
	return time.UnixMilli(at.Int64).UTC(), nil
}

func (a *Acts) logCommand(ctx context.Context, repoID, commentID int64, number int, login, verb string, at time.Time, result string) error {
	_, err := a.db.Write.ExecContext(ctx, `INSERT INTO command_log (repo_id, comment_id, number, login, verb, at, result)
		VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (repo_id, comment_id) DO NOTHING`,
		repoID, commentID, number, strings.ToLower(login), verb, at.UnixMilli(), result)
	if err != nil {
		return fmt.Errorf("log the command in comment %d: %w", commentID, err)
	}
	return nil
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
func (m *Mirror) handleCommand(ctx context.Context, ev Event, repo Repo, p *issueCommentPayload, onPR bool) (string, error) {
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
	done, err := m.Acts.answered(ctx, repo.ID, p.Comment.ID)
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

	result, outcome := commandDone, ""
	last, err := m.Acts.lastCommand(ctx, repo.ID, n, login, p.Comment.ID, at)
	if err != nil {
		return "", err
	}
	switch {
	case gating.RateLimited(last, at):
		result, err = commandRateLimited, refuseCommand("one command a minute per person and item; the last was at %s", last.Format(time.RFC3339))
	case cmd.Refused():
		err = refuseCommand("%s", cmd.Refusal)
	default:
		outcome, err = m.runCommand(ctx, repo, n, cmd, login, typ, lookup, at, onPR)
	}
	var refusal *commandRefusal
	switch {
	case errors.As(err, &refusal):
		if result == commandDone {
			result = commandRefused
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
	if result != commandDone {
		reaction = "confused"
	}
	if err := m.react(ctx, repo, p.Comment.ID, reaction); err != nil {
		return "", err
	}
	if err := m.Acts.logCommand(ctx, repo.ID, p.Comment.ID, n, login, verb, at, result); err != nil {
		return "", err
	}
	return outcome, nil
}

// role is login's role_name on the repository (cached; an error fails the
// acts that need it closed).
func (m *Mirror) role(ctx context.Context, repo Repo, login string) (string, error) {
	gh, err := m.GitHub.Installation(repo.Installation)
	if err != nil {
		return "", err
	}
	owner, name, _ := strings.Cut(repo.FullName, "/")
	return m.Perms.Role(ctx, gh, owner, name, login)
}

// runCommand checks the permission rule and carries the command out. A
// *commandRefusal is a refusal; any other error is retried.
func (m *Mirror) runCommand(ctx context.Context, repo Repo, n int, cmd gating.Command, login, typ string, lookup func() (string, error), at time.Time, onPR bool) (string, error) {
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
		if err := m.admit(ctx, repo, n, login, at, "/backlog admit"); err != nil {
			return "", err
		}
		gh, err := m.GitHub.Installation(repo.Installation)
		if err != nil {
			return "", err
		}
		if err := m.removeLabel(ctx, gh, repo, set, n, set.AdmissionLabel); err != nil {
			return "", err
		}
		return fmt.Sprintf("%s admitted by %s (/backlog admit)", id, login), nil
	case gating.VerbUnpark:
		it, err := m.Ledger.Get(ctx, repo.ID, id)
		if err != nil {
			return "", err
		}
		if !it.hasTag("state:parked") {
			return "", refuseCommand("%s is not parked", id)
		}
		out, err := m.unpark(ctx, repo, n, login, at, "/backlog unpark")
		if err != nil {
			return "", err
		}
		gh, err := m.GitHub.Installation(repo.Installation)
		if err != nil {
			return "", err
		}
		return out, m.removeLabel(ctx, gh, repo, set, n, set.ParkedLabel)
	case gating.VerbPark:
		return m.manualPark(ctx, repo, set, n, login, cmd.RulingOwner, cmd.RulingTopic, cmd.Question, at)
	case gating.VerbResolve:
		rs, err := m.Ledger.ClaimSnapshot(ctx, repo.ID, id)
		if err != nil {
			return "", err
		}
		if !rs.Trails[id].CollisionHold {
			return "", refuseCommand("%s has no takeover-collision hold to resolve", id)
		}
		if err := m.Acts.Resolve(ctx, repo.ID, n, m.now(), login); err != nil {
			return "", err
		}
		return fmt.Sprintf("%s: takeover collision resolved by %s", id, login), nil
	}
	return "", refuseCommand("unknown command")
}

// react puts a reaction on a comment (GitHub answers 200 for one already
// there). dry_run writes nothing to GitHub, reactions included.
func (m *Mirror) react(ctx context.Context, repo Repo, commentID int64, content string) error {
	if m.settings(ctx, repo).DryRun {
		return nil
	}
	gh, err := m.GitHub.Installation(repo.Installation)
	if err != nil {
		return err
	}
	owner, name, _ := strings.Cut(repo.FullName, "/")
	if _, _, err := gh.Reactions.CreateIssueCommentReaction(ctx, owner, name, commentID, content); err != nil {
		return fmt.Errorf("react %s to comment %d on %s: %w", content, commentID, repo.FullName, err)
	}
	return nil
}

// recheckPR reads the pull request afresh (one read), records it and
// re-runs the check run on its head, then re-derives the divergences of the
// items it links.
func (m *Mirror) recheckPR(ctx context.Context, repo Repo, n int) (string, error) {
	gh, err := m.GitHub.Installation(repo.Installation)
	if err != nil {
		return "", err
	}
	owner, name, _ := strings.Cut(repo.FullName, "/")
	pr, _, err := gh.PullRequests.Get(ctx, owner, name, n)
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
