package harness

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/ghsim"
	"github.com/wardenhq/warden/mirror"
)

// End-to-end tests of CONTRACT.md §2's per-repository settings
// (`.github/backlog.yml` on the default branch): read when the App starts
// serving a repository, changed only by a human's push, a malformed file
// reported with the last good values kept, other branches ignored.

// pushFile commits one file on branch as actor (the simulator sends the
// push with actor as pusher and sender) and settles.
func (x *e2e) pushFile(t *testing.T, a *ghsim.Actor, branch, path, content string) {
	t.Helper()
	x.MustSettle(t)
	if _, err := a.Push(x.Repo, branch, "", map[string]string{path: content}, "update "+path); err != nil {
		t.Fatalf("%s pushes %s to %s: %v", a.User().Login, path, branch, err)
	}
	x.MustSettle(t)
}

// pushSettings pushes `.github/backlog.yml` with content to branch as actor.
func (x *e2e) pushSettings(t *testing.T, a *ghsim.Actor, branch, content string) {
	t.Helper()
	x.pushFile(t, a, branch, mirror.SettingsPath, content)
}

// withCode is GET /ready's defects of code, whatever item they name (the
// repository's own findings name none).
func (s readySet) withCode(code string) []gating.Defect {
	var out []gating.Defect
	for _, d := range s.Defects {
		if d.Code == code {
			out = append(out, d)
		}
	}
	return out
}

// custodyChanges makes k attempts on id, each by a new owner: claim through
// the agent API, the claim marker posted by an agent, release (alternating
// the worker's and the pm's tokens and agents). Then the timer pass runs.
func (x *e2e) custodyChanges(t *testing.T, id string, k int, tag string) {
	t.Helper()
	worker := x.Sim.As("worker-7[bot]")
	pmBot := x.Sim.As("pm-agent[bot]")
	for i := range k {
		if i%2 == 0 {
			x.cycle(t, WorkerToken, fmt.Sprintf("worker-7/%s-%d", tag, i), worker, id)
		} else {
			x.cycle(t, PMToken, fmt.Sprintf("pm/%s-%d", tag, i), pmBot, id)
		}
	}
	x.MustSweep(t)
}

// mustParkAt checks that id is parked by warden for poison at the given
// number of attempts: tags, label, one park comment saying attempts=n.
func (x *e2e) mustParkAt(t *testing.T, id string, attempts int) {
	t.Helper()
	n := num(t, id)
	it := x.mustItem(t, id)
	parkedWith(t, it, "pm", "poison-threshold")
	if !x.labels(n)[lblParked] {
		t.Errorf("#%d lacks the parked label after the park: %v", n, x.labels(n))
	}
	pcs := x.parkComments(n)
	want := fmt.Sprintf("<!-- backlog-warden: park item=%s attempts=%d ", id, attempts)
	if len(pcs) != 1 || !strings.HasPrefix(firstLine(pcs[0].Raw), want) {
		t.Errorf("#%d park comments %+v, want one starting %q", n, pcs, want)
	}
}

// mustNotPark checks that id is not parked after its attempts.
func (x *e2e) mustNotPark(t *testing.T, id string) {
	t.Helper()
	n := num(t, id)
	notParked(t, x.mustItem(t, id))
	if x.labels(n)[lblParked] || len(x.parkComments(n)) != 0 {
		t.Errorf("#%d parked: labels %v, park comments %d", n, x.labels(n), len(x.parkComments(n)))
	}
	if s := x.mustReady(t); !s.has(id) {
		t.Errorf("%s is not ready (excluded as %q)", id, s.exclusion(id))
	}
}

// noSettingsFindings checks that GET /ready reports no settings-* finding.
func noSettingsFindings(t *testing.T, s readySet) {
	t.Helper()
	for _, c := range []string{mirror.SettingsInvalid, mirror.SettingsChangedByAgent} {
		if ds := s.withCode(c); len(ds) != 0 {
			t.Errorf("GET /ready reports %s: %+v", c, ds)
		}
	}
}

// TestE2ESettingsPresentAtInstall: a repository whose default branch holds
// `.github/backlog.yml` when the App starts serving it works with the
// file's labels from the start: warden creates them, an issue with the
// custom item label is an item (gated with the custom admission label when
// an agent made it), and the default item label makes nothing.
//
// The harness installs the App on its own repository before a test runs,
// so a second repository is added to the installation: the simulator's
// deliveries are held while the repository is added and a maintainer pushes
// the file, and only installation_repositories.added is sent (the push
// happened "before the install": GitHub sends nothing for a repository the
// App is not installed on).
func TestE2ESettingsPresentAtInstall(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	x.MustSettle(t)
	before := len(x.Sim.Deliveries())

	x.Sim.HoldDeliveries()
	pre := x.Sim.AddRepo(x.Inst, "acme/preset", "main")
	x.Sim.SetRole(pre, "maria", "maintain")
	x.Sim.SetRole(pre, "builder[bot]", "write")
	maria := x.Sim.As("maria")
	_, err := maria.Push(pre, "main", "", map[string]string{mirror.SettingsPath: "labels:\n  item: todo\n  admission: needs-triage\n  parked: on-hold\n"}, "backlog settings")
	queued := 0
	x.Sim.ReleaseDeliveries(func(n int) []int { queued = n; return []int{0} })
	if err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	if queued < 2 {
		t.Fatalf("%d deliveries were queued for the new repository and the push, want the installation's and the push's", queued)
	}
	var sent []string
	for _, d := range x.Sim.Deliveries()[before:] {
		if d.Event != "label" { // warden's own label.created
			sent = append(sent, d.Event+"."+d.Action+"/"+d.Status)
		}
	}
	if len(sent) != 1 || sent[0] != "installation_repositories.added/OK" {
		t.Fatalf("sent %v, want only installation_repositories.added (and warden's label events)", sent)
	}

	// The file's labels are created.
	x.Sim.Locked(func() {
		for _, l := range []string{"todo", "needs-triage", "on-hold"} {
			if pre.Labels[l] == nil {
				t.Errorf("label %q of the settings file was not created in %s", l, pre.FullName)
			}
		}
	})

	view := &Env{Sim: x.Sim, GitHub: x.GitHub, Service: x.Service, PublicURL: x.PublicURL, AdminURL: x.AdminURL, Inst: x.Inst, Repo: pre}
	byMaria, err := maria.OpenIssue(pre, "Filed by a maintainer", "spec", "todo")
	if err != nil {
		t.Fatal(err)
	}
	byAgent, err := x.Sim.As("builder[bot]").OpenIssue(pre, "Proposed by an agent", "spec", "todo")
	if err != nil {
		t.Fatal(err)
	}
	oldLabel, err := maria.OpenIssue(pre, "Labelled the default way", "spec", "backlog")
	if err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)

	labelsOf := func(n int) map[string]bool {
		out := map[string]bool{}
		x.Sim.Locked(func() {
			for _, l := range pre.Issues[n].Labels {
				out[strings.ToLower(l.Name)] = true
			}
		})
		return out
	}
	get := func(n int) int {
		code, err := view.API(context.Background(), WorkerToken, http.MethodGet, "/items/"+idOf(n), nil, nil)
		if err != nil {
			t.Fatalf("GET /items/%s of %s: %v", idOf(n), pre.FullName, err)
		}
		return code
	}
	s := view.mustReady(t)
	if code := get(byMaria.Number); code != http.StatusOK {
		t.Errorf("#%d (item label todo, by a maintainer) is not an item: GET answered %d", byMaria.Number, code)
	} else if !s.has(idOf(byMaria.Number)) {
		t.Errorf("%s is not ready (excluded as %q): a maintainer's item is admitted at creation", idOf(byMaria.Number), s.exclusion(idOf(byMaria.Number)))
	}
	if code := get(byAgent.Number); code != http.StatusOK {
		t.Errorf("#%d (item label todo, by an agent) is not an item: GET answered %d", byAgent.Number, code)
	} else {
		if l := labelsOf(byAgent.Number); !l["needs-triage"] || l["needs-specification"] {
			t.Errorf("#%d labels %v, want the file's admission label needs-triage (and not the default)", byAgent.Number, l)
		}
		if s.exclusion(idOf(byAgent.Number)) != gating.ExAwaitingAdmission {
			t.Errorf("%s excluded as %q, want awaiting-admission", idOf(byAgent.Number), s.exclusion(idOf(byAgent.Number)))
		}
	}
	if code := get(oldLabel.Number); code != http.StatusNotFound {
		t.Errorf("#%d carries only the default item label backlog, which the file replaced: GET answered %d, want 404", oldLabel.Number, code)
	}
	noSettingsFindings(t, s)
}

// TestE2ESettingsHumanPush: a person with write access pushes
// `poison_threshold: 2`: it takes effect, and an item parks after two
// custody changes.
func TestE2ESettingsHumanPush(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	hana := x.Person("hana", "write")
	x.pushSettings(t, hana, "main", "poison_threshold: 2\n")
	id := x.create(t, HumanToken, "Split the billing service", []string{"priority:P1"})
	x.MustSettle(t)

	x.custodyChanges(t, id, 2, "h")
	x.mustParkAt(t, id, 2)
	s := x.mustReady(t)
	if s.has(id) {
		t.Errorf("%s is still ready after two attempts under poison_threshold 2", id)
	}
	noSettingsFindings(t, s)
}

// TestE2ESettingsAgentPush: a Bot's push of `poison_threshold: 10` does not
// take effect (an item still parks at the 2 a human set before), and
// settings-changed-by-agent is reported by GET /ready and on the status
// page.
func TestE2ESettingsAgentPush(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	hana := x.Person("hana", "write")
	bot := x.agent("config-bot[bot]", "write")
	x.pushSettings(t, hana, "main", "poison_threshold: 2\n")
	x.pushSettings(t, bot, "main", "poison_threshold: 10\n")
	id := x.create(t, HumanToken, "Retire the v1 endpoints", []string{"priority:P1"})
	x.MustSettle(t)

	x.custodyChanges(t, id, 2, "a")
	x.mustParkAt(t, id, 2)

	s := x.mustReady(t)
	ds := s.withCode(mirror.SettingsChangedByAgent)
	if len(ds) == 0 {
		t.Errorf("GET /ready does not report %s after a bot's push: defects %+v", mirror.SettingsChangedByAgent, s.Defects)
	}
	t.Run("status page", func(t *testing.T) {
		resp, err := http.Get(x.AdminURL + "/")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), mirror.SettingsChangedByAgent) {
			t.Errorf("the status page (%d) does not show %s for %s:\n%s", resp.StatusCode, mirror.SettingsChangedByAgent, x.Repo.FullName, b)
		}
	})
}

// TestE2ESettingsMalformed: a human's push of a file that is not YAML is
// reported settings-invalid and the last good values stay (the item parks
// at 2, set before); a human's fix resolves the finding.
func TestE2ESettingsMalformed(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	hana := x.Person("hana", "write")
	x.pushSettings(t, hana, "main", "poison_threshold: 2\n")
	x.pushSettings(t, hana, "main", "poison_threshold: [2\nlabels: {item: todo\n")
	id := x.create(t, HumanToken, "Move the cron jobs", []string{"priority:P1"})
	x.MustSettle(t)

	s := x.mustReady(t)
	if len(s.withCode(mirror.SettingsInvalid)) == 0 {
		t.Errorf("GET /ready does not report %s after a malformed push: defects %+v", mirror.SettingsInvalid, s.Defects)
	}
	if ds := s.withCode(mirror.SettingsChangedByAgent); len(ds) != 0 {
		t.Errorf("a human's push reported %s: %+v", mirror.SettingsChangedByAgent, ds)
	}
	x.custodyChanges(t, id, 2, "m")
	x.mustParkAt(t, id, 2)

	// The labels stayed too: an issue with the default item label is an item.
	maria := x.Person("maria", "maintain")
	iss, err := maria.OpenIssue(x.Repo, "Filed after the malformed push", "spec", lblItem)
	if err != nil {
		t.Fatal(err)
	}
	x.MustSettle(t)
	if _, ok := x.item(t, idOf(iss.Number)); !ok {
		t.Errorf("#%d with the item label %s is no item after a malformed settings push", iss.Number, lblItem)
	}

	x.pushSettings(t, hana, "main", "poison_threshold: 2\n")
	if ds := x.mustReady(t).withCode(mirror.SettingsInvalid); len(ds) != 0 {
		t.Errorf("%s still reported after a human pushed a valid file: %+v", mirror.SettingsInvalid, ds)
	}
}

// TestE2ESettingsOtherBranch: pushes of the file to another branch, by a
// human (a valid change) or a bot (malformed), change nothing and report
// nothing: the default threshold of 3 still applies.
func TestE2ESettingsOtherBranch(t *testing.T) {
	t.Parallel()
	x := newE2E(t)
	hana := x.Person("hana", "write")
	bot := x.agent("config-bot[bot]", "write")
	x.pushSettings(t, hana, "feature/settings", "poison_threshold: 2\n")
	x.pushSettings(t, bot, "feature/bot", "poison_threshold: [10\n")
	id := x.create(t, HumanToken, "Cache the price list", []string{"priority:P1"})
	x.MustSettle(t)

	x.custodyChanges(t, id, 2, "o")
	x.mustNotPark(t, id)
	noSettingsFindings(t, x.mustReady(t))

	// The third attempt parks it: the default is in effect.
	x.cycle(t, WorkerToken, "worker-7/o-third", x.Sim.As("worker-7[bot]"), id)
	x.MustSweep(t)
	x.mustParkAt(t, id, 3)
}
