package harness

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/wardenhq/warden/internal/ghsim"
)

// The crash suites' workload (crash_findings_e2e_test.go) and the faults
// GitHub injects meanwhile.

// crashFault makes GitHub hold (or fail) some of warden's next calls, so a
// kill is likely to find a handler waiting on GitHub: the label events read,
// a label write, a comment write.
func crashFault(sim *ghsim.Sim, rnd *rand.Rand) {
	type target struct{ method, path string }
	targets := []target{
		{"GET", "/repos/acme/app/issues/"},  // label events, comments
		{"POST", "/repos/acme/app/issues/"}, // labels, comments
		{"PATCH", "/repos/acme/app/issues/comments/"},
		{"", ""},
	}
	tg := targets[rnd.IntN(len(targets))]
	if rnd.IntN(4) == 0 {
		sim.FailNext(1+rnd.IntN(2), 502, tg.method, tg.path)
		return
	}
	sim.HangNext(1+rnd.IntN(3), time.Duration(200+rnd.IntN(1200))*time.Millisecond, tg.method, tg.path)
}

// crashWorkload is the agents and the maintainer at work: agents open
// items, drop the admission label (warden puts it back) and go on at once
// with a comment or an edit whose payload, of the same second, lacks the
// label; the maintainer often puts the label back at once himself, admits
// a few items and re-gates some. A handful of
// items is worked on at a time; each gets a few acts and is then left
// alone, so what warden last wrote about it stays to be judged.
type crashWorkload struct {
	sim                   *ghsim.Sim
	repo                  *ghsim.Repo
	agent, triager, human *ghsim.Actor
	rnd                   *rand.Rand
	shuffle               bool

	// paused is held by the test while warden restarts: the workload
	// waits (GitHub went on for a moment after the kill; the rest of the
	// downtime would only make the catch-up longer).
	paused sync.Mutex
	items  []int       // every item opened
	active map[int]int // the items worked on, with the acts left for each
	acts   int
}

// crashActive is how many items are worked on at a time.
const crashActive = 6

// crashPace is the pause between two acts: a few tens of milliseconds, and
// three times that under the race detector.
func crashPace(rnd *rand.Rand) time.Duration {
	d := time.Duration(8+rnd.IntN(25)) * time.Millisecond
	if crashRace {
		d *= 3
	}
	return d
}

// run acts until stop, every few milliseconds; shuffled, in bursts whose
// deliveries GitHub releases in random order.
func (c *crashWorkload) run(stop <-chan struct{}) {
	c.active = map[int]int{}
	for {
		burst := 1
		if c.shuffle {
			burst = 4 + c.rnd.IntN(10)
			c.sim.HoldDeliveries()
		}
		for range burst {
			c.paused.Lock()
			c.step()
			c.paused.Unlock()
			time.Sleep(crashPace(c.rnd))
		}
		if c.shuffle {
			// Released in random order, and held again a moment later: the
			// tail not yet sent is shuffled with the next burst and with
			// warden's own writes' deliveries, so a delivery may come
			// several bursts late.
			c.paused.Lock()
			c.sim.ReleaseDeliveries(func(n int) []int { return c.rnd.Perm(n) })
			c.paused.Unlock()
			time.Sleep(time.Duration(c.rnd.IntN(30)) * time.Millisecond)
		}
		select {
		case <-stop:
			return
		default:
		}
	}
}

// step is one act (errors, such as removing a label already gone, are
// GitHub's answers and ignored).
func (c *crashWorkload) step() {
	c.acts++
	if len(c.active) < crashActive {
		labels := []string{lblItem}
		if c.rnd.IntN(2) == 0 {
			labels = append(labels, lblAdmission)
		}
		if iss, err := c.agent.OpenIssue(c.repo, fmt.Sprintf("Proposed work %d", len(c.items)+1), "spec", labels...); err == nil {
			c.items = append(c.items, iss.Number)
			c.active[iss.Number] = 1 + c.rnd.IntN(4)
		}
		return
	}
	nums := make([]int, 0, len(c.active))
	for n := range c.active {
		nums = append(nums, n)
	}
	slices.Sort(nums)
	n := nums[c.rnd.IntN(len(nums))]
	if c.active[n]--; c.active[n] <= 0 {
		delete(c.active, n)
	}
	switch r := c.rnd.IntN(100); {
	case r < 45:
		// An agent drops the admission label and goes on at once; as
		// often as not the maintainer puts the label back at once too.
		c.agent.RemoveLabel(c.repo, n, lblAdmission)
		c.agent.Comment(c.repo, n, "Picking this up now.")
		if c.rnd.IntN(2) == 0 {
			body := fmt.Sprintf("spec, revised (%d)", c.acts)
			c.agent.EditIssue(c.repo, n, nil, &body)
		}
		if c.rnd.IntN(2) == 0 {
			c.human.AddLabels(c.repo, n, lblAdmission)
		}
	case r < 58:
		c.triager.RemoveLabel(c.repo, n, lblAdmission)
	case r < 74:
		c.agent.Comment(c.repo, n, fmt.Sprintf("Progress note %d.", c.acts))
	case r < 84:
		body := fmt.Sprintf("spec, edited (%d)", c.acts)
		c.agent.EditIssue(c.repo, n, nil, &body)
	case r < 91:
		if n%4 == 0 { // a few items only: the rest are never admitted
			c.human.RemoveLabel(c.repo, n, lblAdmission)
		}
	default:
		c.human.AddLabels(c.repo, n, lblAdmission)
	}
}

// closingRound is the workload's last round: on the last k items opened,
// and on k new ones opened in the round, an agent drops the admission label
// and comments, and the maintainer puts the label back at once (all within
// a second, as a race between an agent and a person is); shuffled, GitHub
// delivers the round in random order (an issue's opening may come after
// the rest). Nothing happens to these items after it, so what warden makes
// of it is what the final check reads.
func (c *crashWorkload) closingRound(k int) {
	if c.shuffle {
		c.sim.HoldDeliveries()
	}
	items := slices.Clone(c.items[max(0, len(c.items)-k):])
	for i := range k {
		if iss, err := c.agent.OpenIssue(c.repo, fmt.Sprintf("Late proposal %d", i+1), "spec", lblItem, lblAdmission); err == nil {
			c.items = append(c.items, iss.Number)
			items = append(items, iss.Number)
			c.acts++
		}
	}
	for _, n := range items {
		c.acts += 3
		c.agent.RemoveLabel(c.repo, n, lblAdmission)
		c.agent.Comment(c.repo, n, "Starting on this.")
		c.human.AddLabels(c.repo, n, lblAdmission)
	}
	if c.shuffle {
		c.sim.ReleaseDeliveries(func(n int) []int { return c.rnd.Perm(n) })
	}
}
