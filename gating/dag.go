package gating

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The design-integration DAG rule (CONTRACT.md §11 dag-missing; the
// protocol's "The integration item": a design-integration item may not
// complete while the grouping it emitted lacks a mermaid dependency DAG,
// transitively).

// CodeDAGMissing is the refusal of state:complete on a design-integration
// item while a grouping it informs lacks, in its epic issue's body, a
// mermaid dependency DAG naming every member.
const CodeDAGMissing = "dag-missing"

// GroupingBody is the body of a grouping's epic issue as the caller read it
// for the DAG rule; Err, when not empty, says why it could not be read.
type GroupingBody struct {
	Body string
	Err  string
}

// DAGGroupings are the groupings whose epic issue bodies the completion of
// it must read, in id order; nil unless it is a design-integration item: an
// item that integrates a grouping where that grouping, or the item itself,
// informs another item. They are the informed items and, transitively,
// whatever those go on to inform (by their own informs edges or their
// integration items').
func DAGGroupings(it *Item, items []*Item) []ItemID {
	if it == nil {
		return nil
	}
	byID := make(map[ItemID]*Item, len(items)+1)
	for _, o := range items {
		if o != nil {
			byID[o.ID] = o
		}
	}
	byID[it.ID] = it
	integrated := it.Targets(Integrates)
	if len(integrated) == 0 {
		return nil
	}
	// informsOf is what a grouping emits: its own informs edges and its
	// integration items'.
	informsOf := func(g ItemID) []string {
		var out []string
		if x := byID[g]; x != nil {
			out = append(out, x.Targets(Informs)...)
		}
		for _, o := range items {
			if o != nil && o.ID != it.ID && slices.Contains(o.Targets(Integrates), string(g)) {
				out = append(out, o.Targets(Informs)...)
			}
		}
		return out
	}
	queue := append([]string(nil), it.Targets(Informs)...)
	for _, g := range integrated {
		queue = append(queue, informsOf(ItemID(g))...)
	}
	seen := map[ItemID]bool{}
	var out []ItemID
	for len(queue) > 0 {
		t := ItemID(queue[0])
		queue = queue[1:]
		if seen[t] || t == it.ID || slices.Contains(integrated, string(t)) {
			continue
		}
		seen[t] = true
		out = append(out, t)
		queue = append(queue, informsOf(t)...)
	}
	slices.SortFunc(out, compareIDs)
	return out
}

// GroupingMembers are the items partOf g, transitively (the members of a
// member that is itself a grouping too), in id order.
func GroupingMembers(g ItemID, items []*Item) []ItemID {
	seen := map[ItemID]bool{g: true}
	var out []ItemID
	queue := []ItemID{g}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, o := range items {
			if o == nil || seen[o.ID] || !slices.Contains(o.Targets(PartOf), string(cur)) {
				continue
			}
			seen[o.ID] = true
			out = append(out, o.ID)
			queue = append(queue, o.ID)
		}
	}
	slices.SortFunc(out, compareIDs)
	return out
}

// checkDAGs refuses (dag-missing) the completion of a design-integration
// item while a grouping it informs has no readable epic body, or no mermaid
// DAG in it naming every member; nil when every grouping has one.
func checkDAGs(in CompletionInput) *CompletionVerdict {
	it := in.Item
	all := append([]*Item{it}, in.Items...)
	for _, g := range DAGGroupings(it, all) {
		gb, read := in.GroupingBodies[g]
		switch {
		case !read:
			return &CompletionVerdict{Reason: CodeDAGMissing, Detail: fmt.Sprintf(
				"%s is a design-integration item that informs grouping %s, whose epic issue #%d was not read: the body could not be read, so its mermaid dependency DAG cannot be checked (refused until it can)", it.ID, g, g.Number())}
		case gb.Err != "":
			return &CompletionVerdict{Reason: CodeDAGMissing, Detail: fmt.Sprintf(
				"%s is a design-integration item that informs grouping %s, but the body of its epic issue #%d could not be read (%s): its mermaid dependency DAG cannot be checked (refused until it can)", it.ID, g, g.Number(), gb.Err)}
		}
		members := GroupingMembers(g, all)
		named, found := MermaidDAGNames(gb.Body)
		if !found {
			return &CompletionVerdict{Reason: CodeDAGMissing, Detail: fmt.Sprintf(
				"%s may not complete: grouping %s, which it informs, has no mermaid dependency DAG in its epic issue #%d's body (a ```mermaid block beginning graph or flowchart) naming its members %s",
				it.ID, g, g.Number(), orNone(members))}
		}
		var missing []ItemID
		for _, m := range members {
			if !named[m] {
				missing = append(missing, m)
			}
		}
		if len(missing) > 0 {
			return &CompletionVerdict{Reason: CodeDAGMissing, Detail: fmt.Sprintf(
				"%s may not complete: the mermaid dependency DAG of grouping %s (in epic issue #%d's body) does not name its members %s (name each as issue-N or #N; nested epics' members count)",
				it.ID, g, g.Number(), joinIDs(missing))}
		}
	}
	return nil
}

func orNone(ids []ItemID) string {
	if len(ids) == 0 {
		return "(none yet)"
	}
	return joinIDs(ids)
}

// MermaidDAGNames reads the mermaid dependency DAGs of a Markdown body:
// fenced blocks (``` or ~~~, at most three spaces in) whose info string is
// mermaid and whose first statement (after blank lines, %% comments and a
// --- front matter block) is graph or flowchart. named holds every item the
// block naming the most items names, as issue-N or #N outside %% comments;
// found is false when the body has no such block.
func MermaidDAGNames(body string) (named map[ItemID]bool, found bool) {
	lines := strings.Split(strings.ReplaceAll(body, "\r\n", "\n"), "\n")
	for k := 0; k < len(lines); k++ {
		fence, info, ok := fenceOpen(lines[k])
		if !ok {
			continue
		}
		var block []string
		k++
		for ; k < len(lines); k++ {
			if fenceCloses(lines[k], fence) {
				break
			}
			block = append(block, lines[k])
		}
		if !strings.EqualFold(info, "mermaid") || !flowchartBlock(block) {
			continue
		}
		names := map[ItemID]bool{}
		for _, l := range block {
			if strings.HasPrefix(strings.TrimSpace(l), "%%") {
				continue
			}
			for _, n := range itemNumbersIn(l) {
				names[IDFor(n)] = true
			}
		}
		if !found || len(names) > len(named) {
			named, found = names, true
		}
	}
	return named, found
}

// fenceOpen reads a fenced code block's opening line: its fence (``` or
// ~~~, three or more) and the first word of its info string.
func fenceOpen(line string) (fence, info string, ok bool) {
	t := strings.TrimLeft(line, " ")
	if len(line)-len(t) > 3 || len(t) < 3 || t[0] != '`' && t[0] != '~' {
		return "", "", false
	}
	n := 0
	for n < len(t) && t[n] == t[0] {
		n++
	}
	if n < 3 {
		return "", "", false
	}
	rest := strings.TrimSpace(t[n:])
	if t[0] == '`' && strings.Contains(rest, "`") {
		return "", "", false
	}
	if f := strings.Fields(rest); len(f) > 0 {
		info = f[0]
	}
	return t[:n], info, true
}

// fenceCloses reports whether line closes a block opened with fence.
func fenceCloses(line, fence string) bool {
	t := strings.TrimLeft(line, " ")
	if len(line)-len(t) > 3 {
		return false
	}
	t = strings.TrimRight(t, " \t")
	return len(t) >= len(fence) && strings.Trim(t, fence[:1]) == ""
}

// flowchartBlock reports whether a mermaid block is a flowchart (graph or
// flowchart), the diagram type a dependency DAG is drawn in.
func flowchartBlock(block []string) bool {
	front := false
	for k, l := range block {
		t := strings.TrimSpace(l)
		switch {
		case k == 0 && t == "---":
			front = true
			continue
		case front:
			if t == "---" {
				front = false
			}
			continue
		case t == "" || strings.HasPrefix(t, "%%"):
			continue
		}
		w := strings.Fields(t)[0]
		w = strings.TrimRight(w, ";")
		return w == "graph" || w == "flowchart"
	}
	return false
}

// itemNumbersIn returns the item numbers a line names as issue-N or #N (not
// inside a longer word, so x#3 and tissue-3 name nothing; #N; is an entity
// code).
func itemNumbersIn(s string) []int {
	var out []int
	for k := 0; k < len(s); k++ {
		var rest string
		switch {
		case s[k] == '#':
			rest = s[k+1:]
		case strings.HasPrefix(s[k:], "issue-"):
			rest = s[k+len("issue-"):]
		default:
			continue
		}
		if k > 0 && isWordByte(s[k-1]) {
			continue
		}
		d := 0
		for d < len(rest) && rest[d] >= '0' && rest[d] <= '9' {
			d++
		}
		if d == 0 || rest[0] == '0' || s[k] == '#' && d < len(rest) && rest[d] == ';' {
			continue // #35; is mermaid's entity code for #, no item
		}
		if n, err := strconv.Atoi(rest[:d]); err == nil {
			out = append(out, n)
		}
	}
	return out
}

func isWordByte(b byte) bool {
	return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z'
}
