package main

import (
	"fmt"
	"maps"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// ---- results ----

// readFloor is the reads a delivery may make, and why (writes are judged
// per act, in overTheFloor).
func (r *acRun) readFloor(d *acDelivery) (int, string) {
	if d.FromSelf {
		return 0, "warden's own event"
	}
	if d.Repos > 0 {
		// The payload names the repository but not its default branch.
		return 3 * d.Repos, "per repository added: the repository (its default branch), its settings file and its labels"
	}
	if d.Event == "issues" && (d.Action == "labeled" || d.Action == "unlabeled") && r.isItem[d.Number] {
		switch strings.ToLower(d.Label) {
		case acAdmissionLabel, acParkedLabel:
			return 1, "one label-events read"
		}
	}
	return 0, "the payload holds the answer"
}

func (r *acRun) results(elapsed time.Duration) ([]Figure, error) {
	recs, err := r.e.Service.Inbox.List(r.ctx, false, 1<<20)
	if err != nil {
		return nil, err
	}
	bot := r.e.Sim.BotLogin()
	r.mu.Lock()
	defer r.mu.Unlock()
	var all []*acDelivery
	for _, rec := range recs {
		d := r.dels[rec.ID]
		if d == nil { // an event no handler is wired for: stored, acted on by nothing
			d = &acDelivery{ID: rec.ID, Event: rec.Event, Action: rec.Action, Number: rec.Number, Sender: rec.Sender,
				FromSelf: rec.Sender == bot, Step: -1}
		}
		d.Outcome = rec.Outcome
		all = append(all, d)
	}
	// In the order of the acts (delivery ids are random), so the output of
	// a seeded run is the same from run to run.
	sort.Slice(all, func(i, j int) bool {
		a, b := all[i], all[j]
		if a.Step != b.Step {
			return a.Step < b.Step
		}
		if a.group() != b.group() {
			return a.group() < b.group()
		}
		if a.Number != b.Number {
			return a.Number < b.Number
		}
		return a.ID < b.ID
	})
	if n := len(r.dels); n > len(all) {
		return nil, fmt.Errorf("observed %d deliveries, the inbox lists %d", n, len(all))
	}

	// Per group.
	groups := map[string][]*acDelivery{}
	var sumR, sumW, sumNM, external, handlings int
	for _, d := range all {
		groups[d.group()] = append(groups[d.group()], d)
		sumR, sumW, sumNM = sumR+d.Reads, sumW+d.Writes, sumNM+d.NotM
		handlings += d.Handlings
		if !d.FromSelf {
			external++
		}
	}
	names := make([]string, 0, len(groups))
	for g := range groups {
		names = append(names, g)
	}
	sort.Strings(names)
	fmt.Printf("GitHub API calls per delivery — %d deliveries (%d not caused by warden, %d handlings), %d acts, %s\n\n",
		len(all), external, handlings, len(r.steps)-1, elapsed.Round(time.Millisecond))
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tDELIVERIES\tREADS med\tmax\tsum\tWRITES med\tmax\tsum\t304s")
	row := func(name string, ds []*acDelivery) {
		rs, ws := counts(ds, func(d *acDelivery) int { return d.Reads }), counts(ds, func(d *acDelivery) int { return d.Writes })
		nm := 0
		for _, d := range ds {
			nm += d.NotM
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%s\t%d\t%d\t%d\n", name, len(ds), fmtMedian(median(rs)), slices.Max(rs), sum(rs),
			fmtMedian(median(ws)), slices.Max(ws), sum(ws), nm)
	}
	for _, g := range names {
		row(g, groups[g])
	}
	row("all", all)
	tw.Flush()

	// Label deliveries by the label's role.
	fmt.Println()
	tw = tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "LABEL DELIVERY (not self)\tDELIVERIES\tREADS med\tmax\tsum\tWRITES med\tmax\tsum\t304s")
	byRole := map[string][]*acDelivery{}
	for _, d := range all {
		if d.FromSelf || d.Label == "" {
			continue
		}
		k := d.group() + " " + r.labelRole(d)
		byRole[k] = append(byRole[k], d)
	}
	keys := make([]string, 0, len(byRole))
	for k := range byRole {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		row(k, byRole[k])
	}
	tw.Flush()

	// Totals: the simulator's count per installation against the sum of the
	// per-delivery counts.
	inst := r.e.Sim.Calls(r.e.Inst.ID)
	appLevel := r.e.Sim.Calls(0)
	outside := map[string][2]int{}
	for _, x := range r.ex {
		if x.Step <= 0 || x.Step >= len(r.steps) || !r.steps[x.Step].Outside {
			continue
		}
		k := r.steps[x.Step].Name
		v := outside[k]
		if x.read() {
			v[0]++
		} else {
			v[1]++
		}
		outside[k] = v
	}
	fmt.Printf("\nGitHub requests over the run (the simulator's count): installation %d: %d reads (+%d answered 304), %d writes; the App itself (JWT): %d reads, %d writes\n",
		r.e.Inst.ID, inst.Reads, inst.NotModified, inst.Writes, appLevel.Reads, appLevel.Writes)
	fmt.Printf("  %-44s %5d reads %5d writes  (%d of the reads answered 304)\n", "in deliveries' handlings (sum of the above):", sumR, sumW, sumNM)
	fmt.Println("  outside deliveries:")
	restR, restW := inst.Reads+inst.NotModified+appLevel.Reads-sumR, inst.Writes+appLevel.Writes-sumW
	for _, k := range slices.Sorted(maps.Keys(outside)) {
		fmt.Printf("    %-42s %5d reads %5d writes\n", k, outside[k][0], outside[k][1])
		restR, restW = restR-outside[k][0], restW-outside[k][1]
	}
	fmt.Printf("    %-42s %5d reads %5d writes\n", "start-up, and anything not listed above", restR, restW)
	overs := r.overTheFloor(all)
	fmt.Println()
	if len(overs) == 0 {
		fmt.Println("no delivery over the floor")
	}
	for _, o := range overs {
		fmt.Println(o)
	}
	fmt.Println()

	work := fmt.Sprintf("%d deliveries (%d by others), seeded mix", len(all), external)
	rs := counts(all, func(d *acDelivery) int { return d.Reads })
	ws := counts(all, func(d *acDelivery) int { return d.Writes })
	const writeFloor = "floor: one per required change"
	figs := []Figure{
		{"GitHub calls", "deliveries replayed", float64(len(all)), "deliveries", work, "≥ 1,000 (150 quick)"},
		{"GitHub calls", "reads per delivery, median", median(rs), "reads", work, "floor 0, or 1 (label events)"},
		{"GitHub calls", "reads per delivery, max", float64(slices.Max(rs)), "reads", work, "floor 0, or 1 (label events)"},
		{"GitHub calls", "writes per delivery, median", median(ws), "writes", work, writeFloor},
		{"GitHub calls", "writes per delivery, max", float64(slices.Max(ws)), "writes", work, writeFloor},
	}
	for _, g := range []string{"issues.labeled", "issues.unlabeled", "issue_comment.created"} {
		ds := groups[g]
		if len(ds) == 0 {
			continue
		}
		readFloor := "floor 0: the payload holds the answer"
		if strings.HasPrefix(g, "issues.") {
			readFloor = "floor 1 (label events) for the admission or parked label, else 0"
		}
		w := fmt.Sprintf("%d %s deliveries", len(ds), g)
		gr := counts(ds, func(d *acDelivery) int { return d.Reads })
		gw := counts(ds, func(d *acDelivery) int { return d.Writes })
		figs = append(figs,
			Figure{"GitHub calls", g + " reads, median", median(gr), "reads", w, readFloor},
			Figure{"GitHub calls", g + " reads, max", float64(slices.Max(gr)), "reads", w, readFloor},
			Figure{"GitHub calls", g + " writes, median", median(gw), "writes", w, writeFloor},
			Figure{"GitHub calls", g + " writes, max", float64(slices.Max(gw)), "writes", w, writeFloor},
		)
	}
	figs = append(figs,
		Figure{"GitHub calls", "requests in the run, installation", float64(inst.Reads + inst.Writes), "requests", work, "5,000 / h / installation"},
		Figure{"GitHub calls", "of which in deliveries", float64(sumR - sumNM + sumW), "requests", work, "the rest: agent API, timer pass, start-up"},
	)
	return figs, nil
}

// labelRole names a label delivery's label as warden sees it.
func (r *acRun) labelRole(d *acDelivery) string {
	kind := "on an item"
	if !r.isItem[d.Number] {
		kind = "on no item"
	}
	switch strings.ToLower(d.Label) {
	case acAdmissionLabel:
		return "[admission " + kind + "]"
	case acParkedLabel:
		return "[parked " + kind + "]"
	case acItemLabel:
		return "[item label]"
	}
	return "[other label " + kind + "]"
}

// overTheFloor lists the deliveries (grouped by class) whose reads exceed
// the floor, and the acts whose deliveries wrote more than the act needs.
func (r *acRun) overTheFloor(all []*acDelivery) []string {
	byStep := map[int][]*acDelivery{}
	for _, d := range all {
		byStep[d.Step] = append(byStep[d.Step], d)
	}
	exByStep := map[int][]acExchange{}
	for _, x := range r.ex {
		if !x.appLevel() {
			exByStep[x.Step] = append(exByStep[x.Step], x)
		}
	}
	type class struct {
		n        int
		counts   map[int]int // reads or writes -> deliveries
		outcomes map[string]int
		calls    map[string]int
		example  string
	}
	classes := map[string]*class{}
	var order []string
	note := func(key string, d *acDelivery, v int, calls []acExchange) {
		c := classes[key]
		if c == nil {
			c = &class{counts: map[int]int{}, outcomes: map[string]int{}, calls: map[string]int{}, example: d.ID}
			classes[key] = c
			order = append(order, key)
		}
		c.n++
		c.counts[v]++
		c.outcomes[d.Outcome]++
		for _, x := range calls {
			c.calls[x.String()]++
		}
	}
	stepName := func(s int) string {
		if s >= 0 && s < len(r.steps) {
			return r.steps[s].Name
		}
		return "?"
	}
	for _, d := range all {
		floor, why := r.readFloor(d)
		// The reads behind it: the act's reads (exact when it is the only
		// delivery of the act that read).
		var calls []acExchange
		readers := 0
		for _, o := range byStep[d.Step] {
			if o.Reads > 0 {
				readers++
			}
		}
		perms := 0
		for _, x := range exByStep[d.Step] {
			if x.read() && readers == 1 {
				calls = append(calls, x)
				if strings.HasSuffix(x.Pattern, "/collaborators/{username}/permission") {
					perms++ // a human act judged: one lookup per person per ten minutes (§4)
				}
			}
		}
		if perms > 0 {
			floor += perms
			why += fmt.Sprintf(", plus %d role lookup(s) (cached ten minutes)", perms)
		}
		if d.Reads <= floor {
			continue
		}
		lbl := ""
		if d.Label != "" {
			lbl = " " + r.labelRole(d)
		}
		key := fmt.Sprintf("reads — %s%s after %q (floor %d: %s)", d.group(), lbl, stepName(d.Step), floor, why)
		note(key, d, d.Reads, calls)
	}
	// Writes: per act, the writes of its deliveries (not warden's own:
	// those are checked above and must be none) against what it needs, the
	// report comment allowed once per delivery.
	for s, st := range r.steps {
		if st.Outside {
			continue
		}
		ds := byStep[s]
		w, selfW := 0, 0
		for _, d := range ds {
			if d.FromSelf {
				selfW += d.Writes
			} else {
				w += d.Writes
			}
		}
		report := 0
		var calls []acExchange
		for _, x := range exByStep[s] {
			if x.read() {
				continue
			}
			calls = append(calls, x)
			if x.Note == "report comment" || (x.Method == http.MethodPatch && strings.HasSuffix(x.Pattern, "/issues/comments/{comment_id}")) {
				report++
			}
		}
		allowedReport := 0
		for _, d := range ds {
			if !d.FromSelf {
				allowedReport++
			}
		}
		over := w - min(report, allowedReport) - st.Want
		if over <= 0 && selfW == 0 {
			continue
		}
		for _, d := range ds {
			if d.FromSelf && d.Writes > 0 {
				note(fmt.Sprintf("writes — self %s.%s after %q (floor 0)", d.Event, d.Action, st.Name), d, d.Writes, calls)
			}
		}
		if over > 0 {
			// The act's delivery that wrote most stands for it.
			var top *acDelivery
			for _, d := range ds {
				if !d.FromSelf && (top == nil || d.Writes > top.Writes) {
					top = d
				}
			}
			if top != nil {
				note(fmt.Sprintf("writes — %q → %s (floor %d, and the report comment once per delivery)", st.Name, top.group(), st.Want), top, w, calls)
			}
		}
	}
	var out []string
	for _, k := range order {
		c := classes[k]
		out = append(out, fmt.Sprintf("over the floor: %s\n    %s: %s\n    requests seen: %s\n    outcomes: %s\n    e.g. delivery %s",
			k, plural(c.n, "delivery", "deliveries"), fmtDist(c.counts), fmtCounts(c.calls), fmtCounts(c.outcomes), c.example))
	}
	return out
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

func fmtDist(m map[int]int) string {
	ks := slices.Sorted(maps.Keys(m))
	var parts []string
	for _, k := range ks {
		parts = append(parts, fmt.Sprintf("%d ×%d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func fmtCounts(m map[string]int) string {
	if len(m) == 0 {
		return "—"
	}
	ks := slices.Sorted(maps.Keys(m))
	sort.SliceStable(ks, func(i, j int) bool { return m[ks[i]] > m[ks[j]] })
	var parts []string
	for i, k := range ks {
		if i == 6 {
			parts = append(parts, fmt.Sprintf("… %d more", len(ks)-i))
			break
		}
		if k == "" {
			k = `""`
		}
		parts = append(parts, fmt.Sprintf("%s ×%d", k, m[k]))
	}
	return "[" + strings.Join(parts, "; ") + "]"
}

func counts(ds []*acDelivery, f func(*acDelivery) int) []int {
	out := make([]int, len(ds))
	for i, d := range ds {
		out[i] = f(d)
	}
	if len(out) == 0 {
		return []int{0}
	}
	return out
}

func sum(xs []int) int {
	t := 0
	for _, x := range xs {
		t += x
	}
	return t
}

func median(xs []int) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return float64(s[len(s)/2])
	}
	return float64(s[len(s)/2-1]+s[len(s)/2]) / 2
}

func fmtMedian(m float64) string {
	if m == float64(int(m)) {
		return fmt.Sprintf("%d", int(m))
	}
	return fmt.Sprintf("%.1f", m)
}
