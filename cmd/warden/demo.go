package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/google/go-github/v66/github"
	"github.com/spf13/cobra"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/clock"
	"github.com/wardenhq/warden/internal/harness"
	"github.com/wardenhq/warden/mirror/store"
	"github.com/wardenhq/warden/webhooks"
)

// demoStep is one scripted act and the check of what warden did about it.
type demoStep struct {
	title string
	run   func(ctx context.Context, d *demo) (string, error)
}

type demo struct {
	env    *harness.Env
	clock  *clock.Offset
	pmItem string // the item the project manager made (awaiting admission)
	item   string // the admitted item the claim steps work on
	token  int64  // its fencing token
	pr     int    // the pull request delivering pmItem
	prSHA  string // its head

	dispatchItem  string // the admitted item assigned to GitHub's coding agent
	dispatchFence int64  // the fence of the claim that assignment took
	agentPull     int    // the pull request the coding agent opened for it
}

func (c *cli) demoCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use: "demo",
		Example: `  warden demo
  warden demo --serve`,
		Short: "Run the whole service against the built-in GitHub simulator and a scripted backlog",
		Long: `Starts warden and a built-in GitHub simulator (no credentials, no network, a
temporary SQLite database), drives a scripted backlog through them with
real-shaped, signed deliveries, and prints what warden did at each step.
Exits 0 when every step behaved.

With --serve, the simulator and warden keep running after the steps: the
status page, the agent API and the MCP endpoint are printed with ready-made
tokens and a curl line for each. Ctrl-C (SIGINT, or SIGTERM) stops them.`,
		Args: noArgs,
	}
	verbose := cmd.Flags().BoolP("verbose", "v", false, "print warden's own log (JSON) to stderr")
	serve := cmd.Flags().Bool("serve", false, "keep the simulator and warden running after the steps, until Ctrl-C")
	documentSettings(cmd)
	cmd.RunE = c.action(func(*cobra.Command, []string) int { return c.demo(*verbose, *serve) })
	return cmd
}

func (c *cli) demo(verbose, serve bool) int {
	ctx, e := c.ctx, c.e
	var logw io.Writer = io.Discard
	if verbose {
		logw = e.stderr
	}
	fmt.Fprintln(e.stdout, "warden demo: the whole service against a built-in GitHub simulator (no credentials, no network)")
	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	clock := &clock.Offset{}
	env, err := harness.Start(sctx, harness.Options{Log: logw, Now: clock.Now})
	cancel()
	if err != nil {
		fmt.Fprintf(e.stderr, "warden demo: %s\n", flatten(err.Error()))
		return exitFailed
	}
	defer env.Close()
	fmt.Fprintf(e.stdout, "  GitHub simulator at %s, warden at %s (status page %s/)\n\n", env.GitHub.URL, env.PublicURL, env.AdminURL)
	d := &demo{env: env, clock: clock}
	failed := 0
	for i, s := range demoSteps() {
		if ctx.Err() != nil {
			fmt.Fprintln(e.stdout, "stopped")
			return exitFailed
		}
		fmt.Fprintf(e.stdout, "%2d. %s\n", i+1, s.title)
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		what, err := s.run(sctx, d)
		cancel()
		if err != nil {
			failed++
			fmt.Fprintf(e.stdout, "    ✗ %v\n", err)
			continue
		}
		fmt.Fprintf(e.stdout, "    ✓ %s\n", what)
	}
	fmt.Fprintln(e.stdout)
	code := exitOK
	if failed > 0 {
		fmt.Fprintf(e.stdout, "%d of %d steps did not behave\n", failed, len(demoSteps()))
		code = exitFailed
	} else {
		fmt.Fprintf(e.stdout, "all %d steps behaved\n", len(demoSteps()))
	}
	if serve {
		printDemoEndpoints(e.stdout, env)
		<-ctx.Done()
		fmt.Fprintln(e.stdout, "stopping warden and the simulator")
	}
	return code
}

func demoSteps() []demoStep {
	steps := []demoStep{
		{"The App is installed on acme and the repository acme/app is added", stepInstalled},
		{"A stranger posts a delivery with a forged signature", stepForged},
		{"GitHub redelivers a delivery warden already has", stepRedelivery},
		{"warden is unreachable for a moment: GitHub logs the delivery as failed; an operator redelivers it", stepMissed},
		{"alice (maintainer) opens issue #1 with the labels backlog and needs-specification", stepHumanIssue},
		{"an agent, worker-7[bot], comments on it", stepAgentComment},
		{"warden itself comments through its installation token", stepSelfComment},
		{"the project-manager agent creates an item through the agent API", stepAPICreate},
		{"a worker tries to claim it before a human admitted it", stepNotAdmitted},
		{"alice creates an item with her own token (a human's item is admitted at creation)", stepHumanCreate},
		{"the ready set: GET /ready", stepReady},
		{"a worker claims the admitted item; a second claimant and an unfenced write are refused", stepClaim},
		{"the worker renews without a length, then releases", stepRenewRelease},
	}
	steps = append(append(steps, gateSteps()...), prSteps()...)
	return append(steps, dispatchSteps()...)
}

// processed returns warden's record of a delivery.
func (d *demo) processed(ctx context.Context, guid string) (webhooks.Record, error) {
	recs, err := d.env.Service.Inbox.List(ctx, false, 10000)
	if err != nil {
		return webhooks.Record{}, err
	}
	for _, r := range recs {
		if r.ID == guid {
			return r, nil
		}
	}
	return webhooks.Record{}, fmt.Errorf("delivery %s is not in warden's inbox", guid)
}

func stepInstalled(ctx context.Context, d *demo) (string, error) {
	n := 0
	events := map[string]bool{}
	var names []string
	for _, del := range d.env.Sim.Deliveries() {
		if !events[del.Event+"."+del.Action] {
			events[del.Event+"."+del.Action] = true
			names = append(names, del.Event+"."+del.Action)
		}
		r, err := d.processed(ctx, del.GUID)
		if err != nil {
			return "", err
		}
		if del.Status != "OK" || r.State != webhooks.StateDone {
			return "", fmt.Errorf("%s: GitHub logged %q, warden has it %s", del.Event, del.Status, r.State)
		}
		n++
	}
	return fmt.Sprintf("%d signed deliveries (%s) stored durably, acknowledged and processed once; warden recorded the repository and created its labels", n, strings.Join(names, ", ")), nil
}

func stepForged(ctx context.Context, d *demo) (string, error) {
	body := []byte(`{"action":"opened","issue":{"number":1},"repository":{"id":1,"full_name":"acme/app"},"sender":{"login":"mallory","type":"User"}}`)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, d.env.PublicURL+"/webhooks", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "issues")
	req.Header.Set("X-GitHub-Delivery", "forged-0001")
	req.Header.Set("X-Hub-Signature-256", webhooks.Sign([]byte("not-the-secret"), body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		return "", fmt.Errorf("answered %d, want 401", resp.StatusCode)
	}
	if _, err := d.processed(ctx, "forged-0001"); err == nil {
		return "", errors.New("the forged delivery reached the inbox")
	}
	return "refused with 401 before the body was parsed; nothing stored", nil
}

func stepRedelivery(ctx context.Context, d *demo) (string, error) {
	first := d.env.Sim.Deliveries()[0]
	if err := d.env.Redeliver(ctx, first.ID); err != nil {
		return "", err
	}
	if err := d.env.Settle(ctx); err != nil {
		return "", err
	}
	all := d.env.Sim.Deliveries()
	last := all[len(all)-1]
	if last.GUID != first.GUID || last.StatusCode != http.StatusOK {
		return "", fmt.Errorf("redelivery answered %d, want 200 (duplicate)", last.StatusCode)
	}
	r, err := d.processed(ctx, first.GUID)
	if err != nil || r.Attempts != 1 {
		return "", fmt.Errorf("processed %d times, want once (%v)", r.Attempts, err)
	}
	return fmt.Sprintf("%s %s answered 200 as a duplicate and not processed again", first.Event, first.GUID[:8]), nil
}

func stepMissed(ctx context.Context, d *demo) (string, error) {
	d.env.Sim.DropDeliveries(true)
	d.env.Sim.AddRepo(d.env.Inst, "acme/tools", "main")
	if err := d.env.Sim.Flush(ctx); err != nil {
		return "", err
	}
	d.env.Sim.DropDeliveries(false)
	all := d.env.Sim.Deliveries()
	missed := all[len(all)-1]
	if missed.Status == "OK" {
		return "", errors.New("the delivery was not dropped")
	}
	if _, err := d.processed(ctx, missed.GUID); err == nil {
		return "", errors.New("warden has a delivery GitHub could not send")
	}
	if err := d.env.Redeliver(ctx, missed.ID); err != nil {
		return "", err
	}
	if err := d.env.Settle(ctx); err != nil {
		return "", err
	}
	r, err := d.processed(ctx, missed.GUID)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("GitHub logged %q; after redelivery warden processed it (%s)", missed.Status, r.Outcome), nil
}

// newDeliveries runs act and returns the deliveries it caused, once warden
// has processed them.
func (d *demo) newDeliveries(ctx context.Context, act func() error) ([]webhooks.Record, error) {
	before := len(d.env.Sim.Deliveries())
	if err := act(); err != nil {
		return nil, err
	}
	if err := d.env.Settle(ctx); err != nil {
		return nil, err
	}
	var out []webhooks.Record
	for _, del := range d.env.Sim.Deliveries()[before:] {
		r, err := d.processed(ctx, del.GUID)
		if err != nil {
			return nil, err
		}
		if r.State != webhooks.StateDone {
			return nil, fmt.Errorf("%s %s is %s: %s", r.Event, r.ID, r.State, r.LastError)
		}
		out = append(out, r)
	}
	return out, nil
}

func describe(recs []webhooks.Record) string {
	var parts []string
	for _, r := range recs {
		parts = append(parts, fmt.Sprintf("%s.%s by %s → %s", r.Event, r.Action, r.Sender, r.Outcome))
	}
	return strings.Join(parts, "; ")
}

func stepHumanIssue(ctx context.Context, d *demo) (string, error) {
	alice := d.env.Person("alice", "maintain")
	recs, err := d.newDeliveries(ctx, func() error {
		_, err := alice.OpenIssue(d.env.Repo, "Batch WAL writes", "What must be true: ...", "backlog", "needs-specification")
		return err
	})
	if err != nil {
		return "", err
	}
	return describe(recs), nil
}

func stepAgentComment(ctx context.Context, d *demo) (string, error) {
	worker := d.env.Sim.As("worker-7[bot]")
	recs, err := d.newDeliveries(ctx, func() error {
		_, err := worker.Comment(d.env.Repo, 1, "Looking at this one.")
		return err
	})
	if err != nil {
		return "", err
	}
	return describe(recs), nil
}

func stepSelfComment(ctx context.Context, d *demo) (string, error) {
	gh, err := d.env.Service.App.Installation(d.env.Inst.ID)
	if err != nil {
		return "", err
	}
	recs, err := d.newDeliveries(ctx, func() error {
		body := "a note from warden"
		_, _, err := gh.Issues.CreateComment(ctx, d.env.Repo.Owner.Login, d.env.Repo.Name, 1, &github.IssueComment{Body: &body})
		return err
	})
	if err != nil {
		return "", err
	}
	for _, r := range recs {
		if !strings.HasPrefix(r.Outcome, webhooks.OutcomeSelf) {
			return "", fmt.Errorf("warden acted on its own delivery: %s", describe(recs))
		}
	}
	return describe(recs) + " (its own write: recorded, never acted on)", nil
}

func stepAPICreate(ctx context.Context, d *demo) (string, error) {
	var created struct {
		ID      string   `json:"id"`
		Tags    []string `json:"tags"`
		Outcome string   `json:"outcome"`
	}
	code, err := d.env.API(ctx, harness.PMToken, http.MethodPost, "/items", map[string]any{
		"title": "Shard the claim table", "specification": "What must be true: ...", "tags": []string{"priority:P1"},
	}, &created)
	if err != nil || code != http.StatusCreated {
		return "", fmt.Errorf("POST /items answered %d (%v)", code, err)
	}
	if err := d.env.Settle(ctx); err != nil {
		return "", err
	}
	n := gating.ItemID(created.ID).Number()
	var labels []string
	d.env.Sim.Locked(func() {
		for _, l := range d.env.Repo.Issues[n].Labels {
			labels = append(labels, l.Name)
		}
	})
	d.pmItem = created.ID
	return fmt.Sprintf("GitHub issue #%d opened with labels %v, then item %s with %v", n, labels, created.ID, created.Tags), nil
}

func stepNotAdmitted(ctx context.Context, d *demo) (string, error) {
	var c store.ClaimResult
	if _, err := d.env.API(ctx, harness.WorkerToken, http.MethodPost, "/items/"+d.pmItem+"/claim", map[string]any{"owner": "worker-7/run-1"}, &c); err != nil {
		return "", err
	}
	if c.Granted || c.Reason == nil || *c.Reason != store.ReasonNotReady || c.Exclusion == nil || *c.Exclusion != gating.ExAwaitingAdmission {
		return "", fmt.Errorf("the claim was not refused as awaiting admission: %+v", c)
	}
	return fmt.Sprintf("refused: granted false, reason %s, exclusion %s", *c.Reason, *c.Exclusion), nil
}

func stepHumanCreate(ctx context.Context, d *demo) (string, error) {
	var created struct {
		ID string `json:"id"`
	}
	code, err := d.env.API(ctx, harness.HumanToken, http.MethodPost, "/items", map[string]any{
		"title": "Shard the claim table", "specification": "What must be true: ...", "tags": []string{"priority:P1"},
	}, &created)
	if err != nil || code != http.StatusCreated {
		return "", fmt.Errorf("POST /items answered %d (%v)", code, err)
	}
	if err := d.env.Settle(ctx); err != nil {
		return "", err
	}
	d.item = created.ID
	return fmt.Sprintf("item %s, opened without the admission label; its admission act is recorded", created.ID), nil
}

func stepReady(ctx context.Context, d *demo) (string, error) {
	var set struct {
		Ready []struct {
			Item string `json:"item"`
		} `json:"ready"`
		Excluded []struct {
			Item   string `json:"item"`
			Reason string `json:"reason"`
		} `json:"excluded"`
	}
	if code, err := d.env.API(ctx, harness.WorkerToken, http.MethodGet, "/ready", nil, &set); err != nil || code != http.StatusOK {
		return "", fmt.Errorf("GET /ready answered %d (%v)", code, err)
	}
	if len(set.Ready) != 1 || set.Ready[0].Item != d.item {
		return "", fmt.Errorf("ready %+v, want only %s", set.Ready, d.item)
	}
	var out []string
	for _, x := range set.Excluded {
		out = append(out, x.Item+" ("+x.Reason+")")
	}
	return fmt.Sprintf("ready: %s; excluded: %s", d.item, strings.Join(out, ", ")), nil
}

func stepClaim(ctx context.Context, d *demo) (string, error) {
	var c, other store.ClaimResult
	if _, err := d.env.API(ctx, harness.WorkerToken, http.MethodPost, "/items/"+d.item+"/claim", map[string]any{"owner": "worker-7/run-1", "leaseSeconds": 600}, &c); err != nil || !c.Granted {
		return "", fmt.Errorf("claim not granted: %+v %v", c, err)
	}
	d.token = *c.FencingToken
	if _, err := d.env.API(ctx, harness.PMToken, http.MethodPost, "/items/"+d.item+"/claim", map[string]any{"owner": "pm/sweep"}, &other); err != nil || other.Granted {
		return "", fmt.Errorf("a second claim was granted: %+v %v", other, err)
	}
	var problem struct {
		Reason string `json:"reason"`
	}
	code, err := d.env.API(ctx, harness.WorkerToken, http.MethodPatch, "/items/"+d.item, map[string]any{"body": "resumeNote: half done"}, &problem)
	if err != nil || code != http.StatusConflict {
		return "", fmt.Errorf("an unfenced write answered %d (%v)", code, err)
	}
	return fmt.Sprintf("granted fencing token %d for %ss; the second claimant: %s; the unfenced write: %s", d.token, fmtSeconds(c.LeaseSeconds), *other.Reason, problem.Reason), nil
}

func stepRenewRelease(ctx context.Context, d *demo) (string, error) {
	var r store.ClaimResult
	if _, err := d.env.API(ctx, harness.WorkerToken, http.MethodPost, "/items/"+d.item+"/renew", map[string]any{"fencingToken": d.token}, &r); err != nil || !r.Granted {
		return "", fmt.Errorf("renew: %+v %v", r, err)
	}
	if r.LeaseShortened == nil || !*r.LeaseShortened {
		return "", errors.New("a renew without a length did not report leaseShortened")
	}
	var rel store.ReleaseResult
	if _, err := d.env.API(ctx, harness.WorkerToken, http.MethodPost, "/items/"+d.item+"/release", map[string]any{"fencingToken": d.token}, &rel); err != nil || !rel.Released {
		return "", fmt.Errorf("release: %+v %v", rel, err)
	}
	return fmt.Sprintf("renewed to %ss with leaseShortened: true (was until %s); released fence %d", fmtSeconds(r.LeaseSeconds), *r.PreviousLeaseExpiresAtUtc, rel.FencingToken), nil
}

func fmtSeconds(s *float64) string {
	if s == nil {
		return "?"
	}
	return fmt.Sprintf("%.0f", *s)
}
