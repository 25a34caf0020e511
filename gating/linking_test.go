package gating

import (
	"reflect"
	"strings"
	"testing"
)

const lnRepo = "wardenhq/warden"

// lnSnap holds items 12, 13 and 20; PR bodies reference them and others.
func lnSnap(extra ...Candidate) Snapshot {
	return snap(append([]Candidate{mk(12), mk(13), mk(20)}, extra...)...)
}

// lnFlat renders links as "issue-12: how; how" lines for comparison.
func lnFlat(ls []PRLink) []string {
	out := []string{}
	for _, l := range ls {
		out = append(out, string(l.Item)+": "+strings.Join(l.How, "; "))
	}
	return out
}

func TestPRLinksBody(t *testing.T) {
	cases := []struct {
		name string
		body string
		repo string // default lnRepo
		want []string
	}{
		// Linking forms.
		{"closes", "Closes #12", "", []string{"issue-12: closes #12"}},
		{"colon after keyword", "Closes: #12", "", []string{"issue-12: closes #12"}},
		{"colon and tab", "fixes:\t#12", "", []string{"issue-12: fixes #12"}},
		{"this repository, any case", "FIXES WardenHQ/Warden#12", "", []string{"issue-12: fixes wardenhq/warden#12"}},
		{"this repository with colon", "Resolves: wardenhq/warden#13", "", []string{"issue-13: resolves wardenhq/warden#13"}},
		{"part of, several spaces", "Part   of #12", "", []string{"issue-12: part of #12"}},
		{"refs with a tab", "refs\t#12", "", []string{"issue-12: refs #12"}},
		{"towards", "Work towards #20.", "", []string{"issue-20: towards #20"}},
		{"in parentheses", "(closes #12)", "", []string{"issue-12: closes #12"}},
		{"trailing punctuation", "closes #12, and refs #13.", "", []string{"issue-12: closes #12", "issue-13: refs #13"}},
		{"list item", "- Closes #12\n* refs #13", "", []string{"issue-12: closes #12", "issue-13: refs #13"}},
		{"heading", "## Fixes #12", "", []string{"issue-12: fixes #12"}},
		{"second line of a paragraph", "This change\ncloses #12", "", []string{"issue-12: closes #12"}},
		{"CRLF", "intro\r\ncloses #12\r\n", "", []string{"issue-12: closes #12"}},
		{"sorted by number", "closes #20 and closes #12", "", []string{"issue-12: closes #12", "issue-20: closes #20"}},
		{"repeated form once", "Closes #12. Really, closes #12", "", []string{"issue-12: closes #12"}},
		{"every form of one item", "refs #12, closes #12 (issue-12)", "", []string{"issue-12: refs #12; closes #12; issue-12 in the body"}},
		{"item id", "Implements issue-12.", "", []string{"issue-12: issue-12 in the body"}},
		{"item id after hash", "see #issue-13", "", []string{"issue-13: issue-13 in the body"}},
		{"item id at end", "issue-20", "", []string{"issue-20: issue-20 in the body"}},
		{"escaped backticks are literal", "\\`closes #12\\`", "", []string{"issue-12: closes #12"}},
		{"unmatched backtick runs are literal", "`` closes #12 `", "", []string{"issue-12: closes #12"}},
		{"text after a closed code span", "`x` closes #12", "", []string{"issue-12: closes #12"}},
		{"after a closed fence", "```\ncode\n```\ncloses #12", "", []string{"issue-12: closes #12"}},
		{"after a closed comment", "<!-- hidden -->\n\ncloses #12", "", []string{"issue-12: closes #12"}},
		{"after a quote and a blank line", "> quoted\n\ncloses #12", "", []string{"issue-12: closes #12"}},
		{"three-space indent is prose", "   closes #12", "", []string{"issue-12: closes #12"}},

		// Not links: code, quotes, comments.
		{"fenced code", "```\ncloses #12\n```", "", nil},
		{"tilde fence", "~~~md\ncloses #12\n~~~", "", nil},
		{"unclosed fence", "```\ncloses #12", "", nil},
		{"indented code", "    closes #12", "", nil},
		{"inline code", "see `closes #12` here", "", nil},
		{"double-backtick span", "``closes #12``", "", nil},
		{"code span across lines", "a `closes\n#12` b", "", nil},
		{"item id in code", "`issue-12`", "", nil},
		{"code element", "<code>closes #12</code>", "", nil},
		{"CODE element with attribute", "<CODE class=x>closes #12</CODE>", "", nil},
		{"kbd element", "<kbd>issue-12</kbd>", "", nil},
		{"block quote", "> closes #12", "", nil},
		{"lazy quote continuation", "> quoted\ncloses #12", "", nil},
		{"inline HTML comment", "ok <!-- closes #12 --> ok", "", nil},
		{"HTML comment over lines", "<!--\ncloses #12\n-->", "", nil},
		{"unclosed HTML comment", "text <!-- closes #12", "", nil},
		{"pre block", "<pre>\ncloses #12\n</pre>", "", nil},
		{"title is never read (body empty)", "", "", nil},

		// Not links: other repositories and numbers that are no item.
		{"another repository", "closes other/repo#12", "", nil},
		{"a repository whose name extends this one", "closes wardenhq/warden-evil#12", "", nil},
		{"owner and repo without a slash", "closes wardenhqwarden#12", "", nil},
		{"no such item", "closes #99", "", nil},
		{"number 0", "closes #0", "", nil},
		{"leading zero", "closes #012", "", nil},
		{"eleven digits", "closes #12345678901", "", nil},
		{"letters after the number", "closes #12abc", "", nil},
		{"underscore after the number", "closes #12_", "", nil},
		{"a letter of another script after the number", "closes #12é", "", nil},
		{"a combining mark after the number", "closes #12\u0301", "", nil},
		{"no space", "closes#12", "", nil},
		{"space before the colon", "closes : #12", "", nil},
		{"a newline between keyword and reference", "closes\n#12", "", nil},
		{"keyword inside a word", "encloses #12, prefixes #13, unfixed #20", "", nil},
		{"keyword prefix of a word", "closest #12, fixing #13", "", nil},
		{"no keyword", "see #12", "", nil},
		{"escaped hash", "closes \\#12", "", nil},
		{"keyword then a link", "closes [#12](http://x)", "", nil},

		// Not links: the item id inside a longer name.
		{"id inside a word", "xissue-12", "", nil},
		{"id in a branch name", "fix-issue-12 and feat/issue-13", "", nil},
		{"id as a file name", "issue-12.md", "", nil},
		{"id with a suffix", "issue-12-fix, issue-13a, issue-20_x", "", nil},
		{"id capitalised", "Issue-12", "", nil},
		{"id with a leading zero", "issue-012", "", nil},
		{"id as a mention", "@issue-12", "", nil},

		// Not links: look-alikes.
		{"Cyrillic es", "\u0441loses #12", "", nil},
		{"long s (Unicode folds it to s)", "clo\u017fes #12", "", nil},
		{"fullwidth keyword", "\uff43\uff4c\uff4f\uff53\uff45\uff53 #12", "", nil},
		{"fullwidth number sign", "closes \uff0312", "", nil},
		{"fullwidth digits", "closes #\uff11\uff12", "", nil},
		{"Arabic-Indic digits", "closes #\u0661\u0662", "", nil},
		{"no-break space", "closes\u00a0#12", "", nil},
		{"zero-width space in the keyword", "clo\u200bses #12", "", nil},
		{"zero-width space before the number sign", "closes \u200b#12", "", nil},
		{"Kelvin sign in the repository (Unicode folds it to k)", "closes \u212aube/kit#12", "kube/kit", nil},
		{"Cyrillic id", "\u0456ssue-12", "", nil},
		{"invalid UTF-8 before the keyword", "\xffcloses #12", "", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			repo := tc.repo
			if repo == "" {
				repo = lnRepo
			}
			got := lnFlat(PRLinks(PullRequest{Number: 7, Body: tc.body, Title: "Closes #13"}, repo, lnSnap()))
			want := tc.want
			if want == nil {
				want = []string{}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("PRLinks(%q)\n got %q\nwant %q", tc.body, got, want)
			}
		})
	}
}

func TestPRLinksKeywords(t *testing.T) {
	for _, kw := range []string{"close", "closes", "closed", "fix", "fixes", "fixed", "resolve", "resolves", "resolved", "refs", "part of", "towards"} {
		for _, form := range []string{kw, strings.ToUpper(kw), strings.ToUpper(kw[:1]) + kw[1:]} {
			body := form + " #12"
			got := lnFlat(PRLinks(PullRequest{Number: 7, Body: body}, lnRepo, lnSnap()))
			if want := []string{"issue-12: " + kw + " #12"}; !reflect.DeepEqual(got, want) {
				t.Errorf("%q: got %q, want %q", body, got, want)
			}
		}
	}
	// Words that are no keyword.
	for _, w := range []string{"closing", "fixing", "resolving", "ref", "reference", "part", "toward", "see", "addresses"} {
		if got := PRLinks(PullRequest{Number: 7, Body: w + " #12"}, lnRepo, lnSnap()); len(got) != 0 {
			t.Errorf("%q links %v", w, got)
		}
	}
}

func TestPRLinksTagsAndBranches(t *testing.T) {
	withBranch := func(branch string, state opt) opt {
		return func(c *Candidate) { state(c); c.Claim.Branch = branch }
	}
	s := snap(
		mk(12, tg("pr:7")),
		mk(13, tg("pr:70"), withBranch("feat/held", held("w/1"))),
		mk(14, withBranch("feat/lapsed", lapsed("w/2"))),
		mk(15, withBranch("feat/released", released("w/3"))),
		mk(16, withBranch("feat/abandoned", abandoned("w/4"))),
		mk(17, tg("pr:07")),
	)
	cases := []struct {
		name string
		pr   PullRequest
		want []string
	}{
		{"pr tag", PullRequest{Number: 7}, []string{"issue-12: pr:7 tag"}},
		{"pr tag of another number", PullRequest{Number: 8}, []string{}},
		{"held claim's branch", PullRequest{Number: 8, HeadRef: "feat/held"}, []string{"issue-13: claim branch feat/held"}},
		{"lapsed claim's branch", PullRequest{Number: 8, HeadRef: "feat/lapsed"}, []string{"issue-14: claim branch feat/lapsed"}},
		{"released claim's branch", PullRequest{Number: 8, HeadRef: "feat/released"}, []string{}},
		{"abandoned claim's branch", PullRequest{Number: 8, HeadRef: "feat/abandoned"}, []string{}},
		{"branch case differs", PullRequest{Number: 8, HeadRef: "Feat/Held"}, []string{}},
		{"fork with the same branch name", PullRequest{Number: 8, HeadRef: "feat/held", HeadRepoFullName: "mallory/warden"}, []string{}},
		{"this repository named in another case", PullRequest{Number: 8, HeadRef: "feat/held", HeadRepoFullName: "WardenHQ/Warden"}, []string{"issue-13: claim branch feat/held"}},
		{"every way, in order", PullRequest{Number: 7, HeadRef: "feat/held", Body: "issue-12 refs #12\nrefs #13"},
			[]string{"issue-12: issue-12 in the body; refs #12; pr:7 tag", "issue-13: refs #13; claim branch feat/held"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := lnFlat(PRLinks(tc.pr, lnRepo, s)); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestPRLinksHostileBody(t *testing.T) {
	// 64 KiB of unmatched backtick runs of every length, unclosed comments in
	// other paragraphs, look-alikes and near misses, with one real link at
	// the end: the scan stays linear and finds only that link.
	var b strings.Builder
	for n := 1; b.Len() < 60000; n++ {
		b.WriteString(strings.Repeat("`", n%300+1))
		b.WriteString(" closes #1\u200b2 issue-12x ")
	}
	b.WriteString("\n\n<code>closes #13\n\nrefs #20")
	body := b.String()
	if len(body) > 65536 {
		t.Fatalf("body is %d bytes", len(body))
	}
	got := lnFlat(PRLinks(PullRequest{Number: 7, Body: body}, lnRepo, lnSnap()))
	if want := []string{"issue-20: refs #20"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestAsciiEqualFold(t *testing.T) {
	cases := []struct {
		a, b string
		want bool
	}{
		{"Owner/Repo", "owner/repo", true},
		{"owner/repo", "owner/repo", true},
		{"owner/repo", "owner/rep", false},
		{"\u212a", "k", false}, // strings.EqualFold says true
		{"@", "`", false},
		{"[", "{", false},
	}
	for _, tc := range cases {
		if got := asciiEqualFold(tc.a, tc.b); got != tc.want {
			t.Errorf("asciiEqualFold(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}
