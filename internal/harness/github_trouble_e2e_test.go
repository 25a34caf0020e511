package harness

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/wardenhq/warden/webhooks"
)

// getText GETs url and returns its status and body.
func getText(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// pendingUntried counts the pending deliveries and reports whether any has
// a try counted.
func pendingUntried(t *testing.T, x *e2e) (pending int, tried bool) {
	t.Helper()
	recs, err := x.Service.Inbox.List(context.Background(), false, 200)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.State == webhooks.StatePending {
			pending++
			tried = tried || r.Attempts > 0
		}
	}
	return pending, tried
}

// TestE2ERateLimitWindowWaitsForTheReset: deliveries that arrive while the
// installation's hourly budget is spent wait for the reset — an hour on
// warden's clock — without spending tries or probing GitHub; /readyz and the
// status page say so; after the reset every one is processed once and none
// is a dead letter.
func TestE2ERateLimitWindowWaitsForTheReset(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	agent := x.agent("builder[bot]", "write")
	x.Sim.SetRemaining(x.Inst.ID, 0)
	var nums []int
	for _, title := range []string{"first", "second", "third"} {
		iss, err := agent.OpenIssue(x.Repo, "Proposed "+title, "spec", lblItem)
		if err != nil {
			t.Fatal(err)
		}
		nums = append(nums, iss.Number)
	}
	if err := x.Sim.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the installation held, a delivery deferred", func() bool {
		p, _ := pendingUntried(t, x)
		return len(x.Service.Dispatcher.Holds()) == 1 && p >= 3 &&
			testutil.ToFloat64(x.Service.Metrics.Deferred.WithLabelValues("issues")) >= 1
	})
	// Held: what arrived waits with no try spent, and GitHub hears nothing
	// more from this installation.
	before := x.Sim.Calls(x.Inst.ID)
	time.Sleep(300 * time.Millisecond) // thirty dispatcher polls
	p, tried := pendingUntried(t, x)
	if p < 3 || tried {
		t.Fatalf("pending %d (want ≥ 3), a try counted: %v", p, tried)
	}
	if after := x.Sim.Calls(x.Inst.ID); after.Reads+after.Writes != before.Reads+before.Writes {
		t.Errorf("GitHub saw %d more requests during the hold, want 0", after.Reads+after.Writes-before.Reads-before.Writes)
	}
	code, body := getText(t, x.PublicURL+"/readyz")
	if code != http.StatusOK || !strings.Contains(body, "GitHub rate-limited for installation") || !strings.Contains(body, "until") {
		t.Errorf("/readyz = %d %q, want 200 naming the rate limit and its reset", code, body)
	}
	if _, page := getText(t, x.AdminURL+"/"); !strings.Contains(page, "rate-limited") || !strings.Contains(page, "nothing is dead-lettered for a rate limit") {
		t.Errorf("status page does not show the rate limit:\n%s", page)
	}
	for _, n := range nums {
		if x.labels(n)[lblAdmission] {
			t.Fatalf("issue %d labelled during the hold", n)
		}
	}

	// The hour passes (warden's and the simulator's clock): the window
	// resets and everything is processed, once, none dead.
	x.clk.Advance(time.Hour + 5*time.Second)
	x.MustSettle(t)
	for _, n := range nums {
		if !x.labels(n)[lblAdmission] {
			t.Errorf("issue %d lacks %s after the reset", n, lblAdmission)
		}
	}
	dead, err := x.Service.Inbox.List(context.Background(), true, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != 0 {
		t.Errorf("dead letters after a rate-limit window: %+v", dead)
	}
	if _, body := getText(t, x.PublicURL+"/readyz"); strings.TrimSpace(body) != "ready" {
		t.Errorf("/readyz after the reset = %q, want ready", body)
	}
}

// TestE2EOutageIsVisible: during a run of 500s /readyz stays 200 (deliveries
// are still stored) and names GitHub failing for the installation; once
// GitHub answers again the retried deliveries are processed and the trouble
// clears.
func TestE2EOutageIsVisible(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	agent := x.agent("builder[bot]", "write")
	x.Sim.FailNext(1000, http.StatusInternalServerError, "", "/repos/")
	iss, err := agent.OpenIssue(x.Repo, "During the outage", "spec", lblItem)
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "/readyz to name the outage", func() bool {
		code, body := getText(t, x.PublicURL+"/readyz")
		return code == http.StatusOK && strings.Contains(body, "GitHub failing for installation") && strings.Contains(body, "HTTP 500")
	})
	x.Sim.ClearFaults()
	x.MustSettle(t)
	if !x.labels(iss.Number)[lblAdmission] {
		t.Errorf("issue %d lacks %s after the outage", iss.Number, lblAdmission)
	}
	if _, body := getText(t, x.PublicURL+"/readyz"); strings.TrimSpace(body) != "ready" {
		t.Errorf("/readyz after the outage = %q, want ready", body)
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestE2EPermanentPayloadErrorsAreDeadAtOnce: a signed delivery no retry
// can cure — no installation, a pull_request event without its pull
// request — is a dead letter after one try, its reason named.
func TestE2EPermanentPayloadErrorsAreDeadAtOnce(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	repo := fmt.Sprintf(`"repository":{"id":%d,"full_name":%q},"sender":{"login":"alice","type":"User"}`, x.Repo.ID, x.Repo.FullName)
	cases := []struct {
		event, id, body, reason string
	}{
		{"issues", "perm-no-installation", `{"action":"opened","issue":{"number":1},` + repo + `}`, "names no installation"},
		{"issues", "perm-installation-zero", `{"action":"opened","installation":{"id":0},"issue":{"number":1},` + repo + `}`, "names no installation"},
		{"pull_request", "perm-no-pr", fmt.Sprintf(`{"action":"opened","number":3,"installation":{"id":%d},`, x.Inst.ID) + repo + `}`, "no pull_request"},
	}
	for _, c := range cases {
		body := []byte(c.body)
		req, _ := http.NewRequest(http.MethodPost, x.PublicURL+"/webhooks", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-GitHub-Event", c.event)
		req.Header.Set("X-GitHub-Delivery", c.id)
		req.Header.Set("X-Hub-Signature-256", webhooks.Sign([]byte(Secret), body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("%s: status %d, want 202", c.id, resp.StatusCode)
		}
	}
	x.MustSettle(t)
	dead, err := x.Service.Inbox.List(context.Background(), true, 10)
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]webhooks.Record{}
	for _, r := range dead {
		byID[r.ID] = r
	}
	for _, c := range cases {
		r, ok := byID[c.id]
		if !ok {
			t.Errorf("%s: not a dead letter", c.id)
			continue
		}
		if r.Attempts != 1 || !strings.Contains(r.LastError, c.reason) {
			t.Errorf("%s: dead after %d tries with %q, want 1 try naming %q", c.id, r.Attempts, r.LastError, c.reason)
		}
	}
}
