package main

import (
	"context"
	"strings"
	"testing"

	"github.com/wardenhq/warden/internal/db"
	"github.com/wardenhq/warden/internal/ghsim"
)

// checkDeliveries checks that every delivery GitHub sent is stored once and
// done, and, from the replicas' logs, that each was handled to completion
// exactly once: a handler that started must have ended in that replica's
// log as processed or as a failed try, except on the killed replica, whose
// unfinished handlers another replica then ran.
func checkDeliveries(t *testing.T, pg *db.DB, sim *ghsim.Sim, reps []*replicaProc, victim *replicaProc) {
	t.Helper()
	sent := map[string]bool{}
	for _, d := range sim.Deliveries() {
		sent[d.GUID] = true
	}
	rows, err := pg.Read.QueryContext(context.Background(), `SELECT delivery_id, state FROM inbox`)
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]string{}
	for rows.Next() {
		var id, state string
		if err := rows.Scan(&id, &state); err != nil {
			t.Fatal(err)
		}
		stored[id] = state
	}
	rows.Close()
	if len(stored) != len(sent) {
		t.Errorf("the inbox holds %d deliveries; GitHub sent %d", len(stored), len(sent))
	}
	count := func(r *replicaProc, msgs ...string) map[string]int {
		out := map[string]int{}
		for _, m := range msgs {
			for _, l := range r.logOf(m) {
				out[str(l["delivery"])]++
			}
		}
		return out
	}
	processed := map[string]int{}
	cut := map[string]bool{} // started on the killed replica, never ended there
	for _, r := range reps {
		started := count(r, "delivery handling")
		ended := count(r, "delivery processed", "delivery failed; will retry", "delivery failed its last try; dead letter")
		for id, n := range count(r, "delivery processed") {
			processed[id] += n
		}
		if dropped := count(r, "delivery changed state under its handler; dropped"); len(dropped) > 0 {
			t.Errorf("replica %d handled %d deliveries another replica had already completed", r.n, len(dropped))
		}
		for id, n := range started {
			switch extra := n - ended[id]; {
			case extra == 0:
			case extra == 1 && r == victim:
				cut[id] = true
			default:
				t.Errorf("replica %d: delivery %s started %d times, ended %d times", r.n, id, n, ended[id])
			}
		}
	}
	for id := range sent {
		if stored[id] != "done" {
			t.Errorf("delivery %s is %q in the inbox, want done", id, stored[id])
		}
		// The killed replica may have committed a delivery and died before
		// logging it: done in the inbox, its start the last trace.
		if processed[id] != 1 && !(processed[id] == 0 && cut[id]) {
			t.Errorf("delivery %s was processed %d times, want once", id, processed[id])
		}
	}
	t.Logf("%d deliveries, each processed once over 3 replicas; the kill cut %d handlers short", len(sent), len(cut))
}

// checkGitHubEffects checks what GitHub holds: one `backlog` check run per
// pull request head, one park comment per parked item (items[20:26]), at
// most one report comment per item.
func checkGitHubEffects(t *testing.T, sim *ghsim.Sim, repo *ghsim.Repo, items []int) {
	t.Helper()
	bot := sim.BotLogin()
	sim.Locked(func() {
		if len(repo.Pulls) != 8 {
			t.Errorf("%d pull requests, want 8", len(repo.Pulls))
		}
		for _, p := range repo.Pulls {
			runs := 0
			for _, c := range repo.CheckRuns {
				if c.Name == "backlog" && c.HeadSHA == p.HeadSHA {
					runs++
				}
			}
			if runs != 1 {
				t.Errorf("PR #%d: %d backlog check runs on its head, want 1", p.Issue.Number, runs)
			}
		}
		parked := map[int]bool{}
		for _, n := range items[20:26] {
			parked[n] = true
		}
		for _, n := range items {
			iss := repo.Issues[n]
			parks, reports := 0, 0
			for _, id := range iss.CommentIDs {
				c := repo.Comments[id]
				if c == nil || c.User == nil || c.User.Login != bot {
					continue
				}
				if strings.Contains(c.Body, "<!-- backlog-warden: park") {
					parks++
				}
				if strings.Contains(c.Body, "<!-- backlog-warden: report") {
					reports++
				}
			}
			hasLabel := false
			for _, l := range iss.Labels {
				hasLabel = hasLabel || l.Name == "stale"
			}
			want := 0
			if parked[n] {
				want = 1
			}
			if parks != want || hasLabel != parked[n] {
				t.Errorf("issue #%d: %d park comments, parked label %v; want %d and %v", n, parks, hasLabel, want, parked[n])
			}
			if reports > 1 {
				t.Errorf("issue #%d: %d report comments, want at most one", n, reports)
			}
		}
	})
}
