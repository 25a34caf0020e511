package harness

import (
	"testing"

	"github.com/wardenhq/warden/gating"
)

// End-to-end tests of CONTRACT.md §5's admission table: what warden does on
// GitHub (labels, the report comment) and what the agent API then says (the
// ready set).

// TestE2EAdmissionAtCreation: an item made by anyone but a human with
// triage+ carries the admission label (added if missing) and is not ready;
// one made by a human with triage+ is admitted at creation: no admission
// label, and it is in the ready set.
func TestE2EAdmissionAtCreation(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	agent := x.agent("builder[bot]", "write")
	maria := x.Person("maria", "maintain")
	tom := x.Person("tom", "triage")

	type row struct {
		name  string
		make  func(t *testing.T) int
		gated bool
	}
	rows := []row{
		{"agent opens with the item label", func(t *testing.T) int {
			iss, err := agent.OpenIssue(x.Repo, "Proposed by an agent", "spec", lblItem)
			if err != nil {
				t.Fatal(err)
			}
			return iss.Number
		}, true},
		{"agent adds the item label", func(t *testing.T) int {
			iss, err := agent.OpenIssue(x.Repo, "Plain issue by an agent", "spec")
			if err != nil {
				t.Fatal(err)
			}
			x.MustSettle(t)
			if _, err := agent.AddLabels(x.Repo, iss.Number, lblItem); err != nil {
				t.Fatal(err)
			}
			return iss.Number
		}, true},
		{"outsider opens with the item label", func(t *testing.T) int {
			return x.openWithLabelsAs(t, "olga", "", "Filed by an outsider", lblItem)
		}, true},
		{"read-only person opens with the item label", func(t *testing.T) int {
			return x.openWithLabelsAs(t, "rita", "read", "Filed by a reader", lblItem)
		}, true},
		{"pm token creates", func(t *testing.T) int {
			return num(t, x.create(t, PMToken, "Made by the pm agent", []string{"priority:P1"}))
		}, true},
		{"maintainer opens with the item label", func(t *testing.T) int {
			iss, err := maria.OpenIssue(x.Repo, "Filed by a maintainer", "spec", lblItem)
			if err != nil {
				t.Fatal(err)
			}
			return iss.Number
		}, false},
		{"triage person adds the item label", func(t *testing.T) int {
			iss, err := tom.OpenIssue(x.Repo, "Filed by a triager", "spec")
			if err != nil {
				t.Fatal(err)
			}
			x.MustSettle(t)
			if _, err := tom.AddLabels(x.Repo, iss.Number, lblItem); err != nil {
				t.Fatal(err)
			}
			return iss.Number
		}, false},
		{"human token creates", func(t *testing.T) int {
			return num(t, x.create(t, HumanToken, "Made by a maintainer's CLI", []string{"priority:P1"}))
		}, false},
	}
	nums := make([]int, len(rows))
	for i, r := range rows {
		nums[i] = r.make(t)
		x.MustSettle(t)
	}
	x.flush(t)
	s := x.mustReady(t)
	for i, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			n, id := nums[i], idOf(nums[i])
			if _, ok := x.item(t, id); !ok {
				t.Fatalf("%s is not an item", id)
			}
			l := x.labels(n)
			if !l[lblItem] {
				t.Errorf("#%d lost the item label: %v", n, l)
			}
			if r.gated {
				if !l[lblAdmission] {
					t.Errorf("#%d lacks the admission label: %v", n, l)
				}
				if s.has(id) || s.exclusion(id) != gating.ExAwaitingAdmission {
					t.Errorf("%s: ready %v, excluded as %q, want awaiting-admission", id, s.ids(), s.exclusion(id))
				}
				return
			}
			if l[lblAdmission] {
				t.Errorf("#%d carries the admission label, want admitted at creation: %v", n, l)
			}
			if !s.has(id) {
				t.Errorf("%s is not ready (excluded as %q): ready %v", id, s.exclusion(id), s.ids())
			}
			x.reportLacks(t, n, "agent-removed-admission", "admission-unrecorded")
		})
	}
}

// TestE2EAdmissionLabelActs: removing and adding the admission label and
// removing the item label, by a human with triage+, an agent and a reader.
func TestE2EAdmissionLabelActs(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	const agentLogin = "builder[bot]"
	agent := x.agent(agentLogin, "write")
	maria := x.Person("maria", "maintain")
	tom := x.Person("tom", "triage")

	gated := func(title string) int { return num(t, x.create(t, PMToken, title, []string{"priority:P1"})) }
	admitted := func(title string) int { return num(t, x.create(t, HumanToken, title, []string{"priority:P1"})) }
	type row struct {
		name  string
		setup func(title string) int
		act   func(t *testing.T, n int)
		check func(t *testing.T, n int, s readySet)
	}
	rows := []row{
		{"triage human removes the admission label", gated, func(t *testing.T, n int) {
			if _, err := tom.RemoveLabel(x.Repo, n, lblAdmission); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, n int, s readySet) {
			id := idOf(n)
			if x.labels(n)[lblAdmission] {
				t.Errorf("#%d: the admission label came back after a triager removed it", n)
			}
			if !s.has(id) {
				t.Errorf("%s not admitted: excluded as %q", id, s.exclusion(id))
			}
			x.reportLacks(t, n, "agent-removed-admission", "admission-unrecorded")
		}},
		{"agent removes the admission label", gated, func(t *testing.T, n int) {
			if _, err := agent.RemoveLabel(x.Repo, n, lblAdmission); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, n int, s readySet) {
			id := idOf(n)
			if !x.labels(n)[lblAdmission] {
				t.Errorf("#%d: warden did not re-add the admission label an agent removed", n)
			}
			if s.has(id) || s.exclusion(id) != gating.ExAwaitingAdmission {
				t.Errorf("%s: excluded as %q, want awaiting-admission", id, s.exclusion(id))
			}
			x.mustReportWith(t, n, []string{"agent-removed-admission"}, agentLogin)
			if c := x.apiFindings(t, s, id, "agent-removed-admission"); c != 1 {
				t.Errorf("%s: the API (GET /ready, GET /report) lists agent-removed-admission %d times, want once: %+v", id, c, s.Defects)
			}
			// The label is back: nothing reads it as absent.
			x.reportLacks(t, n, "admission-unrecorded")
		}},
		{"agent removes the admission label twice", gated, func(t *testing.T, n int) {
			if _, err := agent.RemoveLabel(x.Repo, n, lblAdmission); err != nil {
				t.Fatal(err)
			}
			x.MustSettle(t)
			x.flush(t) // the first report comment is out
			if !x.labels(n)[lblAdmission] {
				t.Fatalf("#%d: the admission label was not re-added after the first removal", n)
			}
			if _, err := agent.RemoveLabel(x.Repo, n, lblAdmission); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, n int, s readySet) {
			id := idOf(n)
			if !x.labels(n)[lblAdmission] {
				t.Errorf("#%d: warden did not re-add the admission label after the second removal", n)
			}
			if rs := x.reportComments(n); len(rs) != 1 || !rs[0].Edited {
				t.Errorf("#%d has %d report comments (%+v), want one, edited in place", n, len(rs), rs)
			}
			body := x.mustReportWith(t, n, []string{"agent-removed-admission"}, agentLogin)
			x.reportLacks(t, n, "admission-unrecorded")
			if line := findingLine(body, "agent-removed-admission"); body != "" && !countLike.MatchString(line) {
				t.Errorf("#%d: the finding does not count the repeat (2 removals): %q", n, line)
			}
			if c := x.apiFindings(t, s, id, "agent-removed-admission"); c != 1 {
				t.Errorf("%s: the API (GET /ready, GET /report) lists agent-removed-admission %d times, want once (repeats counted): %+v", id, c, s.Defects)
			}
			if s.has(id) {
				t.Errorf("%s is ready", id)
			}
		}},
		{"read-only person removes the admission label", gated, func(t *testing.T, n int) {
			x.removeLabelAs(t, "rita", "read", n, lblAdmission)
		}, func(t *testing.T, n int, s readySet) {
			id := idOf(n)
			if !x.labels(n)[lblAdmission] {
				t.Errorf("#%d: warden did not re-add the admission label a reader removed", n)
			}
			if s.has(id) {
				t.Errorf("%s is ready", id)
			}
			x.mustReportWith(t, n, []string{"agent-removed-admission"}, "rita")
			x.reportLacks(t, n, "admission-unrecorded")
		}},
		{"agent adds the admission label back", admitted, func(t *testing.T, n int) {
			if _, err := agent.AddLabels(x.Repo, n, lblAdmission); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, n int, s readySet) {
			id := idOf(n)
			if !x.labels(n)[lblAdmission] {
				t.Errorf("#%d: the admission label an agent added was reverted", n)
			}
			if s.has(id) || s.exclusion(id) != gating.ExAwaitingAdmission {
				t.Errorf("%s: excluded as %q, want awaiting-admission", id, s.exclusion(id))
			}
			x.reportLacks(t, n, "agent-removed-admission")
		}},
		{"maintainer adds the admission label back", admitted, func(t *testing.T, n int) {
			if _, err := maria.AddLabels(x.Repo, n, lblAdmission); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, n int, s readySet) {
			id := idOf(n)
			if !x.labels(n)[lblAdmission] {
				t.Errorf("#%d: the admission label a maintainer added was reverted", n)
			}
			if s.has(id) || s.exclusion(id) != gating.ExAwaitingAdmission {
				t.Errorf("%s: excluded as %q, want awaiting-admission", id, s.exclusion(id))
			}
		}},
		{"agent removes the item label", admitted, func(t *testing.T, n int) {
			if _, err := agent.RemoveLabel(x.Repo, n, lblItem); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, n int, s readySet) {
			id := idOf(n)
			if !x.labels(n)[lblItem] {
				t.Errorf("#%d: warden did not re-add the item label an agent removed", n)
			}
			if _, ok := x.item(t, id); !ok {
				t.Errorf("%s is no longer an item", id)
			}
			if !s.has(id) {
				t.Errorf("%s left the ready set (excluded as %q)", id, s.exclusion(id))
			}
			// "re-adds it and reports": the contract names no separate code
			// for the agent's case; the report names the actor.
			x.mustReportWith(t, n, nil, agentLogin)
		}},
		{"maintainer removes the item label", admitted, func(t *testing.T, n int) {
			if _, err := maria.RemoveLabel(x.Repo, n, lblItem); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, n int, s readySet) {
			id := idOf(n)
			if x.labels(n)[lblItem] {
				t.Errorf("#%d: warden re-added the item label a human removed", n)
			}
			if _, ok := x.item(t, id); !ok {
				t.Errorf("%s is no longer an item: forgetting is explicit", id)
			}
			x.mustReportWith(t, n, []string{"item-label-removed"})
		}},
	}
	nums := make([]int, len(rows))
	for i, r := range rows {
		nums[i] = r.setup(r.name)
	}
	x.MustSettle(t)
	for i, r := range rows {
		r.act(t, nums[i])
		x.MustSettle(t)
	}
	x.flush(t)
	s := x.mustReady(t)
	for i, r := range rows {
		t.Run(r.name, func(t *testing.T) { r.check(t, nums[i], s) })
	}
}
