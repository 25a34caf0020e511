package main

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/wardenhq/warden/internal/ghsim"
	"github.com/wardenhq/warden/internal/harness"
	"github.com/wardenhq/warden/mirror/store"
)

// ---- the workload ----

// errSkip: the act's precondition does not hold now; another is picked.
var errSkip = errors.New("skip")

type acAct struct {
	weight int
	run    func() error
}

func (r *acRun) act() error {
	acts := []acAct{
		{6, r.humanOpensItem},
		{4, r.agentOpensItem},
		{2, r.pmCreatesItem},
		{4, r.someoneOpensPlainIssue},
		{4, r.humanRemovesAdmission},
		{2, r.agentRemovesAdmission},
		{2, r.admitCommand},
		{3, r.statusCommand},
		{12, r.proseComment},
		{12, r.claimCycle},
		{4, r.editComment},
		{2, r.deleteComment},
		{6, r.labelChurnPlain},
		{3, r.otherLabelOnItem},
		{3, r.closeOrReopen},
		{2, r.humanUnparks},
		{1, r.agentRemovesPark},
		{1, r.staleBotLabelsItem},
		{1, r.humanParksByLabel},
		{3, r.push},
	}
	total := 0
	for _, a := range acts {
		total += a.weight
	}
	for tries := 0; tries < 100; tries++ {
		k := r.rng.IntN(total)
		for _, a := range acts {
			if k -= a.weight; k < 0 {
				err := a.run()
				if errors.Is(err, errSkip) {
					break
				}
				return err
			}
		}
	}
	return errors.New("no act could run")
}

func (r *acRun) pick(as []*ghsim.Actor) *ghsim.Actor { return as[r.rng.IntN(len(as))] }

// issueState reads an issue's state and labels (lower case) on GitHub.
func (r *acRun) issueState(n int) (open bool, labels map[string]bool) {
	labels = map[string]bool{}
	r.e.Sim.Locked(func() {
		i := r.e.Repo.Issues[n]
		if i == nil {
			return
		}
		open = i.State == "open"
		for _, l := range i.Labels {
			labels[strings.ToLower(l.Name)] = true
		}
	})
	return open, labels
}

// openItems are the open items whose labels satisfy keep.
func (r *acRun) openItems(keep func(labels map[string]bool) bool) []int {
	var out []int
	for _, n := range r.items {
		if open, l := r.issueState(n); open && keep(l) {
			out = append(out, n)
		}
	}
	return out
}

func (r *acRun) pickNum(ns []int) (int, error) {
	if len(ns) == 0 {
		return 0, errSkip
	}
	return ns[r.rng.IntN(len(ns))], nil
}

func gated(l map[string]bool) bool     { return l[acAdmissionLabel] }
func parked(l map[string]bool) bool    { return l[acParkedLabel] }
func anyItem(map[string]bool) bool     { return true }
func claimable(l map[string]bool) bool { return !l[acAdmissionLabel] && !l[acParkedLabel] }

var titles = []string{"Rotate the signing keys", "Cache the permission lookups", "Shard the claim table", "Retry the reconcile pass",
	"Document the settings file", "Trim the report comment", "Backfill the label events", "Page the delivery log"}

func (r *acRun) title() string {
	return fmt.Sprintf("%s (%d)", titles[r.rng.IntN(len(titles))], len(r.steps))
}

func (r *acRun) addItem(n int) { r.items = append(r.items, n); r.isItem[n] = true }

func (r *acRun) humanOpensItem() error {
	a := r.pick(r.triagers)
	return r.do(acStep{Name: "human (triage+) opens an item"}, func() error {
		i, err := a.OpenIssue(r.e.Repo, r.title(), "What must be true, by a maintainer.", acItemLabel)
		if err == nil {
			r.addItem(i.Number)
		}
		return err
	})
}

func (r *acRun) agentOpensItem() error {
	// warden adds the admission label: one write.
	return r.do(acStep{Name: "agent opens an item", Want: 1}, func() error {
		i, err := r.builder.OpenIssue(r.e.Repo, r.title(), "Proposed by an agent.", acItemLabel)
		if err == nil {
			r.addItem(i.Number)
		}
		return err
	})
}

func (r *acRun) pmCreatesItem() error {
	return r.do(acStep{Name: "pm agent creates an item (API)", Outside: true}, func() error {
		var out struct {
			ID string `json:"id"`
		}
		code, err := r.e.API(r.ctx, harness.PMToken, http.MethodPost, "/items",
			map[string]any{"title": r.title(), "specification": "What must be true.", "tags": []string{"priority:P2"}}, &out)
		if err != nil || code != http.StatusCreated {
			return fmt.Errorf("POST /items: %d %v", code, err)
		}
		var n int
		if _, err := fmt.Sscanf(out.ID, "issue-%d", &n); err != nil {
			return fmt.Errorf("item id %q", out.ID)
		}
		r.addItem(n)
		return nil
	})
}

func (r *acRun) someoneOpensPlainIssue() error {
	a := r.pick([]*ghsim.Actor{r.maria, r.tom, r.rita, r.rita, r.builder})
	return r.do(acStep{Name: "someone opens an issue that is no item"}, func() error {
		i, err := a.OpenIssue(r.e.Repo, r.title(), "Something I noticed.")
		if err == nil {
			r.plain = append(r.plain, i.Number)
		}
		return err
	})
}

func (r *acRun) humanRemovesAdmission() error {
	n, err := r.pickNum(r.openItems(gated))
	if err != nil {
		return err
	}
	a := r.pick(r.triagers)
	return r.do(acStep{Name: "human (triage+) removes the admission label", Number: n}, func() error {
		_, err := a.RemoveLabel(r.e.Repo, n, acAdmissionLabel)
		return err
	})
}

func (r *acRun) agentRemovesAdmission() error {
	n, err := r.pickNum(r.openItems(gated))
	if err != nil {
		return err
	}
	// warden re-adds it: one write (and the report comment).
	return r.do(acStep{Name: "agent removes the admission label", Want: 1, Number: n}, func() error {
		_, err := r.builder.RemoveLabel(r.e.Repo, n, acAdmissionLabel)
		return err
	})
}

func (r *acRun) admitCommand() error {
	n, err := r.pickNum(r.openItems(gated))
	if err != nil {
		return err
	}
	a := r.pick(r.triagers)
	// The reaction and the admission label's removal: two writes.
	return r.do(acStep{Name: "/backlog admit by a human (triage+)", Want: 2, Number: n}, func() error {
		_, err := a.Comment(r.e.Repo, n, "Spec reads fine.\n\n/backlog admit")
		return err
	})
}

func (r *acRun) statusCommand() error {
	n, err := r.pickNum(r.openItems(anyItem))
	if err != nil {
		return err
	}
	a := r.pick(r.humans)
	// The reaction (and the report comment, refreshed).
	return r.do(acStep{Name: "/backlog status", Want: 1, Number: n}, func() error {
		_, err := a.Comment(r.e.Repo, n, "/backlog status")
		return err
	})
}

var prose = []string{"Looks good to me.", "Could this wait until the release?", "I can reproduce it on main.",
	"See the discussion in the design doc.", "Quoting the protocol:\n\n> <!-- backlog-worker: claim item=issue-1 -->\n\nthis is prose.",
	"Any update here?", "Added a failing test locally."}

func (r *acRun) proseComment() error {
	var n int
	var name string
	if len(r.plain) > 0 && r.rng.IntN(3) == 0 {
		n, name = r.plain[r.rng.IntN(len(r.plain))], "comment (prose) on an issue that is no item"
	} else if len(r.items) > 0 {
		n, name = r.items[r.rng.IntN(len(r.items))], "comment (prose) on an item"
	} else {
		return errSkip
	}
	a := r.pick([]*ghsim.Actor{r.maria, r.tom, r.rita, r.olga, r.builder, r.worker})
	return r.do(acStep{Name: name, Number: n}, func() error {
		c, err := a.Comment(r.e.Repo, n, prose[r.rng.IntN(len(prose))])
		if err == nil {
			r.comments = append(r.comments, &acComment{id: c.ID, n: n, by: a})
		}
		return err
	})
}

// claimCycle: a claim through the agent API, the claim marker posted by the
// agent, sometimes progress (a comment, a push to the claim's branch), the
// release, sometimes the outcome marker. The third attempt parks the item
// at its release.
func (r *acRun) claimCycle() error {
	ready := r.openItems(claimable)
	if len(ready) == 0 {
		return errSkip
	}
	// Mostly the most-tried item, so items reach the poison threshold.
	n := ready[r.rng.IntN(len(ready))]
	if r.rng.IntN(10) < 6 {
		slices.SortStableFunc(ready, func(a, b int) int { return r.claimsOn[b] - r.claimsOn[a] })
		n = ready[0]
	}
	id := fmt.Sprintf("issue-%d", n)
	r.claimSeq++
	token, owner, agent := harness.WorkerToken, fmt.Sprintf("worker-7/%d", r.claimSeq), r.worker
	if r.rng.IntN(3) == 0 {
		token, owner, agent = harness.PMToken, fmt.Sprintf("pm/%d", r.claimSeq), r.pmBot
	}
	branch := ""
	if r.rng.IntN(2) == 0 {
		branch = fmt.Sprintf("%s-%d", strings.ReplaceAll(owner, "/", "-"), n)
	}
	var res store.ClaimResult
	if err := r.do(acStep{Name: "claim (API)", Outside: true, Number: n}, func() error {
		body := map[string]any{"owner": owner, "leaseSeconds": 600}
		if branch != "" {
			body["branch"] = branch
		}
		code, err := r.e.API(r.ctx, token, http.MethodPost, "/items/"+id+"/claim", body, &res)
		if err != nil || code != http.StatusOK {
			return fmt.Errorf("claim %s: %d %v", id, code, err)
		}
		return nil
	}); err != nil {
		return err
	}
	if !res.Granted || res.FencingToken == nil {
		return nil // refused (the ledger knows better than the labels): the act is over
	}
	r.claimsOn[n]++
	fence := *res.FencingToken
	marker := fmt.Sprintf("<!-- backlog-worker: claim item=%s owner=%s region=local fence=%d at=%s -->\nPicking this up.",
		id, owner, fence, r.clk.Now().UTC().Format("2006-01-02T15:04:05Z"))
	if err := r.do(acStep{Name: "claim marker by an agent", Number: n}, func() error {
		c, err := agent.Comment(r.e.Repo, n, marker)
		if err == nil {
			r.comments = append(r.comments, &acComment{id: c.ID, n: n, by: agent, marker: true})
		}
		return err
	}); err != nil {
		return err
	}
	if r.rng.IntN(3) == 0 {
		if err := r.do(acStep{Name: "comment (prose) by the claim's agent", Number: n}, func() error {
			c, err := agent.Comment(r.e.Repo, n, "Progress: the tests pass locally; opening a PR next.")
			if err == nil {
				r.comments = append(r.comments, &acComment{id: c.ID, n: n, by: agent})
			}
			return err
		}); err != nil {
			return err
		}
	}
	if branch != "" && r.rng.IntN(2) == 0 {
		if err := r.do(acStep{Name: "push to the claim's branch"}, func() error {
			_, err := agent.Push(r.e.Repo, branch, "", map[string]string{fmt.Sprintf("src/%d.go", n): fmt.Sprintf("package src // %d", fence)}, "work on "+id)
			r.branches[branch] = true
			return err
		}); err != nil {
			return err
		}
	}
	if err := r.do(acStep{Name: "release (API; parks a poison item)", Outside: true, Number: n}, func() error {
		var rel store.ReleaseResult
		code, err := r.e.API(r.ctx, token, http.MethodPost, "/items/"+id+"/release", map[string]any{"fencingToken": fence}, &rel)
		if err != nil || code != http.StatusOK || !rel.Released {
			return fmt.Errorf("release %s: %d %+v %v", id, code, rel, err)
		}
		return nil
	}); err != nil {
		return err
	}
	if r.rng.IntN(2) == 0 {
		out := fmt.Sprintf("<!-- backlog-worker: outcome item=%s owner=%s fence=%d result=released -->\nReleasing: blocked on review.", id, owner, fence)
		return r.do(acStep{Name: "outcome marker by an agent", Number: n}, func() error {
			_, err := agent.Comment(r.e.Repo, n, out)
			return err
		})
	}
	return nil
}

func (r *acRun) liveComments(marker bool) []*acComment {
	var out []*acComment
	for _, c := range r.comments {
		if !c.deleted && c.marker == marker {
			out = append(out, c)
		}
	}
	return out
}

func (r *acRun) editComment() error {
	marker := r.rng.IntN(6) == 0
	cs := r.liveComments(marker)
	if len(cs) == 0 {
		return errSkip
	}
	c := cs[r.rng.IntN(len(cs))]
	name := "comment edited (prose)"
	body := prose[r.rng.IntN(len(prose))] + "\n\n(edited)"
	if marker {
		name = "claim marker edited by its agent"
		body = fmt.Sprintf("<!-- backlog-worker: claim item=issue-%d owner=worker-7/edited region=local fence=999 at=%s -->",
			c.n, r.clk.Now().UTC().Format("2006-01-02T15:04:05Z"))
	}
	return r.do(acStep{Name: name, Number: c.n}, func() error {
		_, err := c.by.EditComment(r.e.Repo, c.id, body)
		return err
	})
}

func (r *acRun) deleteComment() error {
	marker := r.rng.IntN(5) == 0
	cs := r.liveComments(marker)
	if len(cs) == 0 {
		return errSkip
	}
	c := cs[r.rng.IntN(len(cs))]
	name := "comment deleted (prose)"
	if marker {
		name = "claim marker deleted by its agent"
	}
	return r.do(acStep{Name: name, Number: c.n}, func() error {
		c.deleted = true
		return c.by.DeleteComment(r.e.Repo, c.id)
	})
}

var churn = []string{"bug", "enhancement", "question", "good first issue"}

// labelChurnPlain: labels come and go on issues that are no items (a stale
// bot's label among them).
func (r *acRun) labelChurnPlain() error {
	n, err := r.pickNum(r.plain)
	if err != nil {
		return err
	}
	_, l := r.issueState(n)
	a, name := r.pick(r.triagers), churn[r.rng.IntN(len(churn))]
	if r.rng.IntN(4) == 0 {
		a, name = r.staleBot, acParkedLabel
	}
	if l[name] {
		return r.do(acStep{Name: "label removed from an issue that is no item", Number: n}, func() error {
			_, err := a.RemoveLabel(r.e.Repo, n, name)
			return err
		})
	}
	return r.do(acStep{Name: "label added to an issue that is no item", Number: n}, func() error {
		_, err := a.AddLabels(r.e.Repo, n, name)
		return err
	})
}

// otherLabelOnItem: a label that is none of warden's, on an item.
func (r *acRun) otherLabelOnItem() error {
	n, err := r.pickNum(r.openItems(anyItem))
	if err != nil {
		return err
	}
	_, l := r.issueState(n)
	a, name := r.pick(r.triagers), churn[r.rng.IntN(len(churn))]
	if l[name] {
		return r.do(acStep{Name: "other label removed from an item", Number: n}, func() error {
			_, err := a.RemoveLabel(r.e.Repo, n, name)
			return err
		})
	}
	return r.do(acStep{Name: "other label added to an item", Number: n}, func() error {
		_, err := a.AddLabels(r.e.Repo, n, name)
		return err
	})
}

func (r *acRun) closeOrReopen() error {
	all := append(slices.Clone(r.plain), r.items...)
	n, err := r.pickNum(all)
	if err != nil {
		return err
	}
	kind := "an issue that is no item"
	if r.isItem[n] {
		kind = "an item"
	}
	open, _ := r.issueState(n)
	if open {
		return r.do(acStep{Name: "close " + kind, Number: n}, func() error {
			_, err := r.maria.CloseIssue(r.e.Repo, n, r.pick2("completed", "not_planned"))
			return err
		})
	}
	return r.do(acStep{Name: "reopen " + kind, Number: n}, func() error {
		_, err := r.maria.ReopenIssue(r.e.Repo, n)
		return err
	})
}

func (r *acRun) pick2(a, b string) string {
	if r.rng.IntN(2) == 0 {
		return a
	}
	return b
}

func (r *acRun) humanUnparks() error {
	n, err := r.pickNum(r.openItems(parked))
	if err != nil {
		return err
	}
	a := r.pick(r.triagers)
	return r.do(acStep{Name: "human (triage+) removes the parked label", Number: n}, func() error {
		_, err := a.RemoveLabel(r.e.Repo, n, acParkedLabel)
		return err
	})
}

func (r *acRun) agentRemovesPark() error {
	n, err := r.pickNum(r.openItems(parked))
	if err != nil {
		return err
	}
	// warden re-adds it: one write (and the report comment).
	return r.do(acStep{Name: "agent removes the parked label", Want: 1, Number: n}, func() error {
		_, err := r.builder.RemoveLabel(r.e.Repo, n, acParkedLabel)
		return err
	})
}

func (r *acRun) staleBotLabelsItem() error {
	n, err := r.pickNum(r.openItems(func(l map[string]bool) bool { return !l[acParkedLabel] }))
	if err != nil {
		return err
	}
	return r.do(acStep{Name: "stale bot adds the parked label to an item", Number: n}, func() error {
		_, err := r.staleBot.AddLabels(r.e.Repo, n, acParkedLabel)
		return err
	})
}

func (r *acRun) humanParksByLabel() error {
	n, err := r.pickNum(r.openItems(func(l map[string]bool) bool { return !l[acParkedLabel] && !l[acAdmissionLabel] }))
	if err != nil {
		return err
	}
	return r.do(acStep{Name: "human (triage+) adds the parked label", Number: n}, func() error {
		_, err := r.tom.AddLabels(r.e.Repo, n, acParkedLabel)
		return err
	})
}

func (r *acRun) push() error {
	if r.rng.IntN(2) == 0 {
		return r.do(acStep{Name: "push to the default branch"}, func() error {
			_, err := r.maria.Push(r.e.Repo, "main", "", map[string]string{"README.md": fmt.Sprintf("# app\n\nrevision %d\n", len(r.steps))}, "docs: readme")
			return err
		})
	}
	b := fmt.Sprintf("feature/%d", r.rng.IntN(8))
	return r.do(acStep{Name: "push to a feature branch"}, func() error {
		_, err := r.tom.Push(r.e.Repo, b, "", map[string]string{"notes.md": fmt.Sprintf("step %d\n", len(r.steps))}, "wip")
		r.branches[b] = true
		return err
	})
}
