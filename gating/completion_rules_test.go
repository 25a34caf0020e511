package gating

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestProveCompletionResearchHolder: a phase:research item completes only on
// findings commented by its claim holder's login (CONTRACT.md §9).
func TestProveCompletionResearchHolder(t *testing.T) {
	at := rt0.Add(time.Minute)
	prose := func(author string, agent bool) FindingsComment {
		return FindingsComment{Author: author, At: at, Agent: agent}
	}
	cases := []struct {
		name     string
		holder   string
		findings []FindingsComment
		proven   bool
		subs     []string
	}{
		{"the holder's findings", "w1-bot", []FindingsComment{prose("w1-bot", true)}, true,
			[]string{"by w1-bot, the claim holder's login", "fence 5"}},
		{"the holder's login compared without case", "W1-Bot", []FindingsComment{prose("w1-bot", true)}, true, nil},
		{"another agent's comment is not the findings", "w1-bot", []FindingsComment{prose("w2-bot", true)}, false,
			[]string{"are by w2-bot", "must be commented by w1-bot, the claim holder's login"}},
		{"a human's comment is not the findings", "w1-bot", []FindingsComment{prose("alice", false)}, false,
			[]string{"are by alice", "w1-bot"}},
		{"the holder's marker is bookkeeping", "w1-bot", []FindingsComment{{Author: "w1-bot", At: at, Agent: true, Marker: true}}, false,
			[]string{"no findings were commented on issue #12 by w1-bot"}},
		{"warden's comment is not the findings", "w1-bot", []FindingsComment{{Author: "warden[bot]", At: at, Agent: true, Warden: true}}, false,
			[]string{"no findings were commented"}},
		{"the holder among others", "w1-bot", []FindingsComment{prose("alice", false), prose("w1-bot", true)}, true, nil},
		{"nothing at all", "w1-bot", nil, false, []string{"no findings were commented on issue #12", "fence 5"}},
		// The holder's login unknown (warden posted the marker): an agent's
		// comment counts, and the verdict says so.
		{"unknown holder: an agent's comment", "", []FindingsComment{prose("w2-bot", true)}, true,
			[]string{"holder's login is unknown", "post_markers", "agent login w2-bot"}},
		{"unknown holder: a human's comment", "", []FindingsComment{prose("alice", false)}, false,
			[]string{"are by alice, who are not agents", "must be commented by an agent login"}},
		{"unknown holder: warden's comment", "", []FindingsComment{{Author: "warden[bot]", At: at, Agent: true, Warden: true}}, false,
			[]string{"no findings were commented", "an agent login"}},
		{"unknown holder: nothing", "", nil, false, []string{"no findings were commented on issue #12", "holder's login is unknown"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := cpInput(cpItem(12), nil)
			in.Item.Tags[2] = "phase:research"
			in.HolderLogin, in.Findings = tc.holder, tc.findings
			v := ProveCompletion(in)
			if v.Proven != tc.proven {
				t.Fatalf("proven %v, want %v: %+v", v.Proven, tc.proven, v)
			}
			if !tc.proven && v.Reason != ReasonCompletionUnproven {
				t.Errorf("reason %s, want %s", v.Reason, ReasonCompletionUnproven)
			}
			for _, s := range tc.subs {
				if !strings.Contains(v.Detail, s) {
					t.Errorf("detail %q lacks %q", v.Detail, s)
				}
			}
		})
	}
}

// dagItems: research grouping 20 (members 21, 22), its design-integration
// item 23 (a member, integrates 20), and implementation grouping 30 that 20
// informs, with members 31, 32 and nested epic 33 (member 34).
func dagItems(mods ...func(map[int]*Item)) (*Item, []*Item) {
	mkI := func(n int, links ...Link) *Item { return &Item{ID: IDFor(n), Tags: with(), Links: links} }
	part := func(g int) Link { return Link{PartOf, string(IDFor(g))} }
	m := map[int]*Item{
		20: mkI(20, Link{Informs, "issue-30"}),
		21: mkI(21, part(20)),
		22: mkI(22, part(20)),
		23: mkI(23, part(20), Link{Integrates, "issue-20"}),
		30: mkI(30),
		31: mkI(31, part(30)),
		32: mkI(32, part(30)),
		33: mkI(33, part(30)),
		34: mkI(34, part(33)),
	}
	m[23].Tags = append(m[23].Tags, "state:complete", "pr:7")
	for _, f := range mods {
		f(m)
	}
	var all []*Item
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if k != 23 {
			all = append(all, m[k])
		}
	}
	return m[23], all
}

const fullDAG = "Plan:\n\n```mermaid\nflowchart TB\n  A[\"#31 seam\"] --> B[\"issue-32\"]\n  A --> C[\"#33 nested epic\"]\n  C --> D[\"issue-34\"]\n```\n"

// TestProveCompletionDAG: a design-integration item may not complete while
// a grouping it informs lacks a mermaid DAG naming every member
// (transitively), and an unreadable body refuses.
func TestProveCompletionDAG(t *testing.T) {
	merged := map[int]*PullRequest{7: cpMergedInto(7, "feat/x", "main")}
	body := func(b string) map[ItemID]GroupingBody { return map[ItemID]GroupingBody{"issue-30": {Body: b}} }
	cases := []struct {
		name   string
		mods   []func(map[int]*Item)
		bodies map[ItemID]GroupingBody
		proven bool
		subs   []string
	}{
		{"a DAG naming every member", nil, body(fullDAG), true, nil},
		{"a graph block counts too", nil, body("```mermaid\ngraph LR\n#31-->#32\n#32-->#33\n#33-->issue-34\n```"), true, nil},
		{"no mermaid block", nil, body("We will do 31, 32, 33 and 34."), false,
			[]string{"grouping issue-30", "no mermaid dependency DAG", "issue-31, issue-32, issue-33, issue-34"}},
		{"a mermaid block that is no flowchart", nil, body("```mermaid\nsequenceDiagram\n#31->>#32: x\n#33->>issue-34: y\n```"), false,
			[]string{"no mermaid dependency DAG"}},
		{"a flowchart outside a mermaid fence", nil, body("```\nflowchart TB\n#31-->#32\n#33-->issue-34\n```"), false,
			[]string{"no mermaid dependency DAG"}},
		{"the nested epic's member missing", nil, body("```mermaid\nflowchart TB\n#31-->#32\n#31-->#33\n```"), false,
			[]string{"does not name its members issue-34", "grouping issue-30"}},
		{"a member named only in a comment", nil, body("```mermaid\nflowchart TB\n%% #34 later\n#31-->#32\n#31-->#33\n```"), false,
			[]string{"issue-34"}},
		{"the body could not be read", nil, map[ItemID]GroupingBody{"issue-30": {Err: "GitHub: read issue #30: 502"}}, false,
			[]string{"could not be read (GitHub: read issue #30: 502)", "grouping issue-30"}},
		{"the body was not read", nil, nil, false, []string{"was not read", "could not be read"}},
		// Transitively: what the informed grouping informs in turn.
		{"a grouping the informed grouping informs", []func(map[int]*Item){func(m map[int]*Item) {
			m[30].Links = append(m[30].Links, Link{Informs, "issue-40"})
			m[41] = &Item{ID: "issue-41", Tags: with(), Links: []Link{{PartOf, "issue-40"}}}
			m[40] = &Item{ID: "issue-40", Tags: with()}
		}}, body(fullDAG), false, []string{"grouping issue-40", "#40 was not read"}},
		// informs from the design-integration item itself.
		{"the item itself informs", []func(map[int]*Item){func(m map[int]*Item) {
			m[20].Links = nil
			m[23].Links = append(m[23].Links, Link{Informs, "issue-30"})
		}}, body("nothing"), false, []string{"grouping issue-30", "no mermaid"}},
		// Not a design-integration item: no DAG needed.
		{"an integration item whose grouping informs nothing", []func(map[int]*Item){func(m map[int]*Item) { m[20].Links = nil }}, nil, true, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			it, all := dagItems(tc.mods...)
			in := cpInput(it, merged)
			in.Items = all
			in.Claim.Branch = "feat/x"
			in.GroupingBodies = tc.bodies
			v := ProveCompletion(in)
			if v.Proven != tc.proven {
				t.Fatalf("proven %v, want %v: %+v", v.Proven, tc.proven, v)
			}
			if !tc.proven && v.Reason != CodeDAGMissing {
				t.Errorf("reason %s, want %s", v.Reason, CodeDAGMissing)
			}
			for _, s := range tc.subs {
				if !strings.Contains(v.Detail, s) {
					t.Errorf("detail %q lacks %q", v.Detail, s)
				}
			}
		})
	}
}

func TestDAGGroupings(t *testing.T) {
	it, all := dagItems()
	if got := DAGGroupings(it, all); !slices.Equal(got, []ItemID{"issue-30"}) {
		t.Errorf("DAGGroupings = %v, want [issue-30]", got)
	}
	// A plain member informs nothing: no bodies to read.
	if got := DAGGroupings(all[1], all); got != nil {
		t.Errorf("DAGGroupings of a member = %v, want none", got)
	}
	if got := GroupingMembers("issue-30", all); !slices.Equal(got, []ItemID{"issue-31", "issue-32", "issue-33", "issue-34"}) {
		t.Errorf("GroupingMembers = %v", got)
	}
}

func TestMermaidDAGNames(t *testing.T) {
	cases := []struct {
		name  string
		body  string
		found bool
		named []int
	}{
		{"none", "text", false, nil},
		{"flowchart", "```mermaid\nflowchart TB\n#3 --> issue-4\n```", true, []int{3, 4}},
		{"tilde fence, front matter, comments", "~~~ mermaid\n---\ntitle: x\n---\n%% a comment #9\ngraph TD;\nA[#5]-->B\n~~~", true, []int{5}},
		{"words and entities name nothing", "```mermaid\nflowchart TB\nx#3 --> tissue-4\nA[\"#35; 6\"] --> B[#07]\n```", true, nil},
		{"an unclosed block runs to the end", "```mermaid\nflowchart LR\n#8-->#9", true, []int{8, 9}},
		{"the richer of two blocks", "```mermaid\nflowchart TB\n#1\n```\n\n```mermaid\nflowchart TB\n#1-->#2\n```", true, []int{1, 2}},
		{"indented four spaces is code, not a fence", "    ```mermaid\n    flowchart TB\n    #1\n    ```", false, nil},
		{"a pie chart is no DAG", "```mermaid\npie\n\"#1\" : 3\n```", false, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			named, found := MermaidDAGNames(tc.body)
			if found != tc.found {
				t.Fatalf("found %v, want %v", found, tc.found)
			}
			var got []int
			for id := range named {
				got = append(got, id.Number())
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.named) {
				t.Errorf("named %v, want %v", got, tc.named)
			}
		})
	}
}
