package mirror

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/go-github/v66/github"

	"github.com/wardenhq/warden/mirror/store"
)

// SettingsCheckRunName is the check run a push that changes SettingsPath
// gets on its head commit (CONTRACT.md §2): success, or failure with one
// annotation per problem at its line.
const SettingsCheckRunName = "backlog/settings"

// Bounds of the backlog/settings run: the annotations sent (a page of 50
// each request) and the problems its summary lists.
const (
	maxSettingsAnnotations = 250
	maxSettingsSummaryList = 100
)

// settingsRunKey is the backlog/settings run's record in check_runs, whose
// key is the head commit; the prefix keeps it apart from the `backlog`
// run's record on the same commit.
func settingsRunKey(sha string) string { return "settings/" + sha }

// settingsCheck is what the backlog/settings run on a pushed head says.
type settingsCheck struct {
	sha       string
	branch    string // the branch pushed
	onDefault bool   // the push was to the default branch: it was judged
	absent    bool   // the head has no settings file
	human     bool   // a human pushed it: the file took effect
	why       string // why the push is not a human's
	by        string // who pushed
	// older is the push whose file is in effect (or was judged) when this
	// one is older than it: this one was only checked.
	older    string
	rejudge  bool // the push was judged before: rebuild this from the row unless the run is written
	problems []SettingsProblem
	changes  []settingChange // what the push changes (or would change)
}

// checkBranch checks the file at sha on a branch other than the default:
// read at the head (one contents GET) and parsed against the settings in
// effect. Nothing takes effect.
func (s *SettingsStore) checkBranch(ctx context.Context, r store.Repo, sha, branch string) (*settingsCheck, error) {
	gh, err := s.client(r)
	if err != nil {
		return nil, err
	}
	file, err := s.fetch(ctx, gh, r, sha)
	if err != nil {
		return nil, err
	}
	cur := s.Get(ctx, r)
	proposed, problems := file.parse(cur)
	return &settingsCheck{sha: sha, branch: branch, absent: file.Absent, problems: problems, changes: settingsDiff(cur, proposed)}, nil
}

// recheck rebuilds the run of a push judged before (a redelivery, or a
// retry after the run's write failed): an agent's push still pending from
// the row as it is; any other from its file, read again at the head (one
// contents GET) against the settings in effect.
func (s *SettingsStore) recheck(ctx context.Context, r store.Repo, c settingsCheck) (*settingsCheck, error) {
	rec, _, err := s.read(ctx, r.ID)
	if err != nil {
		return nil, fmt.Errorf("settings of %s: %w", r.FullName, err)
	}
	c.rejudge = false
	if rec.pending != nil && rec.pending.SHA == c.sha && c.older == "" {
		c.absent, c.by, c.problems = rec.pending.Absent, rec.pending.By, rec.findings()
		c.why = "not made by a human"
		proposed, _ := rec.pending.parse(rec.settings)
		c.changes = settingsDiff(rec.settings, proposed)
		return &c, nil
	}
	gh, err := s.client(r)
	if err != nil {
		return nil, err
	}
	file, err := s.fetch(ctx, gh, r, c.sha)
	if err != nil {
		return nil, err
	}
	_, c.problems = file.parse(rec.settings)
	c.absent = file.Absent
	if c.sha == rec.sourceSHA && c.older == "" {
		c.human, c.by = true, rec.changedBy
	} else if c.older == "" {
		c.older = rec.sourceSHA
	}
	return &c, nil
}

// settingsCheckRun writes the backlog/settings run a push brought (nil:
// none). A push judged before is written only if its run is not (it is
// rebuilt first: recheck). Under dry run nothing is written. Of two pushes
// of one commit, the second edits the first one's run.
func (m *Mirror) settingsCheckRun(ctx context.Context, repo store.Repo, c *settingsCheck) (string, error) {
	if c == nil || m.SettingsStore == nil {
		return "", nil
	}
	// One writer per head at a time, across replicas on PostgreSQL: two
	// pushes of one commit (to the default branch and another) must not
	// both create its run.
	unlock, err := m.Ledger.Lock(ctx, fmt.Sprintf("settings-run/%d/%s", repo.ID, c.sha))
	if err != nil {
		return "", fmt.Errorf("%s check run on %s: %w", SettingsCheckRunName, shortSHA(c.sha), err)
	}
	defer unlock()
	if c.rejudge {
		old, err := m.Ledger.CheckRun(ctx, repo.ID, settingsRunKey(c.sha))
		if err != nil {
			return "", err
		}
		if old != nil && old.ID != 0 {
			if _, pages := splitWritten(old.WrittenHash); pages == 0 && old.WrittenHash != checkRunCreating {
				return "", nil // written in full when the push was judged
			}
		}
		if c, err = m.SettingsStore.recheck(ctx, repo, *c); err != nil {
			return "", err
		}
	}
	set := m.settings(ctx, repo)
	return m.writeRun(ctx, repo, set.DryRun, c.write())
}

// write renders the run.
func (c *settingsCheck) write() checkRunWrite {
	w := checkRunWrite{name: SettingsCheckRunName, key: settingsRunKey(c.sha), sha: c.sha}
	if len(c.problems) == 0 {
		w.conclusion = "success"
	} else {
		w.conclusion = "failure"
	}
	w.title, w.summary = c.text()
	if !c.absent {
		for i, p := range c.problems {
			if i == maxSettingsAnnotations {
				break
			}
			w.annotations = append(w.annotations, settingsAnnotation(p))
		}
	}
	return w
}

// settingsAnnotation is one problem as an annotation at its line (the
// first, for a problem about the whole file).
func settingsAnnotation(p SettingsProblem) *github.CheckRunAnnotation {
	line := max(p.Line, 1)
	title := p.Key
	if title == "" {
		title = SettingsPath
	}
	at := p
	at.Line = 0 // the annotation is at the line
	return &github.CheckRunAnnotation{Path: github.String(SettingsPath), StartLine: github.Int(line), EndLine: github.Int(line),
		AnnotationLevel: github.String("failure"), Title: github.String(cut(p.Code+": "+title, 255)), Message: github.String(at.String())}
}

// text is the run's title and summary: what the push does, then each
// problem.
func (c *settingsCheck) text() (title, summary string) {
	var b strings.Builder
	n := len(c.problems)
	wholeFile := false
	for _, p := range c.problems {
		if p.Key == "" {
			wholeFile = true
		}
	}
	code := "`" + SettingsPath + "`"
	switch {
	case !c.onDefault:
		title = "Settings checked: valid"
		if c.absent {
			title = "No settings file: the defaults would apply"
		}
		fmt.Fprintf(&b, "Checked only: nothing takes effect from branch `%s`. Settings take effect when a human's push brings %s to the default branch", c.branch, code)
		if n > 0 {
			b.WriteString("; there, each setting that fails keeps its last good value and the others take effect.")
		} else {
			b.WriteString(".")
		}
	case c.older != "":
		title = "Settings checked: valid"
		fmt.Fprintf(&b, "This push is older than push %s, whose settings file is in effect or was judged already; this one was checked only, and changes nothing.", shortSHA(c.older))
	case c.absent && c.human:
		title = "No settings file: the defaults apply"
		fmt.Fprintf(&b, "This commit has no %s, so every setting takes its default.", code)
		if len(c.changes) > 0 {
			b.WriteString(" Changed: " + changeList(c.changes) + ".")
		}
	case c.human:
		title = "Settings applied"
		if len(c.changes) == 0 {
			b.WriteString("The push changes no setting.")
		} else {
			b.WriteString("The settings take effect: " + changeList(c.changes) + ".")
		}
		if n > 0 {
			if wholeFile {
				b.WriteString(" The file cannot be read, so every setting keeps its last good value.")
			} else {
				b.WriteString(" Each setting that fails below keeps its last good value; the others take effect.")
			}
		}
	default:
		title = "Settings unchanged"
		fmt.Fprintf(&b, "This push was not made by a human (%s, %s), so no setting changes: the settings in effect stay until a human pushes the change (%s).",
			cmpOr(c.by, "unknown"), cmpOr(c.why, "not a human"), SettingsChangedByAgent)
		if c.absent {
			fmt.Fprintf(&b, " It removes %s; the defaults would apply.", code)
		}
	}
	if n > 0 {
		title = fmt.Sprintf("%s in %s", plural(n, "problem"), SettingsPath)
		if c.onDefault && !c.human && c.older == "" {
			title = "Settings change refused: " + plural(n, "problem")
		}
		b.WriteString("\n\n")
		for i, p := range c.problems {
			if i == maxSettingsSummaryList {
				fmt.Fprintf(&b, "- … and %d more\n", n-i)
				break
			}
			fmt.Fprintf(&b, "- `%s` %s\n", p.Code, strings.ReplaceAll(p.String(), "\n", " "))
		}
		if n > maxSettingsAnnotations && !c.absent {
			fmt.Fprintf(&b, "\nThe first %d are annotated in the file.\n", maxSettingsAnnotations)
		}
		b.WriteString("\n`warden settings check " + SettingsPath + "` shows the same problems before a push.")
	}
	return title, strings.TrimSpace(b.String())
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
