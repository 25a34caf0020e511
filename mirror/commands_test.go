package mirror

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// refusalLines is a ReportSink that keeps the refusal lines it is given.
type refusalLines struct {
	mu    sync.Mutex
	lines []string
}

func (r *refusalLines) Publish(context.Context, store.Repo, int, []gating.ReportFinding) (string, error) {
	return "", nil
}

func (r *refusalLines) Refuse(_ context.Context, _ store.Repo, _ int, line string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, line)
	return "refusal reported", nil
}

func (r *refusalLines) Refresh(context.Context, store.Repo, int) (string, error) {
	return "status refreshed", nil
}

func (r *refusalLines) Flush(context.Context) (int, error) { return 0, nil }

func (r *refusalLines) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.lines)
}

// command is one comment carrying a command, made after offset.
type command struct {
	id            int64
	login, typ    string
	body          string
	after         time.Duration
	onPR, dryRun  bool
	wantOut       string // "" for no answer at all
	wantReaction  string // "" for none
	wantRefusalIn bool   // a line in the report comment
}

func (e *env) runCommandComment(t *testing.T, m *Mirror, t0 time.Time, c command) string {
	t.Helper()
	p := &issueCommentPayload{Action: "created"}
	p.Comment.ID, p.Comment.Body = c.id, c.body
	p.Comment.CreatedAt = t0.Add(c.after).Format(time.RFC3339)
	p.Comment.User.Login, p.Comment.User.Type = c.login, c.typ
	if p.Comment.User.Type == "" {
		p.Comment.User.Type = "User"
	}
	p.Issue.Number = 5
	out, err := m.handleCommand(e.ctx, Event{Name: "issue_comment", Action: "created"}, e.repoRow(), p, c.onPR)
	if err != nil {
		t.Fatalf("comment %d: %v", c.id, err)
	}
	return out
}

// TestCommands: the /backlog commands' permission rule, rate limit and
// answer (CONTRACT.md §7): +1 for a command carried out, confused for one
// refused, and a line in the report comment for a refusal to a person with
// triage or more.
func TestCommands(t *testing.T) {
	roles := map[string]string{"hana": "triage", "wes": "write", "rita": "read", "pm-agent": "write"}
	cases := []struct {
		name     string
		parked   bool
		commands []command
		// wantRemoved are the labels taken off the issue.
		wantRemoved    []string
		wantAdmittedBy string
		wantParked     bool
	}{{
		name:        "admit by a human with triage is done",
		commands:    []command{{id: 1, login: "hana", body: "/backlog admit", wantOut: "admitted by hana (/backlog admit)", wantReaction: "+1"}},
		wantRemoved: []string{"needs-specification"}, wantAdmittedBy: "hana",
	}, {
		name: "admit by a reader is refused, with no report line",
		commands: []command{{id: 1, login: "rita", body: "/backlog admit",
			wantOut: "/backlog admit by rita refused: /backlog admit needs triage or more on the repository", wantReaction: "confused"}},
	}, {
		name: "admit when the role lookup fails is refused (fail closed)",
		commands: []command{{id: 1, login: "carol", body: "/backlog admit",
			wantOut: "the permission lookup failed, so warden cannot tell whether carol has triage or more (fail closed)", wantReaction: "confused"}},
	}, {
		name: "admit by a configured agent is refused, with a report line",
		commands: []command{{id: 1, login: "pm-agent", body: "/backlog admit",
			wantOut: "/backlog admit is a human act, and pm-agent is a configured agent", wantReaction: "confused", wantRefusalIn: true}},
	}, {
		name:     "status needs no role",
		commands: []command{{id: 1, login: "rita", body: "/backlog status", wantOut: "status refreshed", wantReaction: "+1"}},
	}, {
		name: "an unknown verb is refused, with a report line for a writer",
		commands: []command{{id: 1, login: "wes", body: "/backlog frobnicate", wantOut: "/backlog frobnicate by wes refused", wantReaction: "confused",
			wantRefusalIn: true}},
	}, {
		name: "one command a minute per person and item",
		commands: []command{
			{id: 1, login: "hana", body: "/backlog status", wantOut: "status refreshed", wantReaction: "+1"},
			{id: 2, login: "hana", body: "/backlog status", after: 30 * time.Second, wantOut: "one command a minute per person and item",
				wantReaction: "confused", wantRefusalIn: true},
			{id: 3, login: "wes", body: "/backlog status", after: 40 * time.Second, wantOut: "status refreshed", wantReaction: "+1"},
			{id: 4, login: "hana", body: "/backlog status", after: 61 * time.Second, wantOut: "status refreshed", wantReaction: "+1"},
		},
	}, {
		name: "a comment is answered once",
		commands: []command{
			{id: 1, login: "hana", body: "/backlog status", wantOut: "status refreshed", wantReaction: "+1"},
			{id: 1, login: "hana", body: "/backlog status", wantOut: "command already answered", wantReaction: "+1"},
		},
	}, {
		name: "a bot's and warden's commands are ignored",
		commands: []command{
			{id: 1, login: "helper[bot]", typ: "Bot", body: "/backlog admit"},
			{id: 2, login: testBot, body: "/backlog admit"},
		},
	}, {
		name:     "not a command",
		commands: []command{{id: 1, login: "hana", body: "please /backlog admit"}},
	}, {
		name:     "only recheck on a pull request",
		commands: []command{{id: 1, login: "hana", body: "/backlog admit", onPR: true, wantOut: "only /backlog recheck works on a pull request", wantReaction: "confused", wantRefusalIn: true}},
	}, {
		name:        "unpark of a parked item is done",
		parked:      true,
		commands:    []command{{id: 1, login: "hana", body: "/backlog unpark", wantOut: "unparked by hana (/backlog unpark)", wantReaction: "+1"}},
		wantRemoved: []string{"stale"},
	}, {
		name:     "unpark of an item that is not parked is refused",
		commands: []command{{id: 1, login: "hana", body: "/backlog unpark", wantOut: "issue-5 is not parked", wantReaction: "confused", wantRefusalIn: true}},
	}, {
		name:           "dry run: the command is carried out, nothing is written to GitHub",
		commands:       []command{{id: 1, login: "hana", body: "/backlog admit", dryRun: true, wantOut: "admitted by hana"}},
		wantAdmittedBy: "hana",
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			f := newFakeCalls(e.clock.Now)
			for k, v := range roles {
				f.roles[k] = v
			}
			m := e.newMirror(f)
			rep := &refusalLines{}
			m.Reports = rep
			dry := false
			m.Settings = func(context.Context, store.Repo) gating.Settings {
				s := gating.DefaultSettings()
				s.DryRun = dry
				return s
			}
			if tc.parked {
				e.createGated(5, append(tags(), "state:parked", "ruling-owner:pm", "ruling-topic:spec"), "backlog", "stale")
				f.labelEvent(5, "labeled", "stale", testBot, "Bot", e.clock.Now())
			} else {
				e.createGated(5, tags(), "backlog", "needs-specification")
				f.labelEvent(5, "labeled", "needs-specification", "backlog-pm[bot]", "Bot", e.clock.Now())
			}
			t0 := e.clock.Now().Truncate(time.Second)
			for _, c := range tc.commands {
				dry = c.dryRun
				before := len(rep.all())
				out := e.runCommandComment(t, m, t0, c)
				if c.wantOut == "" && out != "" || !strings.Contains(out, c.wantOut) {
					t.Errorf("comment %d: outcome %q, want %q", c.id, out, c.wantOut)
				}
				var want []string
				if c.wantReaction != "" {
					want = []string{c.wantReaction}
				}
				if got := f.reactionsOn(c.id); !slices.Equal(got, want) {
					t.Errorf("comment %d: reactions %v, want %v", c.id, got, want)
				}
				if got := len(rep.all()) > before; got != c.wantRefusalIn {
					t.Errorf("comment %d: report line %v, want %v (%v)", c.id, got, c.wantRefusalIn, rep.all())
				}
			}
			answered := slices.DeleteFunc(slices.Clone(tc.commands), func(c command) bool {
				return c.wantReaction == "" || c.wantOut == "command already answered"
			})
			if got := f.calls("react"); len(got) != len(answered) {
				t.Errorf("reactions made %v, want %d", got, len(answered))
			}
			var removed []string
			for _, c := range f.calls("removeLabel") {
				removed = append(removed, strings.TrimPrefix(c, "removeLabel 5 "))
			}
			if !slices.Equal(removed, tc.wantRemoved) {
				t.Errorf("labels removed %v, want %v", removed, tc.wantRemoved)
			}
			a, err := e.acts.Admission(e.ctx, e.repo, 5)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if a != nil {
				got = a.By
			}
			if got != tc.wantAdmittedBy {
				t.Errorf("admitted by %q, want %q", got, tc.wantAdmittedBy)
			}
			it, err := e.l.Get(e.ctx, e.repo, gating.IDFor(5))
			if err != nil {
				t.Fatal(err)
			}
			if it.HasTag("state:parked") != tc.wantParked {
				t.Errorf("parked %v, want %v", it.HasTag("state:parked"), tc.wantParked)
			}
			// One lookup per login (the cache, or the command's own memo).
			if got := f.calls("role"); len(slices.Compact(slices.Sorted(slices.Values(got)))) != len(got) {
				t.Errorf("role lookups %v: one login looked up twice", got)
			}
		})
	}
}
