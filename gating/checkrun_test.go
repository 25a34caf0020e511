package gating

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

const crRepo = "o/r"

// crPR is a pull request from feat/x into main whose body references #12.
func crPR(mods ...func(*PullRequest)) PullRequest {
	pr := PullRequest{Number: 7, State: "open", HeadRef: "feat/x", HeadSHA: "abc", BaseRef: "main", Body: "Closes #12"}
	for _, m := range mods {
		m(&pr)
	}
	return pr
}

func crBase(b string) func(*PullRequest) { return func(p *PullRequest) { p.BaseRef = b } }
func crHead(h string) func(*PullRequest) { return func(p *PullRequest) { p.HeadRef = h } }
func crBody(s string) func(*PullRequest) { return func(p *PullRequest) { p.Body = s } }
func crFork(r string) func(*PullRequest) { return func(p *PullRequest) { p.HeadRepoFullName = r } }
func crNumber(n int) func(*PullRequest)  { return func(p *PullRequest) { p.Number = n } }
func crClosed() func(*PullRequest)       { return func(p *PullRequest) { p.State = "closed" } }
func collision() opt                     { return func(c *Candidate) { c.CollisionHold = true } }
func titled(s string) opt                { return func(c *Candidate) { c.Item.Title = s } }
func crInput(s Snapshot, pr PullRequest) CheckInput {
	return CheckInput{PR: pr, Links: PRLinks(pr, crRepo, s), Snapshot: s, RepoFullName: crRepo}
}

// crRow returns the row of pr for item n.
func crRow(t *testing.T, v CheckVerdict, pr, n int) CheckRow {
	t.Helper()
	for _, r := range v.Rows {
		if r.PR == pr && r.Item == IDFor(n) {
			return r
		}
	}
	t.Fatalf("no row for #%d %s in %+v", pr, IDFor(n), v.Rows)
	return CheckRow{}
}

// epicSnap is a grouping issue-10 on feat/epic/x with members 11 and 12,
// integration item 14 (a member too), each held unless overridden.
func epicSnap(integration opt, extra ...Candidate) Snapshot {
	cs := []Candidate{
		mk(10, set("baseBranch", "feat/epic/x")),
		mk(11, member(10), held("w/11"), complete()),
		mk(12, member(10), held("w/12")),
		mk(14, member(10), integrates(10), held("w/14"), integration),
	}
	return snap(append(cs, extra...)...)
}

// TestCheckRunTable has a row per row of CONTRACT.md §8's table (and the
// notices around it).
func TestCheckRunTable(t *testing.T) {
	cases := []struct {
		name     string
		items    []Candidate
		pr       PullRequest
		require  bool
		fromDef  map[ItemID]bool
		want     string // conclusion
		code     string // the row's first code for issue-12 ("" none); "-" checks the PR's own row
		title    string // substring of the title
		notCodes []string
	}{
		{"no linked item", []Candidate{mk(12, held("w/1"))}, crPR(crBody("no reference")), false, nil, ConclusionNeutral, "-", "No backlog item linked", nil},
		{"no linked item, require_item", []Candidate{mk(12, held("w/1"))}, crPR(crBody("")), true, nil, ConclusionFailure, "-", "No backlog item linked", nil},
		{"a reference to no item", []Candidate{mk(12, held("w/1"))}, crPR(crBody("closes #99")), false, nil, ConclusionNeutral, "-", "No backlog item linked", nil},
		{"not admitted (label)", []Candidate{mk(12, held("w/1"), labelled())}, crPR(), false, nil, ConclusionFailure, ExAwaitingAdmission, "issue-12 awaits human admission", nil},
		{"not admitted (unrecorded)", []Candidate{mk(12, held("w/1"), unrecorded())}, crPR(), false, nil, ConclusionFailure, ExAwaitingAdmission, "issue-12 awaits human admission", nil},
		{"parked", []Candidate{mk(12, held("w/1"), parked())}, crPR(), false, nil, ConclusionFailure, ExParked, "issue-12: parked", nil},
		{"poisoned", []Candidate{mk(12, released("w/1"), attempts(3))}, crPR(), false, nil, ConclusionFailure, ExPoisoned, "issue-12: poisoned", nil},
		{"poison threshold not reached", []Candidate{mk(12, released("w/1"), attempts(2))}, crPR(), false, nil, ConclusionSuccess, "", "Delivers issue-12", nil},
		{"at the threshold but held (the attempt goes on)", []Candidate{mk(12, held("w/1"), attempts(3))}, crPR(), false, nil, ConclusionSuccess, "", "Delivers issue-12", nil},
		{"collision hold", []Candidate{mk(12, held("w/1"), collision())}, crPR(), false, nil, ConclusionFailure, ExCollisionHold, "issue-12: collision-hold", nil},
		{"unknown state", []Candidate{mk(12, held("w/1"), tg("state:done"))}, crPR(), false, nil, ConclusionFailure, ExUnknownState, "issue-12: unknown-state", nil},
		{"two states", []Candidate{mk(12, held("w/1"), tg("state:complete", "state:parked"))}, crPR(), false, nil, ConclusionFailure, ExUnknownState, "", nil},
		{"missing mandatory tag", []Candidate{mk(12, held("w/1"), drop("priority"))}, crPR(), false, nil, ConclusionFailure, "missing-mandatory-tag", "", nil},
		{"duplicate single-valued tag", []Candidate{mk(12, held("w/1"), tg("priority:P0"))}, crPR(), false, nil, ConclusionFailure, "duplicate-attribute-tag", "", nil},
		{"phase:research", []Candidate{mk(12, held("w/1"), set("phase", "research"))}, crPR(), false, nil, ConclusionFailure, "research-with-pr", "issue-12: research-with-pr", nil},
		{"base differs from baseBranch", []Candidate{mk(12, held("w/1"))}, crPR(crBase("develop")), false, nil, ConclusionFailure, "pr-wrong-base", "", nil},
		{"member into the default branch", []Candidate{mk(10, set("baseBranch", "feat/epic/x")), mk(12, member(10), held("w/1"))}, crPR(crBody("Refs #12")), false, nil,
			ConclusionFailure, "epic-child-on-main", "", []string{"pr-wrong-base"}},
		{"member on main into main (item-side defect)", []Candidate{mk(10), mk(12, link(PartOf, "issue-10"), held("w/1"))}, crPR(crBody("Refs #12")), false, nil,
			ConclusionFailure, "epic-child-on-main", "", []string{"pr-wrong-base"}},
		{"member into its epic branch", []Candidate{mk(10, set("baseBranch", "feat/epic/x")), mk(12, member(10), held("w/1"))}, crPR(crBody("Refs #12"), crBase("feat/epic/x"), crHead("feat/epic/x-item")), false, nil,
			ConclusionSuccess, "", "Delivers issue-12", nil},
		{"member cut from the default branch", []Candidate{mk(10, set("baseBranch", "feat/epic/x")), mk(12, member(10), held("w/1"))}, crPR(crBody("Refs #12"), crBase("feat/epic/x")), false,
			map[ItemID]bool{"issue-12": true}, ConclusionFailure, "pr-not-from-base", "", nil},
		{"not a member: head from default is fine", []Candidate{mk(12, held("w/1"))}, crPR(), false, map[ItemID]bool{"issue-12": true}, ConclusionSuccess, "", "", nil},
		{"never claimed", []Candidate{mk(12)}, crPR(), false, nil, ConclusionNeutral, CodeNeverClaimed, "issue-12 was never claimed", nil},
		{"never claimed, direct deployment", []Candidate{mk(12, tg(DirectDeploymentTag))}, crPR(), false, nil, ConclusionSuccess, "", "Delivers issue-12", nil},
		{"already complete", []Candidate{mk(12, held("w/1"), complete())}, crPR(), false, nil, ConclusionNeutral, "complete-with-open-pr", "", nil},
		{"otherwise success (held)", []Candidate{mk(12, held("w/1"))}, crPR(), false, nil, ConclusionSuccess, "", "Delivers issue-12", nil},
		{"otherwise success (released, reserved merge)", []Candidate{mk(12, released("w/1"))}, crPR(), false, nil, ConclusionSuccess, "", "Delivers issue-12", nil},
		{"blocked is no failure", []Candidate{mk(3), mk(12, held("w/1"), blockedBy(3))}, crPR(), false, nil, ConclusionSuccess, "", "", nil},
		{"fork head named like the epic branch is delivered", []Candidate{mk(10, set("baseBranch", "feat/epic/x")), mk(12, member(10), held("w/1"))},
			crPR(crBody("Refs #12"), crHead("feat/epic/x"), crBase("feat/epic/x"), crFork("m/r")), false, nil, ConclusionSuccess, CodeBranchNameNit, "Delivers issue-12", nil},
		{"the worst item decides", []Candidate{mk(12, held("w/1"), labelled()), mk(13, held("w/2"))}, crPR(crBody("Closes #12, closes #13")), false, nil,
			ConclusionFailure, ExAwaitingAdmission, "issue-12 awaits human admission", nil},
		{"several failures on one item", []Candidate{mk(12, held("w/1"), labelled(), set("phase", "research"))}, crPR(crBase("develop")), false, nil,
			ConclusionFailure, ExAwaitingAdmission, "issue-12 awaits human admission", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := snap(tc.items...)
			in := crInput(s, tc.pr)
			in.RequireItem = tc.require
			in.HeadFromDefault = tc.fromDef
			v := CheckRunVerdict(in)
			if v.Conclusion != tc.want {
				t.Errorf("conclusion %s, want %s; rows %+v", v.Conclusion, tc.want, v.Rows)
			}
			if !strings.Contains(v.Title, tc.title) {
				t.Errorf("title %q does not contain %q", v.Title, tc.title)
			}
			var row CheckRow
			if tc.code == "-" {
				if len(v.Rows) != 1 || v.Rows[0].Item != "" || v.Rows[0].Code != "pr-without-item" || v.Rows[0].Conclusion != tc.want {
					t.Fatalf("rows %+v, want the PR's own pr-without-item row", v.Rows)
				}
				return
			}
			row = crRow(t, v, tc.pr.Number, 12)
			if tc.code != "" && row.Code != tc.code {
				t.Errorf("row code %q (codes %v), want %q; detail %s", row.Code, row.Codes, tc.code, row.Detail)
			}
			if tc.code == "" && tc.want == ConclusionSuccess && (row.Code != "" || len(row.Codes) != 0) {
				t.Errorf("success row has codes %v", row.Codes)
			}
			for _, c := range tc.notCodes {
				for _, rc := range row.Codes {
					if rc == c {
						t.Errorf("row has code %s: %v", c, row.Codes)
					}
				}
			}
			if !row.Delivered {
				t.Errorf("row not delivered: %+v", row)
			}
		})
	}
}

func TestCheckRunSeveralFindings(t *testing.T) {
	s := snap(mk(12, held("w/1"), labelled(), set("phase", "research")))
	v := CheckRunVerdict(crInput(s, crPR(crBase("develop"))))
	row := crRow(t, v, 7, 12)
	want := []string{"awaiting-admission", "research-with-pr", "pr-wrong-base"}
	if !reflect.DeepEqual(row.Codes, want) {
		t.Errorf("codes %v, want %v", row.Codes, want)
	}
	// An unrecognised state is said once (the state and the tag checks both
	// see it).
	s = snap(mk(12, held("w/1"), tg("state:done")))
	row = crRow(t, CheckRunVerdict(crInput(s, crPR())), 7, 12)
	if n := strings.Count(row.Detail, "state:done"); n != 1 || !reflect.DeepEqual(row.Codes, []string{ExUnknownState}) {
		t.Errorf("unknown state said %d times, codes %v: %s", n, row.Codes, row.Detail)
	}
	// Failures come before notices.
	s = snap(mk(12, labelled()))
	row = crRow(t, CheckRunVerdict(crInput(s, crPR())), 7, 12)
	if want := []string{ExAwaitingAdmission, CodeNeverClaimed}; !reflect.DeepEqual(row.Codes, want) || row.Conclusion != ConclusionFailure {
		t.Errorf("codes %v (%s), want %v failure", row.Codes, row.Conclusion, want)
	}
}

func TestCheckRunGroupings(t *testing.T) {
	bucket := crPR(crHead("feat/epic/x"), crBase("main"), crBody("Closes #10\nRefs #11, refs #12"))
	cases := []struct {
		name  string
		s     Snapshot
		pr    PullRequest
		want  string
		gCode string // the grouping row's code ("" success, "none" no grouping row)
	}{
		{"bucket, integration complete", epicSnap(complete()), bucket, ConclusionSuccess, ""},
		{"bucket, integration live", epicSnap(func(*Candidate) {}), bucket, ConclusionFailure, "integration-incomplete"},
		{"bucket, integration parked", epicSnap(parked()), bucket, ConclusionFailure, "integration-incomplete"},
		{"bucket linking nothing is still the bucket", epicSnap(func(*Candidate) {}), crPR(crHead("feat/epic/x"), crBody("merge the epic")), ConclusionFailure, "integration-incomplete"},
		{"bucket, no integration item", snap(mk(10, set("baseBranch", "feat/epic/x")), mk(11, member(10), held("w/11"))), bucket, ConclusionFailure, "integration-missing"},
		{"bucket, two integration items", snap(mk(10, set("baseBranch", "feat/epic/x")), mk(11, member(10), integrates(10), complete()), mk(13, integrates(10), complete())),
			bucket, ConclusionFailure, "integration-duplicate"},
		{"epic branch into another branch is no bucket", epicSnap(func(*Candidate) {}), crPR(crHead("feat/epic/x"), crBase("release/1"), crBody("Refs #11")), ConclusionSuccess, "none"},
		{"a fork's branch named like the epic's is no bucket", epicSnap(func(*Candidate) {}), crPR(crHead("feat/epic/x"), crFork("m/r"), crBody("nothing")), ConclusionNeutral, "none"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := CheckRunVerdict(crInput(tc.s, tc.pr))
			if v.Conclusion != tc.want {
				t.Errorf("conclusion %s, want %s; rows %+v", v.Conclusion, tc.want, v.Rows)
			}
			var g *CheckRow
			for k := range v.Rows {
				if v.Rows[k].Item == "issue-10" {
					g = &v.Rows[k]
				}
			}
			switch {
			case tc.gCode == "none":
				if g != nil {
					t.Errorf("grouping row %+v, want none", *g)
				}
			case g == nil:
				t.Fatalf("no grouping row in %+v", v.Rows)
			case g.Code != tc.gCode:
				t.Errorf("grouping code %q, want %q (%s)", g.Code, tc.gCode, g.Detail)
			case g.Delivered:
				t.Errorf("grouping row judged as delivered")
			}
			// Members on the epic branch are carried: listed, never judged.
			for _, r := range v.Rows {
				if (r.Item == "issue-11" || r.Item == "issue-12") && tc.pr.HeadRepoFullName == "" {
					if r.Delivered || r.Conclusion != ConclusionSuccess || !strings.Contains(r.Detail, "carried") {
						t.Errorf("member row %+v, want carried", r)
					}
				}
			}
		})
	}
}

func TestCheckRunGroupingMentionedByMember(t *testing.T) {
	s := epicSnap(func(*Candidate) {})
	pr := crPR(crHead("feat/epic/x-12"), crBase("feat/epic/x"), crBody("Part of #10\nRefs #12"))
	v := CheckRunVerdict(crInput(s, pr))
	if v.Conclusion != ConclusionSuccess {
		t.Errorf("conclusion %s, want success: %+v", v.Conclusion, v.Rows)
	}
	g := crRow(t, v, 7, 10)
	if g.Delivered || g.Conclusion != ConclusionSuccess || !strings.Contains(g.Detail, "grouping") {
		t.Errorf("grouping row %+v, want listed", g)
	}
	if m := crRow(t, v, 7, 12); !m.Delivered {
		t.Errorf("member row %+v, want delivered", m)
	}
}

func TestCheckRunOtherPRs(t *testing.T) {
	s := snap(mk(12, held("w/1")), mk(13, held("w/2"), labelled()))
	main := crPR()
	other := func(body string, mods ...func(*PullRequest)) CheckPR {
		pr := crPR(append([]func(*PullRequest){crNumber(8), crBase("develop"), crBody(body)}, mods...)...)
		return CheckPR{PR: pr, Links: PRLinks(pr, crRepo, s)}
	}
	cases := []struct {
		name   string
		others []CheckPR
		want   string
		rows   int
	}{
		{"alone", nil, ConclusionSuccess, 1},
		{"another PR links nothing", []CheckPR{other("nothing")}, ConclusionNeutral, 2},
		{"another PR fails", []CheckPR{other("closes #13", crBase("main"))}, ConclusionFailure, 2},
		{"a closed one is ignored", []CheckPR{other("closes #13", crBase("main"), crClosed())}, ConclusionSuccess, 1},
		{"the same PR again is ignored", []CheckPR{{PR: crPR(crBody("nothing")), Links: nil}}, ConclusionSuccess, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := crInput(s, main)
			in.OtherPRs = tc.others
			v := CheckRunVerdict(in)
			if v.Conclusion != tc.want || len(v.Rows) != tc.rows {
				t.Errorf("conclusion %s with %d rows, want %s with %d: %+v", v.Conclusion, len(v.Rows), tc.want, tc.rows, v.Rows)
			}
			if tc.rows == 2 && !strings.Contains(v.Summary, "Pull request #8") {
				t.Errorf("summary has no section for #8:\n%s", v.Summary)
			}
		})
	}
}

func TestCheckRunSuccessNamesContext(t *testing.T) {
	s := snap(mk(3), mk(12, held("w/1"), attempts(2), blockedBy(3), titled("Add the thing")))
	v := CheckRunVerdict(crInput(s, crPR()))
	row := crRow(t, v, 7, 12)
	if row.Attempts != 2 || !strings.HasPrefix(row.Holder, "w/1 (held, fence 5") || !reflect.DeepEqual(row.Blockers, []string{"issue-3 (live)"}) {
		t.Errorf("row context %+v", row)
	}
	for _, want := range []string{"attempts 2", Defuse("w/1 (held, fence 5"), Defuse("issue-3 (live)"), "Add the thing", "Pull request #7: success", Defuse("closes #12")} {
		if !strings.Contains(v.Summary, want) {
			t.Errorf("summary lacks %q:\n%s", want, v.Summary)
		}
	}
}

func TestCheckRunSummaryDefused(t *testing.T) {
	hostile := "@octocat #12 <script>x</script> & GH-1 ](http://e) `tick`"
	s := snap(mk(12, titled(hostile), func(c *Candidate) { held("@mallory")(c); c.Claim.Branch = hostile }))
	pr := crPR(crHead(hostile), crBase("main"), crBody("Closes #12"))
	pr.HeadRepoFullName = ""
	in := crInput(s, pr)
	in.Links = append(in.Links, PRLink{Item: "issue-12", How: []string{"claim branch " + hostile}})
	v := CheckRunVerdict(in)
	// Everything but warden's own "Pull request #7" is inert.
	rest := strings.ReplaceAll(v.Summary, "### Pull request #7", "")
	for _, c := range []struct {
		re   *regexp.Regexp
		what string
	}{{liveMention, "@"}, {liveHash, "#"}, {liveAngle, "<"}, {liveAmp, "&"}, {liveGH, "GH-n"}} {
		if m := c.re.FindString(rest); m != "" {
			t.Errorf("live %s in the summary: %q\n%s", c.what, m, v.Summary)
		}
	}
	for _, bad := range []string{"](", "://"} {
		if strings.Contains(rest, bad) {
			t.Errorf("summary holds %q", bad)
		}
	}
	if strings.ContainsAny(v.Title, "@<`") {
		t.Errorf("title carries hostile text: %q", v.Title)
	}
}

func TestCheckRunSummaryCut(t *testing.T) {
	var cs []Candidate
	var body strings.Builder
	long := strings.Repeat("ü", 150)
	for n := 100; n < 900; n++ {
		cs = append(cs, mk(n, held(fmt.Sprintf("w/%d", n)), titled(long)))
		fmt.Fprintf(&body, "closes #%d\n", n)
	}
	s := snap(cs...)
	v := CheckRunVerdict(crInput(s, crPR(crBody(body.String()))))
	if len(v.Rows) != 800 || v.Conclusion != ConclusionSuccess {
		t.Fatalf("%d rows, %s", len(v.Rows), v.Conclusion)
	}
	if len(v.Summary) > MaxCheckSummary {
		t.Fatalf("summary is %d bytes, over %d", len(v.Summary), MaxCheckSummary)
	}
	if !utf8.ValidString(v.Summary) {
		t.Errorf("summary is not valid UTF-8")
	}
	shown := strings.Count(v.Summary, "\n- ")
	var left int
	if _, err := fmt.Sscanf(v.Summary[strings.LastIndex(v.Summary, "\n_")+2:], "%d more rows were left out", &left); err != nil {
		t.Fatalf("no cut note: %v\n%s", err, v.Summary[len(v.Summary)-300:])
	}
	if shown+left != 800 || shown == 0 {
		t.Errorf("%d rows shown and %d left out, want 800 in all", shown, left)
	}
	// Whole rows: every shown row has its context line.
	if c := strings.Count(v.Summary, "  attempts "); c != shown {
		t.Errorf("%d context lines for %d rows", c, shown)
	}
	// A short one is not cut.
	small := CheckRunVerdict(crInput(snap(mk(12, held("w/1"))), crPR()))
	if strings.Contains(small.Summary, "left out") {
		t.Errorf("short summary cut:\n%s", small.Summary)
	}
}

func TestWorstConclusion(t *testing.T) {
	cases := []struct {
		in   []string
		want string
	}{
		{nil, ConclusionSuccess},
		{[]string{ConclusionSuccess, ConclusionNeutral}, ConclusionNeutral},
		{[]string{ConclusionNeutral, ConclusionFailure, ConclusionSuccess}, ConclusionFailure},
		{[]string{ConclusionSuccess, "cancelled"}, ConclusionFailure},
	}
	for _, tc := range cases {
		if got := WorstConclusion(tc.in...); got != tc.want {
			t.Errorf("WorstConclusion(%v) = %s, want %s", tc.in, got, tc.want)
		}
	}
}
