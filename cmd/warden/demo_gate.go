package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/harness"
	"github.com/wardenhq/warden/mirror"
	"github.com/wardenhq/warden/mirror/store"
)

// The demo's second act: the GitHub side of the gate (CONTRACT.md §5–§7).
func gateSteps() []demoStep {
	return []demoStep{
		{"an agent, pm-agent[bot], removes needs-specification from the project manager's item", stepAgentUnlabels},
		{"alice runs /backlog admit on it", stepAdmitCommand},
		{"two more workers take alice's item in turn, each announcing its claim, none finishing (three attempts in all)", stepPoison},
		{"an agent removes the parked label", stepAgentUnparks},
		{"alice removes the parked label: a human unpark starts a new epoch", stepHumanUnpark},
		{"an outsider posts a claim marker on it", stepForgedMarker},
		{"a stale bot labels an unparked item stale", stepStaleBot},
		{"bob (read) runs /backlog unpark; carol (triage) runs /backlog park without a topic", stepRefusedCommands},
	}
}

func (d *demo) number(id string) int { return gating.ItemID(id).Number() }

// reportOf returns the item's report comment body, after the edits that
// warden coalesced (at most one a minute per item) have come due: the demo
// moves warden's clock a minute on and runs its timer pass.
func (d *demo) reportOf(n int) (string, error) {
	d.clock.Advance(time.Minute + time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := d.env.Sweep(ctx); err != nil {
		return "", err
	}
	c, ok := d.env.WardenComment(n, fmt.Sprintf("<!-- backlog-warden: report item=issue-%d -->", n))
	if !ok {
		return "", fmt.Errorf("#%d has no report comment", n)
	}
	return c.Body, nil
}

func (d *demo) reportLists(n int, code string) error {
	body, err := d.reportOf(n)
	if err != nil {
		return err
	}
	if !strings.Contains(body, "`"+code+"`") {
		return fmt.Errorf("#%d's report comment does not list %s:\n%s", n, code, body)
	}
	return nil
}

// readyOf is GET /ready.
func (d *demo) readyOf(ctx context.Context) (ready map[string]bool, excluded map[string]string, err error) {
	var set struct {
		Ready []struct {
			Item string `json:"item"`
		} `json:"ready"`
		Excluded []struct {
			Item   string `json:"item"`
			Reason string `json:"reason"`
		} `json:"excluded"`
	}
	if code, err := d.env.API(ctx, harness.PMToken, http.MethodGet, "/ready", nil, &set); err != nil || code != http.StatusOK {
		return nil, nil, fmt.Errorf("GET /ready answered %d (%v)", code, err)
	}
	ready, excluded = map[string]bool{}, map[string]string{}
	for _, r := range set.Ready {
		ready[r.Item] = true
	}
	for _, x := range set.Excluded {
		excluded[x.Item] = x.Reason
	}
	return ready, excluded, nil
}

func stepAgentUnlabels(ctx context.Context, d *demo) (string, error) {
	n := d.number(d.pmItem)
	agent := d.env.Sim.As("pm-agent[bot]")
	d.env.Sim.SetRole(d.env.Repo, "pm-agent[bot]", "write")
	recs, err := d.newDeliveries(ctx, func() error {
		_, err := agent.RemoveLabel(d.env.Repo, n, "needs-specification")
		return err
	})
	if err != nil {
		return "", err
	}
	if !slices.Contains(d.env.Labels(n), "needs-specification") {
		return "", errors.New("the admission label was not put back")
	}
	if err := d.reportLists(n, mirror.CodeAgentRemovedAdmission); err != nil {
		return "", err
	}
	return describe(recs[:1]) + "; the report comment lists agent-removed-admission", nil
}

func stepAdmitCommand(ctx context.Context, d *demo) (string, error) {
	n := d.number(d.pmItem)
	alice := d.env.Person("alice", "maintain")
	c, err := alice.Comment(d.env.Repo, n, "Spec reviewed.\n/backlog admit")
	if err != nil {
		return "", err
	}
	if err := d.env.Settle(ctx); err != nil {
		return "", err
	}
	if r := d.env.WardenReactions(n, c.ID); !slices.Equal(r, []string{"+1"}) {
		return "", fmt.Errorf("warden reacted %v, want +1", r)
	}
	ready, excluded, err := d.readyOf(ctx)
	if err != nil {
		return "", err
	}
	if !ready[d.pmItem] {
		return "", fmt.Errorf("%s is not ready (excluded as %q)", d.pmItem, excluded[d.pmItem])
	}
	return fmt.Sprintf("+1; needs-specification removed; %s admitted (alice's act recorded) and in the ready set", d.pmItem), nil
}

// attempt claims id for owner, posts the claim marker as agent and
// releases.
func (d *demo) attempt(ctx context.Context, token, owner, agent, id string) error {
	var c store.ClaimResult
	if _, err := d.env.API(ctx, token, http.MethodPost, "/items/"+id+"/claim", map[string]any{"owner": owner, "leaseSeconds": 600}, &c); err != nil || !c.Granted {
		return fmt.Errorf("claim by %s: %+v %v", owner, c, err)
	}
	marker := gating.ClaimMarker(id, owner, "local", *c.FencingToken, time.Now(), nil)
	if _, err := d.env.Sim.As(agent).Comment(d.env.Repo, d.number(id), marker); err != nil {
		return err
	}
	if err := d.env.Settle(ctx); err != nil {
		return err
	}
	var rel store.ReleaseResult
	if _, err := d.env.API(ctx, token, http.MethodPost, "/items/"+id+"/release", map[string]any{"fencingToken": *c.FencingToken}, &rel); err != nil || !rel.Released {
		return fmt.Errorf("release by %s: %+v %v", owner, rel, err)
	}
	return d.env.Settle(ctx)
}

func stepPoison(ctx context.Context, d *demo) (string, error) {
	d.env.Sim.SetRole(d.env.Repo, "worker-7[bot]", "write")
	for _, o := range []string{"worker-7/a", "worker-7/b"} {
		if err := d.attempt(ctx, harness.WorkerToken, o, "worker-7[bot]", d.item); err != nil {
			return "", err
		}
	}
	n := d.number(d.item)
	_, excluded, err := d.readyOf(ctx)
	if err != nil {
		return "", err
	}
	if excluded[d.item] != gating.ExParked {
		return "", fmt.Errorf("%s excluded as %q, want parked", d.item, excluded[d.item])
	}
	if !slices.Contains(d.env.Labels(n), "stale") {
		return "", errors.New("the parked label was not added")
	}
	park, ok := d.env.WardenComment(n, gating.ParkPrefix)
	if !ok {
		return "", errors.New("no park comment")
	}
	first, _, _ := strings.Cut(park.Body, "\n")
	return fmt.Sprintf("the third release left it poisoned: warden parked it (state:parked, ruling route, then the stale label, then the park comment %s)", first), nil
}

func stepAgentUnparks(ctx context.Context, d *demo) (string, error) {
	n := d.number(d.item)
	recs, err := d.newDeliveries(ctx, func() error {
		_, err := d.env.Sim.As("worker-7[bot]").RemoveLabel(d.env.Repo, n, "stale")
		return err
	})
	if err != nil {
		return "", err
	}
	if !slices.Contains(d.env.Labels(n), "stale") {
		return "", errors.New("the parked label was not put back")
	}
	if err := d.reportLists(n, mirror.CodeAgentRemovedPark); err != nil {
		return "", err
	}
	return describe(recs[:1]) + "; reported agent-removed-park", nil
}

func stepHumanUnpark(ctx context.Context, d *demo) (string, error) {
	n := d.number(d.item)
	alice := d.env.Person("alice", "maintain")
	recs, err := d.newDeliveries(ctx, func() error {
		_, err := alice.RemoveLabel(d.env.Repo, n, "stale")
		return err
	})
	if err != nil {
		return "", err
	}
	if err := d.attempt(ctx, harness.WorkerToken, "worker-7/d", "worker-7[bot]", d.item); err != nil {
		return "", err
	}
	ready, excluded, err := d.readyOf(ctx)
	if err != nil {
		return "", err
	}
	if !ready[d.item] {
		return "", fmt.Errorf("%s is not ready after one attempt in the new epoch (excluded as %q)", d.item, excluded[d.item])
	}
	return describe(recs[:1]) + "; one more attempt later it is still ready (1 attempt this epoch, 4 in its life)", nil
}

func stepForgedMarker(ctx context.Context, d *demo) (string, error) {
	n := d.number(d.item)
	mallory := d.env.Person("mallory", "")
	if _, err := mallory.Comment(d.env.Repo, n, gating.ClaimMarker(d.item, "mallory/x", "local", 99, time.Now(), nil)); err != nil {
		return "", err
	}
	if err := d.env.Settle(ctx); err != nil {
		return "", err
	}
	if err := d.reportLists(n, gating.CodeForgedMarker); err != nil {
		return "", err
	}
	return "reported forged-marker; it counts for nothing and makes nobody an agent", nil
}

func stepStaleBot(ctx context.Context, d *demo) (string, error) {
	n := d.number(d.pmItem)
	d.env.Sim.SetRole(d.env.Repo, "stale[bot]", "write")
	if _, err := d.env.Sim.As("stale[bot]").AddLabels(d.env.Repo, n, "stale"); err != nil {
		return "", err
	}
	if err := d.env.Settle(ctx); err != nil {
		return "", err
	}
	ready, excluded, err := d.readyOf(ctx)
	if err != nil {
		return "", err
	}
	if !ready[d.pmItem] {
		return "", fmt.Errorf("%s left the ready set (%q): another bot's stale label is no park", d.pmItem, excluded[d.pmItem])
	}
	if err := d.reportLists(n, mirror.CodeParkLabelWithoutTag); err != nil {
		return "", err
	}
	return "not a park: reported park-label-without-tag, nothing written, still ready", nil
}

func stepRefusedCommands(ctx context.Context, d *demo) (string, error) {
	n := d.number(d.pmItem)
	bob := d.env.Person("bob", "read")
	carol := d.env.Person("carol", "triage")
	cb, err := bob.Comment(d.env.Repo, n, "/backlog unpark")
	if err != nil {
		return "", err
	}
	cc, err := carol.Comment(d.env.Repo, n, "/backlog park ruling-owner=pm\nShould this wait for the new API?")
	if err != nil {
		return "", err
	}
	if err := d.env.Settle(ctx); err != nil {
		return "", err
	}
	if r := d.env.WardenReactions(n, cb.ID); !slices.Equal(r, []string{"confused"}) {
		return "", fmt.Errorf("bob's command got %v, want confused", r)
	}
	if r := d.env.WardenReactions(n, cc.ID); !slices.Equal(r, []string{"confused"}) {
		return "", fmt.Errorf("carol's command got %v, want confused", r)
	}
	body, err := d.reportOf(n)
	if err != nil {
		return "", err
	}
	if strings.Contains(body, "bob") || !strings.Contains(body, "carol") {
		return "", fmt.Errorf("the report comment should carry carol's refusal line and not bob's:\n%s", body)
	}
	return "both answered confused; carol (triage+) also gets a line in the report comment saying ruling-topic is missing, bob the reaction only", nil
}
