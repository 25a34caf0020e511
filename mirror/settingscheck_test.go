package mirror

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-github/v66/github"

	"github.com/wardenhq/warden/mirror/store"
)

func TestSettingsCheckWrite(t *testing.T) {
	bad := []byte("labels:\n  item: backlog\npoision_threshold: 2\nrequire_item: yes please\n")
	probs := ValidateSettingsFile(bad)
	cases := []struct {
		name        string
		check       settingsCheck
		conclusion  string
		title       string
		summary     []string // substrings
		annotations []int    // their lines
	}{
		{"a human's push with problems", settingsCheck{onDefault: true, human: true, problems: probs},
			"failure", "2 problems in .github/backlog.yml",
			[]string{"Each setting that fails below keeps its last good value; the others take effect.",
				"- `settings-invalid` line 3: poision_threshold: unknown key, ignored; did you mean poison_threshold?",
				"warden settings check"}, []int{3, 4}},
		{"a human's good push", settingsCheck{onDefault: true, human: true, changes: []settingChange{{"dry_run", "false", "true"}}},
			"success", "Settings applied", []string{"The settings take effect: dry_run false → true."}, nil},
		{"an unreadable file", settingsCheck{onDefault: true, human: true, problems: ValidateSettingsFile([]byte("a: [\n"))},
			"failure", "1 problem in .github/backlog.yml", []string{"every setting keeps its last good value"}, []int{2}},
		{"a human deletes the file", settingsCheck{onDefault: true, human: true, absent: true},
			"success", "No settings file: the defaults apply", []string{"every setting takes its default"}, nil},
		{"an agent's push", settingsCheck{onDefault: true, by: "robo[bot]", why: "robo[bot] is a bot account",
			problems: []SettingsProblem{{Code: SettingsChangedByAgent, Line: 2, Key: "dry_run", Message: "would change"}}},
			"failure", "Settings change refused: 1 problem", []string{"not made by a human (robo[bot], robo[bot] is a bot account)", "settings-changed-by-agent"}, []int{2}},
		{"an agent deletes the file", settingsCheck{onDefault: true, absent: true, by: "robo[bot]", why: "a bot",
			problems: []SettingsProblem{{Code: SettingsChangedByAgent, Key: "dry_run", Message: "would change"}}},
			"failure", "Settings change refused: 1 problem", []string{"It removes"}, nil},
		{"another branch", settingsCheck{branch: "feature", problems: probs}, "failure", "2 problems in .github/backlog.yml",
			[]string{"Checked only: nothing takes effect from branch `feature`"}, []int{3, 4}},
		{"another branch, valid", settingsCheck{branch: "feature"}, "success", "Settings checked: valid", []string{"Checked only"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.check.sha = headA
			w := c.check.write()
			if w.name != SettingsCheckRunName || w.key != "settings/"+headA || w.conclusion != c.conclusion || w.title != c.title {
				t.Errorf("run %s %s %s %q, want %s %s %q", w.name, w.key, w.conclusion, w.title, SettingsCheckRunName, c.conclusion, c.title)
			}
			for _, s := range c.summary {
				if !strings.Contains(w.summary, s) {
					t.Errorf("summary does not say %q:\n%s", s, w.summary)
				}
			}
			if len(w.annotations) != len(c.annotations) {
				t.Fatalf("%d annotations, want %d", len(w.annotations), len(c.annotations))
			}
			for i, a := range w.annotations {
				if a.GetPath() != SettingsPath || a.GetStartLine() != c.annotations[i] || a.GetEndLine() != c.annotations[i] ||
					a.GetAnnotationLevel() != "failure" || strings.HasPrefix(a.GetMessage(), "line ") || a.GetMessage() == "" {
					t.Errorf("annotation %d: %s %d-%d %s %q, want %s at line %d, failure, a message without its line", i,
						a.GetPath(), a.GetStartLine(), a.GetEndLine(), a.GetAnnotationLevel(), a.GetMessage(), SettingsPath, c.annotations[i])
				}
			}
		})
	}
	t.Run("the suggestion is in the annotation", func(t *testing.T) {
		w := (&settingsCheck{sha: headA, onDefault: true, human: true, problems: probs}).write()
		if m := w.annotations[0].GetMessage(); m != "poision_threshold: unknown key, ignored; did you mean poison_threshold?" {
			t.Errorf("message %q", m)
		}
	})
}

// annotationCalls counts the annotations each check run was sent.
type annotationCalls struct {
	*fakeCalls
	sent map[int64][]int // run → the annotations of each request
}

func (a *annotationCalls) createCheckRun(ctx context.Context, opts github.CreateCheckRunOptions) (int64, error) {
	id, err := a.fakeCalls.createCheckRun(ctx, opts)
	if err == nil {
		a.sent[id] = append(a.sent[id], len(opts.GetOutput().Annotations))
	}
	return id, err
}

func (a *annotationCalls) updateCheckRun(ctx context.Context, id int64, opts github.UpdateCheckRunOptions) error {
	err := a.fakeCalls.updateCheckRun(ctx, id, opts)
	if err == nil {
		a.sent[id] = append(a.sent[id], len(opts.GetOutput().Annotations))
	}
	return err
}

// TestWriteRunPagesAnnotations: GitHub takes 50 annotations a request;
// the rest go in edits, each page once even across a failed write, and a
// redelivery writes nothing.
func TestWriteRunPagesAnnotations(t *testing.T) {
	e := newEnv(t)
	f := newFakeCalls(e.clock.Now)
	a := &annotationCalls{fakeCalls: f, sent: map[int64][]int{}}
	m := e.newMirror(f)
	m.calls = func(store.Repo) (repoCalls, error) { return a, nil }
	var probs []SettingsProblem
	for i := range 120 {
		probs = append(probs, SettingsProblem{Code: SettingsInvalid, Line: i + 1, Key: fmt.Sprintf("k%d", i), Message: "unknown key, ignored"})
	}
	w := (&settingsCheck{sha: headA, onDefault: true, human: true, problems: probs}).write()
	ctx := withNewHead(e.ctx, headA)
	step := func(name string, wantCalls int) {
		t.Helper()
		f.mu.Lock()
		f.log = nil
		f.mu.Unlock()
		if _, err := m.writeRun(ctx, e.repoRow(), false, w); err != nil {
			t.Logf("%s: %v", name, err)
		}
		if got := len(f.calls("")); got != wantCalls {
			t.Errorf("%s: %d calls %v, want %d", name, got, f.calls(""), wantCalls)
		}
	}
	f.fail["updateCheckRun"] = fmt.Errorf("502")
	step("the create, then a failed page", 2)
	delete(f.fail, "updateCheckRun")
	step("the retry sends the two pages left", 2)
	step("a redelivery writes nothing", 0)
	if len(a.sent) != 1 {
		t.Fatalf("runs %v, want one", a.sent)
	}
	for id, pages := range a.sent {
		if fmt.Sprint(pages) != "[50 50 20]" {
			t.Errorf("run %d got annotations %v, want [50 50 20]", id, pages)
		}
	}
	t.Run("dry run", func(t *testing.T) {
		w := (&settingsCheck{sha: headB, onDefault: true, human: true, problems: probs[:3]}).write()
		f.log = nil
		out, err := m.writeRun(withNewHead(e.ctx, headB), e.repoRow(), true, w)
		if err != nil || !strings.Contains(out, "would be failure (dry run)") || len(f.calls("")) != 0 {
			t.Errorf("%q %v, calls %v", out, err, f.calls(""))
		}
		if rec, err := e.l.CheckRun(e.ctx, e.repo, settingsRunKey(headB)); err != nil || rec != nil {
			t.Errorf("record %+v %v, want none", rec, err)
		}
	})
}
