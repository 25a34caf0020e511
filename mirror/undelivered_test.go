package mirror

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// recordMergedPR records pull request n, merged into feat/epic (item 5's
// baseBranch:) with body.
func (e *env) recordMergedPR(n int, body string) {
	e.t.Helper()
	pr := store.PullRecord{PullRequest: gating.PullRequest{Number: n, State: "closed", Merged: true, MergedAt: e.clock.Now(),
		HeadRef: "work/5", HeadSHA: headA, BaseRef: "feat/epic", Body: body}, UpdatedAt: e.clock.Now()}
	if _, err := e.l.RecordPull(e.ctx, e.repo, pr); err != nil {
		e.t.Fatal(err)
	}
}

// claimAnswer asks for a worker's claim on item 5 and returns the answer.
func (e *env) claimAnswer(owner string) store.ClaimResult {
	e.t.Helper()
	lease := 60.0
	r, err := e.l.Claim(e.ctx, e.repo, gating.IDFor(5), store.ClaimRequest{Owner: owner, LeaseSeconds: &lease}, store.Actor{Role: gating.RoleWorker, Name: "w"})
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// TestCommandUndelivered: /backlog undelivered #<pr> (CONTRACT.md §11) is
// a human act with triage or more, recorded for a merged pull request that
// links the item; the divergences are re-derived at once, so the item a
// merged pull request made finished-looking (excluded merged-not-complete,
// its claims refused not-ready) is claimable again. Every other ruling is
// refused and says why; a ruling made twice is done once.
func TestCommandUndelivered(t *testing.T) {
	roles := map[string]string{"hana": "triage", "maria": "maintain", "rita": "read", "pm-agent": "write"}
	cases := []struct {
		name     string
		commands []command
		// wantBy is who the recorded ruling names ("" for none).
		wantBy string
	}{{
		name: "by a human with triage: recorded, the item is offered again",
		commands: []command{{id: 1, login: "hana", body: "The PR only fixed a typo in the docs.\n/backlog undelivered #12",
			wantOut: "issue-5: pull request #12 ruled not to have delivered it by hana", wantReaction: "+1"}},
		wantBy: "hana",
	}, {
		name: "twice: the first ruling is kept",
		commands: []command{
			{id: 1, login: "hana", body: "/backlog undelivered #12", wantOut: "ruled not to have delivered it by hana", wantReaction: "+1"},
			{id: 2, login: "maria", body: "/backlog undelivered #12", after: time.Second, wantOut: "was already ruled not to have delivered it", wantReaction: "+1"},
		},
		wantBy: "hana",
	}, {
		name: "by a reader: refused, with no report line",
		commands: []command{{id: 1, login: "rita", body: "/backlog undelivered #12",
			wantOut: "/backlog undelivered needs triage or more on the repository", wantReaction: "confused"}},
	}, {
		name: "by a configured agent: refused (a human act)",
		commands: []command{{id: 1, login: "pm-agent", body: "/backlog undelivered #12",
			wantOut: "/backlog undelivered is a human act, and pm-agent is a configured agent", wantReaction: "confused", wantRefusalIn: true}},
	}, {
		name: "without the hash sign: refused",
		commands: []command{{id: 1, login: "hana", body: "/backlog undelivered 12",
			wantOut: "write the pull request as #12, with the hash sign", wantReaction: "confused", wantRefusalIn: true}},
	}, {
		name: "with no pull request: refused",
		commands: []command{{id: 1, login: "hana", body: "/backlog undelivered",
			wantOut: "names the pull request that did not deliver this item", wantReaction: "confused", wantRefusalIn: true}},
	}, {
		name: "an open pull request: refused",
		commands: []command{{id: 1, login: "hana", body: "/backlog undelivered #13",
			wantOut: "pull request #13 is still open", wantReaction: "confused", wantRefusalIn: true}},
	}, {
		name: "a merged pull request that does not link the item: refused",
		commands: []command{{id: 1, login: "hana", body: "/backlog undelivered #14",
			wantOut: "pull request #14 does not link issue-5", wantReaction: "confused", wantRefusalIn: true}},
	}, {
		name: "a pull request warden never saw: refused",
		commands: []command{{id: 1, login: "hana", body: "/backlog undelivered #99",
			wantOut: "no record of pull request #99 being merged", wantReaction: "confused", wantRefusalIn: true}},
	}, {
		name: "on a pull request: refused",
		commands: []command{{id: 1, login: "hana", body: "/backlog undelivered #12", onPR: true,
			wantOut: "only /backlog recheck works on a pull request", wantReaction: "confused", wantRefusalIn: true}},
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
			e.create(5, tags())
			e.recordMergedPR(12, "Refs #5")
			e.recordPR(13, headB)
			e.recordMergedPR(14, "An unrelated change")
			if err := m.reconcileItems(e.ctx, e.repoRow()); err != nil {
				t.Fatal(err)
			}
			// Before: the merged #12 makes item 5 finished-looking.
			r := e.claimAnswer("w/1")
			if r.Granted || r.Reason == nil || *r.Reason != store.ReasonNotReady || r.Exclusion == nil || *r.Exclusion != gating.ExMergedNotComplete {
				t.Fatalf("claim before the ruling: %+v, want not-ready merged-not-complete", r)
			}

			t0 := e.clock.Now().Truncate(time.Second)
			for _, c := range tc.commands {
				before := len(rep.all())
				out := e.runCommandComment(t, m, t0, c)
				if !strings.Contains(out, c.wantOut) {
					t.Errorf("comment %d: outcome %q, want %q", c.id, out, c.wantOut)
				}
				if got := f.reactionsOn(c.id); !slices.Equal(got, []string{c.wantReaction}) {
					t.Errorf("comment %d: reactions %v, want [%s]", c.id, got, c.wantReaction)
				}
				if got := len(rep.all()) > before; got != c.wantRefusalIn {
					t.Errorf("comment %d: report line %v, want %v (%v)", c.id, got, c.wantRefusalIn, rep.all())
				}
			}

			ds, err := e.acts.Disownings(e.ctx, e.repo, 5)
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantBy == "" {
				if len(ds) != 0 {
					t.Fatalf("rulings recorded: %+v", ds)
				}
				// Still finished-looking, and still reported.
				if r := e.claimAnswer("w/1"); r.Granted || r.Exclusion == nil || *r.Exclusion != gating.ExMergedNotComplete {
					t.Errorf("claim after a refused ruling: %+v, want not-ready merged-not-complete", r)
				}
				return
			}
			if len(ds) != 1 || ds[0].PR != 12 || ds[0].By != tc.wantBy || !ds[0].At.Equal(t0) {
				t.Fatalf("rulings %+v, want #12 by %s at %s", ds, tc.wantBy, t0)
			}
			rs, err := e.l.Snapshot(e.ctx, e.repo)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range rs.Ready().Defects {
				if d.Code == gating.ExMergedNotComplete {
					t.Errorf("merged-not-complete still reported after the ruling: %+v", d)
				}
			}
			if r := e.claimAnswer("w/1"); !r.Granted {
				t.Errorf("claim after the ruling: %+v, want granted", r)
			}
		})
	}
}

// A later merged pull request that does deliver the item makes it
// finished-looking again: the ruling is about one pull request, not the
// item.
func TestCommandUndeliveredIsPerPullRequest(t *testing.T) {
	e := newEnv(t)
	f := newFakeCalls(e.clock.Now)
	f.roles["hana"] = "triage"
	m := e.newMirror(f)
	m.Reports = &refusalLines{}
	m.Settings = func(context.Context, store.Repo) gating.Settings { return gating.DefaultSettings() }
	e.create(5, tags())
	e.recordMergedPR(12, "Refs #5")
	if err := m.reconcileItems(e.ctx, e.repoRow()); err != nil {
		t.Fatal(err)
	}
	t0 := e.clock.Now().Truncate(time.Second)
	e.runCommandComment(t, m, t0, command{id: 1, login: "hana", body: "/backlog undelivered #12"})
	e.recordMergedPR(15, "Closes #5")
	if err := m.reconcileItems(e.ctx, e.repoRow()); err != nil {
		t.Fatal(err)
	}
	r := e.claimAnswer("w/1")
	if r.Granted || r.Exclusion == nil || *r.Exclusion != gating.ExMergedNotComplete {
		t.Fatalf("claim after #15 merged: %+v, want not-ready merged-not-complete", r)
	}
	rs, err := e.l.ClaimSnapshot(e.ctx, e.repo, gating.IDFor(5))
	if err != nil {
		t.Fatal(err)
	}
	_, ex := gating.Claimable(rs.Snapshot, gating.IDFor(5), "w/1")
	if !strings.Contains(ex.Detail, "pull request #15") || strings.Contains(ex.Detail, "pull request #12") {
		t.Errorf("exclusion detail %q: want #15 and not the disowned #12", ex.Detail)
	}
}
