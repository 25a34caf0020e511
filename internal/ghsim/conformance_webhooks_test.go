package ghsim

// The simulator's webhooks against GitHub's example payloads
// (@octokit/webhooks-examples): every example of an event warden subscribes
// to must decode with warden's routing decoder (webhooks.ParseMeta) and with
// go-github's (github.ParseWebHook) (TestConformanceWebhookExamples); and
// every delivery the simulator made during the package's tests must carry
// each field warden reads that GitHub's examples of that event and action
// carry (confCheckDeliveries, run by TestMain after the tests).

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/google/go-github/v66/github"
	"github.com/wardenhq/warden/internal/corpus"
	"github.com/wardenhq/warden/webhooks"
)

// confHookEvents are the events warden's App subscribes to (app.yml), plus
// the installation events every App receives.
var confHookEvents = []string{"issues", "issue_comment", "pull_request", "pull_request_review_comment", "check_suite", "check_run", "push",
	"installation", "installation_repositories", "label", "sub_issues"}

// confMustDeliver are the event/actions the simulator must have delivered
// during a full run of the package's tests under CI=true: warden's main
// paths run on them.
var confMustDeliver = []string{"issues.opened", "issues.labeled", "issues.unlabeled", "issue_comment.created",
	"issue_comment.edited", "pull_request.opened", "pull_request.closed", "push", "check_suite.requested",
	"issues.assigned", "issues.unassigned"}

// The JSON paths warden reads, per event ("a.b[].c": field c of every element
// of array a.b). CONTRACT.md §3-§8: routing (action, installation,
// repository, sender and its type, issue and PR numbers), items, their
// labels and their assignees (an agent assigned is a claim), the comment
// trail (ids, bodies, authors, times, the prior body of an edit), pull
// requests (branches, head SHA, merge state and merger), check
// suites and runs (head SHA, pull requests), pushes (ref, commits and the
// files they touch, pusher), installations (repositories served), and
// sub-issues (epics).
var (
	confCommonReads = []string{"action", "sender.login", "sender.id", "sender.type", "installation.id",
		"repository.id", "repository.name", "repository.full_name", "repository.owner.login",
		"repository.default_branch", "repository.private"}
	confIssueReads = []string{"issue.number", "issue.id", "issue.title", "issue.body", "issue.state",
		"issue.state_reason", "issue.user.login", "issue.user.id", "issue.user.type", "issue.labels[].name",
		"issue.pull_request", "issue.created_at", "issue.updated_at", "issue.closed_at"}
	confHookReads = map[string][]string{
		"issues": confJoin(confCommonReads, confIssueReads, []string{"label.name",
			"changes.title.from", "changes.body.from", "changes.new_issue.number", "changes.new_repository.full_name",
			"assignee.login", "assignee.type", "issue.assignees[].login"}),
		"issue_comment": confJoin(confCommonReads, confIssueReads, []string{"comment.id", "comment.body",
			"comment.user.login", "comment.user.id", "comment.user.type", "comment.created_at", "comment.updated_at",
			"changes.body.from"}),
		"pull_request": confJoin(confCommonReads, []string{"number", "pull_request.number", "pull_request.id",
			"pull_request.state", "pull_request.title", "pull_request.body", "pull_request.user.login",
			"pull_request.user.type", "pull_request.draft", "pull_request.head.ref", "pull_request.head.sha",
			"pull_request.head.repo.full_name", "pull_request.base.ref", "pull_request.base.sha",
			"pull_request.merged", "pull_request.merged_at", "pull_request.merged_by.login",
			"pull_request.merge_commit_sha", "pull_request.labels[].name", "label.name", "before", "after",
			"changes.body.from", "changes.title.from", "changes.base.ref.from",
			"assignee.login", "assignee.type", "pull_request.assignees[].login"}),
		"pull_request_review_comment": confJoin(confCommonReads, []string{"comment.id", "comment.user.login",
			"comment.created_at", "comment.updated_at", "pull_request.number", "pull_request.head.ref",
			"pull_request.head.repo.full_name", "pull_request.user.login"}),
		"check_suite": confJoin(confCommonReads, []string{"check_suite.id", "check_suite.head_sha",
			"check_suite.head_branch", "check_suite.status", "check_suite.conclusion", "check_suite.app.id",
			"check_suite.pull_requests[].number", "check_suite.pull_requests[].head.ref",
			"check_suite.pull_requests[].head.sha", "check_suite.pull_requests[].base.ref"}),
		"check_run": confJoin(confCommonReads, []string{"check_run.id", "check_run.name", "check_run.head_sha",
			"check_run.status", "check_run.conclusion", "check_run.external_id", "check_run.app.id",
			"check_run.check_suite.id", "check_run.check_suite.head_sha", "check_run.pull_requests[].number",
			"check_run.check_suite.pull_requests[].number"}),
		"push": confJoin(confCommonReads, []string{"ref", "before", "after", "created", "deleted", "forced",
			"base_ref", "commits[].id", "commits[].added", "commits[].removed", "commits[].modified",
			"head_commit", "head_commit.id", "pusher.name"}),
		"installation": {"action", "sender.login", "sender.type", "installation.id", "installation.account.login",
			"installation.account.type", "repositories[].id", "repositories[].full_name"},
		"installation_repositories": {"action", "sender.login", "sender.type", "installation.id",
			"installation.account.login", "repository_selection", "repositories_added[].id",
			"repositories_added[].full_name", "repositories_removed[].id", "repositories_removed[].full_name"},
		"label": confJoin(confCommonReads, []string{"label.id", "label.name", "label.color", "changes.name.from"}),
		"sub_issues": confJoin(confCommonReads, []string{"sub_issue_id", "sub_issue.id", "sub_issue.number",
			"parent_issue_id", "parent_issue.id", "parent_issue.number", "sub_issue_repo.full_name",
			"parent_issue_repo.full_name"}),
	}
)

// confConditional reports whether a path is present only in some situations
// of one event and action (the issue is a pull request; the edit changed the
// body): such a path is required only when every example of that
// event/action carries it. Any other path is required as soon as one
// example carries it (the examples are of different vintages, and many are
// from repository webhooks, which lack installation).
func confConditional(path string) bool {
	return path == "issue.pull_request" || strings.HasPrefix(path, "changes.")
}

// confEnvelope reports whether a path is part of every delivery's envelope
// (who, where, which installation): such a path is required for every
// action of an event as soon as one example of the event carries it, since
// an App's deliveries always have them (the examples of some actions come
// from repository webhooks, without installation).
func confEnvelope(path string) bool {
	for _, p := range []string{"action", "sender.", "installation.", "repository."} {
		if path == p || strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}

// confKnownDecodeQuirks are decoding failures of corpus examples that are
// the examples' fault, not warden's or the simulator's: they are reported,
// not failed. Each names the event and a fragment of the error.
var confKnownDecodeQuirks = []struct{ event, fragment, why string }{
	{"check_run", `parsing time "\"2018-04-25 20:42:10\""`,
		"the example's check_run.app.created_at/updated_at (and check_suite.app's) are not RFC 3339, as GitHub sends them; go-github v66 rejects them"},
}

func confKnownQuirk(event string, err error) string {
	for _, q := range confKnownDecodeQuirks {
		if q.event == event && strings.Contains(err.Error(), q.fragment) {
			return q.why
		}
	}
	return ""
}

func confJoin(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// Presence of a path in a payload.
const (
	confAbsent        = iota // a field on the way is missing (or of the wrong type)
	confPresent              // every value on the path is there (null counts)
	confIndeterminate        // an object on the way is null or an array empty: nothing to see
)

// confEval evaluates a path ("a.b[].c") in a decoded payload; it returns the
// presence and the JSON kinds of the values found.
func confEval(v any, path string) (int, map[string]bool) {
	kinds := map[string]bool{}
	st := confEvalSegs(v, strings.Split(path, "."), kinds)
	return st, kinds
}

func confEvalSegs(v any, segs []string, kinds map[string]bool) int {
	if len(segs) == 0 {
		kinds[confKind(v)] = true
		return confPresent
	}
	if v == nil {
		return confIndeterminate
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return confAbsent
	}
	name, isArray := strings.CutSuffix(segs[0], "[]")
	child, ok := obj[name]
	if !ok {
		return confAbsent
	}
	if !isArray {
		return confEvalSegs(child, segs[1:], kinds)
	}
	if child == nil {
		return confIndeterminate
	}
	arr, ok := child.([]any)
	if !ok {
		return confAbsent
	}
	st := confIndeterminate
	for _, el := range arr {
		switch confEvalSegs(el, segs[1:], kinds) {
		case confAbsent:
			return confAbsent
		case confPresent:
			st = confPresent
		}
	}
	return st
}

func confKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64, json.Number:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

func confHookKey(event, action string) string {
	if action == "" {
		return event
	}
	return event + "." + action
}

// confHookProfile is what GitHub's examples of one event/action carry.
type confHookProfile struct {
	event, action string
	examples      int
	required      []string // paths warden reads that a delivery must carry
	conditional   []string // paths some examples carry, not required
}

// confHookCorpus is the examples of the events warden subscribes to,
// decoded and profiled.
type confHookCorpus struct {
	profiles map[string]*confHookProfile // by event.action
	kinds    map[string]map[string]bool  // "event path" -> JSON kinds seen (null aside)
	common   map[string][]string         // event -> paths required by every action of it
	total    map[string]int              // examples per event
	meta     map[string]int              // decoded by webhooks.ParseMeta
	gogh     map[string]int              // decoded by github.ParseWebHook
	problems []string                    // decoding failures and inconsistencies
	quirks   []string                    // known decoding failures of the examples themselves
	absent   []string                    // subscribed events the corpus has no example of
}

var (
	confHookOnce sync.Once
	confHookVal  *confHookCorpus
	confHookErr  error
)

func confGoGitHubKnows(event string) bool {
	for _, t := range github.MessageTypes() {
		if t == event {
			return true
		}
	}
	return false
}

// confLoadHookCorpus decodes and profiles the examples (once per process).
func confLoadHookCorpus() (*confHookCorpus, error) {
	confHookOnce.Do(func() {
		all, err := corpus.WebhookExamples()
		if err != nil {
			confHookErr = err
			return
		}
		c := &confHookCorpus{profiles: map[string]*confHookProfile{}, kinds: map[string]map[string]bool{},
			common: map[string][]string{}, total: map[string]int{}, meta: map[string]int{}, gogh: map[string]int{}}
		for _, event := range confHookEvents {
			exs := all[event]
			if len(exs) == 0 {
				c.absent = append(c.absent, event)
				continue
			}
			type tally struct {
				n, determinable int
				present         map[string]int
			}
			byAction := map[string]*tally{}
			var actions []string
			eventHas := map[string]bool{} // paths some example of the event carries
			for i, raw := range exs {
				c.total[event]++
				where := fmt.Sprintf("%s example #%d", event, i)
				m, err := webhooks.ParseMeta(event, raw)
				if err != nil {
					c.problems = append(c.problems, fmt.Sprintf("%s: webhooks.ParseMeta: %v", where, err))
				} else {
					c.meta[event]++
				}
				if confGoGitHubKnows(event) {
					if _, err := github.ParseWebHook(event, raw); err != nil {
						if why := confKnownQuirk(event, err); why != "" {
							c.quirks = append(c.quirks, fmt.Sprintf("%s: github.ParseWebHook: %v (known corpus quirk: %s)", where, err, why))
						} else {
							c.problems = append(c.problems, fmt.Sprintf("%s: github.ParseWebHook: %v", where, err))
						}
					} else {
						c.gogh[event]++
					}
				}
				var v map[string]any
				if err := json.Unmarshal(raw, &v); err != nil {
					c.problems = append(c.problems, fmt.Sprintf("%s: not a JSON object: %v", where, err))
					continue
				}
				action, _ := v["action"].(string)
				where = fmt.Sprintf("%s example #%d", confHookKey(event, action), i)
				c.problems = append(c.problems, confMetaAgrees(where, m, v)...)
				t := byAction[action]
				if t == nil {
					t = &tally{present: map[string]int{}}
					byAction[action] = t
					actions = append(actions, action)
				}
				t.n++
				for _, p := range confHookReads[event] {
					st, kinds := confEval(v, p)
					switch st {
					case confPresent:
						t.present[p]++
						eventHas[p] = true
						k := event + " " + p
						if c.kinds[k] == nil {
							c.kinds[k] = map[string]bool{}
						}
						for kind := range kinds {
							if kind != "null" {
								c.kinds[k][kind] = true
							}
						}
					case confIndeterminate:
						t.present[p+"\x00indeterminate"]++
					}
				}
			}
			sort.Strings(actions)
			var common map[string]bool
			for _, action := range actions {
				t := byAction[action]
				pr := &confHookProfile{event: event, action: action, examples: t.n}
				req := map[string]bool{}
				for _, p := range confHookReads[event] {
					seen, indet := t.present[p], t.present[p+"\x00indeterminate"]
					switch {
					case seen == 0 && confEnvelope(p) && eventHas[p]:
						pr.required = append(pr.required, p)
						req[p] = true
					case seen == 0:
					case !confConditional(p) || seen+indet == t.n:
						pr.required = append(pr.required, p)
						req[p] = true
					default:
						pr.conditional = append(pr.conditional, p)
					}
				}
				c.profiles[confHookKey(event, action)] = pr
				if common == nil {
					common = req
				} else {
					for p := range common {
						if !req[p] {
							delete(common, p)
						}
					}
				}
			}
			for _, p := range confHookReads[event] {
				if common[p] {
					c.common[event] = append(c.common[event], p)
				}
			}
		}
		confHookVal = c
	})
	return confHookVal, confHookErr
}

// confMetaAgrees checks that warden's decoder read the routing fields the
// payload holds.
func confMetaAgrees(where string, m webhooks.Meta, v map[string]any) []string {
	var out []string
	str := func(path string) string {
		var cur any = v
		for _, s := range strings.Split(path, ".") {
			o, ok := cur.(map[string]any)
			if !ok {
				return ""
			}
			cur = o[s]
		}
		s, _ := cur.(string)
		return s
	}
	num := func(path string) int64 {
		var cur any = v
		for _, s := range strings.Split(path, ".") {
			o, ok := cur.(map[string]any)
			if !ok {
				return 0
			}
			cur = o[s]
		}
		f, _ := cur.(float64)
		return int64(f)
	}
	check := func(field, got, want string) {
		if got != want {
			out = append(out, fmt.Sprintf("%s: webhooks.ParseMeta read %s %q, the payload holds %q", where, field, got, want))
		}
	}
	check("Action", m.Action, str("action"))
	check("Sender", m.Sender, str("sender.login"))
	check("SenderType", m.SenderType, str("sender.type"))
	check("Repo", m.Repo, str("repository.full_name"))
	check("RepoID", fmt.Sprint(m.RepoID), fmt.Sprint(num("repository.id")))
	check("Installation", fmt.Sprint(m.Installation), fmt.Sprint(num("installation.id")))
	if n := num("issue.number"); n > 0 {
		check("Number", fmt.Sprint(m.Number), fmt.Sprint(n))
	} else if n := num("pull_request.number"); n > 0 {
		check("Number", fmt.Sprint(m.Number), fmt.Sprint(n))
	}
	return out
}

// TestConformanceWebhookPaths holds the path evaluation honest.
func TestConformanceWebhookPaths(t *testing.T) {
	var v any
	json.Unmarshal([]byte(`{"a":{"b":[{"c":1},{"c":"x"}],"e":[],"n":null},"h":null}`), &v)
	for _, c := range []struct {
		path  string
		state int
		kinds string
	}{
		{"a.b[].c", confPresent, "number string"},
		{"a.b[].d", confAbsent, ""},
		{"a.e[].c", confIndeterminate, ""},
		{"a.n", confPresent, "null"},
		{"a.n.x", confIndeterminate, ""},
		{"h", confPresent, "null"},
		{"x.y", confAbsent, ""},
		{"a.b.c", confAbsent, ""},
	} {
		st, kinds := confEval(v, c.path)
		if st != c.state || strings.Join(confSortedKeys(kinds), " ") != c.kinds && st == confPresent {
			t.Errorf("confEval(%s) = %d %v, want %d %s", c.path, st, kinds, c.state, c.kinds)
		}
	}
	if _, err := confLoadHookCorpus(); err != nil {
		confSkipIfMissing(t, err)
	}
	spec, err := confLoadSpec()
	confSkipIfMissing(t, err)
	// A delivery lacking what GitHub's examples carry fails, naming it.
	var buf strings.Builder
	bad := confDelivery{Delivered: Delivered{Event: "issues", Action: "opened",
		Payload: []byte(`{"action":"opened","issue":{"number":"7","title":"t"},"sender":{"login":"a","type":"User","id":1}}`)}}
	noExample := confDelivery{Delivered: Delivered{Event: "sub_issues", Action: "sub_issue_added",
		Payload: []byte(`{"action":"sub_issue_added","sub_issue":{"id":1,"number":2},"sender":{"login":"a","type":"User","id":1}}`)}}
	if !confCheckDeliveries(&buf, spec, []confDelivery{bad, noExample}, false) {
		t.Fatalf("a poor delivery passed:\n%s", buf.String())
	}
	for _, want := range []string{"issues.opened: missing issue.id", "issues.opened: missing repository.full_name",
		"issues.opened: missing installation.id", "issues.opened: issue.number is a string", "webhooks.ParseMeta",
		"sub_issues.sub_issue_added: missing parent_issue.number", "sub_issues.sub_issue_added: missing parent_issue_id"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("the summary lacks %q:\n%s", want, buf.String())
		}
	}
	if !confCheckDeliveries(io.Discard, spec, nil, true) {
		t.Error("no delivery at all passed under strict")
	}
}

// TestConformanceWebhookExamples decodes every example of the events warden
// subscribes to with warden's decoder and go-github's, and prints what each
// event/action carries of the fields warden reads.
func TestConformanceWebhookExamples(t *testing.T) {
	c, err := confLoadHookCorpus()
	confSkipIfMissing(t, err)
	for _, p := range c.problems {
		t.Error(p)
	}
	for _, q := range c.quirks {
		t.Log("NOTE " + q)
	}
	for _, e := range c.absent {
		t.Logf("%s: no example in @octokit/webhooks-examples", e)
	}
	total := 0
	for _, event := range confHookEvents {
		if c.total[event] == 0 {
			continue
		}
		total += c.total[event]
		gogh := fmt.Sprintf("%2d", c.gogh[event])
		if !confGoGitHubKnows(event) {
			gogh = "n/a (unknown to go-github v66)"
		}
		t.Logf("%-26s examples %2d, decoded by webhooks.ParseMeta %2d, by github.ParseWebHook %s", event, c.total[event], c.meta[event], gogh)
	}
	if total == 0 {
		t.Fatal("no example of any event warden subscribes to")
	}
	keys := make([]string, 0, len(c.profiles))
	for k := range c.profiles {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		p := c.profiles[k]
		t.Logf("%-40s %d example(s), carry %d of the %d paths warden reads: %s%s", k, p.examples, len(p.required),
			len(confHookReads[p.event]), strings.Join(p.required, " "), confIf(len(p.conditional) > 0, "; conditional: "+strings.Join(p.conditional, " ")))
	}
}

func confIf(b bool, s string) string {
	if b {
		return s
	}
	return ""
}

// confCheckDeliveries checks every delivery the simulator made during the
// tests against the examples' profiles, prints per event/action coverage and
// reports whether the package must fail.
func confCheckDeliveries(w io.Writer, spec *confSpec, deliveries []confDelivery, strict bool) (failed bool) {
	c, err := confLoadHookCorpus()
	if err != nil {
		fmt.Fprintf(w, "--- webhooks: %v\n", err)
		return confCI()
	}
	documented, docErr := confDocumentedReads(spec, c, deliveries)
	if docErr != nil {
		fmt.Fprintf(w, "--- webhooks: FAIL: read the description's webhook payloads: %v\n", docErr)
		failed = true
	}
	required := func(event, action string) []string {
		if p := c.profiles[confHookKey(event, action)]; p != nil {
			return p.required
		}
		if d, ok := documented[confHookKey(event, action)]; ok {
			return d
		}
		return c.common[event]
	}
	type group struct {
		key, event, action string
		n                  int
		missing            map[string]int // path -> deliveries missing it
		indeterminate      map[string]int
		wrongKind          map[string]string
		decode             []string
	}
	groups := map[string]*group{}
	for _, d := range deliveries {
		k := confHookKey(d.Event, d.Action)
		g := groups[k]
		if g == nil {
			g = &group{key: k, event: d.Event, action: d.Action, missing: map[string]int{}, indeterminate: map[string]int{}, wrongKind: map[string]string{}}
			groups[k] = g
		}
		g.n++
		if _, err := webhooks.ParseMeta(d.Event, d.Payload); err != nil {
			g.decode = append(g.decode, "webhooks.ParseMeta: "+err.Error())
		}
		if confGoGitHubKnows(d.Event) {
			if _, err := github.ParseWebHook(d.Event, d.Payload); err != nil {
				g.decode = append(g.decode, "github.ParseWebHook: "+err.Error())
			}
		}
		var v map[string]any
		if err := json.Unmarshal(d.Payload, &v); err != nil {
			g.decode = append(g.decode, "not a JSON object: "+err.Error())
			continue
		}
		if a, _ := v["action"].(string); a != d.Action {
			g.decode = append(g.decode, fmt.Sprintf("payload action %q, delivered as %q", a, d.Action))
		}
		for _, p := range required(d.Event, d.Action) {
			st, kinds := confEval(v, p)
			switch st {
			case confAbsent:
				g.missing[p]++
			case confIndeterminate:
				g.indeterminate[p]++
			case confPresent:
				want := c.kinds[d.Event+" "+p]
				for kind := range kinds {
					if kind != "null" && len(want) > 0 && !want[kind] {
						g.wrongKind[p] = fmt.Sprintf("%s, GitHub's examples have %s", kind, strings.Join(confSortedKeys(want), "/"))
					}
				}
			}
		}
	}

	fmt.Fprintf(w, "--- webhooks: %d deliveries recorded, %d event/actions\n", len(deliveries), len(groups))
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		g := groups[k]
		req := required(g.event, g.action)
		basis := "the examples of " + k
		switch {
		case c.profiles[k] != nil:
		case documented[k] != nil:
			basis = "no example of " + k + "; paths GitHub's description (x-webhooks " + spec.webhookSchema(g.event, g.action) + ") requires"
			if len(c.common[g.event]) > 0 {
				basis += " or every " + g.event + " example carries"
			}
		case len(c.common[g.event]) > 0:
			basis = "no example of " + k + "; paths every " + g.event + " example carries"
		default:
			basis = "no example of " + g.event + " and none documented; decoding only"
		}
		carried := len(req) - len(g.missing)
		fmt.Fprintf(w, "    %-40s %3d deliveries: carry %d/%d paths (%s)\n", k, g.n, carried, len(req), basis)
		for _, msg := range confDedupe(g.decode) {
			fmt.Fprintf(w, "      FAIL %s: %s\n", k, confTrunc(msg, 240))
			failed = true
		}
		for _, p := range confSortedKeys(g.missing) {
			fmt.Fprintf(w, "      FAIL %s: missing %s (in %d of %d deliveries)\n", k, p, g.missing[p], g.n)
			failed = true
		}
		for _, p := range confSortedKeys(g.wrongKind) {
			fmt.Fprintf(w, "      FAIL %s: %s is a %s\n", k, p, g.wrongKind[p])
			failed = true
		}
		var indet []string
		for _, p := range confSortedKeys(g.indeterminate) {
			if g.indeterminate[p] == g.n {
				indet = append(indet, p)
			}
		}
		if len(indet) > 0 {
			fmt.Fprintf(w, "      note: never seen (null object or empty array in every delivery): %s\n", strings.Join(indet, " "))
		}
	}
	var never []string
	for k := range c.profiles {
		if groups[k] == nil {
			never = append(never, k)
		}
	}
	sort.Strings(never)
	if len(never) > 0 {
		fmt.Fprintf(w, "    never delivered by the simulator (GitHub has examples): %s\n", strings.Join(never, " "))
	}
	for _, k := range confMustDeliver {
		if groups[k] != nil {
			continue
		}
		if strict {
			fmt.Fprintf(w, "--- FAIL (CI=true): the simulator never delivered %s during the tests\n", k)
			failed = true
		} else {
			fmt.Fprintf(w, "--- reported: the simulator never delivered %s during the tests (a failure under CI=true)\n", k)
		}
	}
	return failed
}

// confDocumentedReads gives, for each delivered event/action GitHub's
// examples do not cover (sub_issues, issues.closed), the paths warden reads
// that GitHub's description of the payload (x-webhooks) requires, plus the
// envelope paths it declares (an App's deliveries carry installation), plus
// the paths every example of the event carries.
func confDocumentedReads(spec *confSpec, c *confHookCorpus, deliveries []confDelivery) (map[string][]string, error) {
	want := map[string]string{} // event.action -> schema name
	var names []string
	for _, d := range deliveries {
		k := confHookKey(d.Event, d.Action)
		if _, done := want[k]; done || c.profiles[k] != nil || confHookReads[d.Event] == nil {
			continue
		}
		name := spec.webhookSchema(d.Event, d.Action)
		want[k] = name
		if name != "" {
			names = append(names, name)
		}
	}
	out := map[string][]string{}
	if len(names) == 0 {
		return out, nil
	}
	sort.Strings(names)
	doc, _, err := spec.kinDoc(nil, names)
	if err != nil {
		return out, err
	}
	for k, name := range want {
		if name == "" {
			continue
		}
		sr := doc.Components.Schemas[name]
		if sr == nil || sr.Value == nil {
			return out, fmt.Errorf("schema %s not loaded", name)
		}
		event, _, _ := strings.Cut(k, ".")
		common := map[string]bool{}
		for _, p := range c.common[event] {
			common[p] = true
		}
		var req []string
		for _, p := range confHookReads[event] {
			declared, required := confSchemaPath(sr.Value, strings.Split(p, "."))
			if required || (declared && confEnvelope(p)) || common[p] {
				req = append(req, p)
			}
		}
		out[k] = req
	}
	return out, nil
}

// confSchemaPath reports whether a schema declares a path ("a.b[].c"), and
// whether it requires every field on it (null objects aside).
func confSchemaPath(s *openapi3.Schema, segs []string) (declared, required bool) {
	if len(segs) == 0 {
		return true, true
	}
	if s == nil {
		return false, false
	}
	// A union: declared if a branch declares it, required if all require it.
	if branches := append(append(openapi3.SchemaRefs{}, s.AnyOf...), s.OneOf...); len(branches) > 0 && len(s.Properties) == 0 {
		required = true
		for _, b := range branches {
			d, r := confSchemaPath(b.Value, segs)
			declared = declared || d
			required = required && r
		}
		return declared, declared && required
	}
	name, isArray := strings.CutSuffix(segs[0], "[]")
	var prop *openapi3.SchemaRef
	req := false
	var visit func(x *openapi3.Schema, depth int)
	visit = func(x *openapi3.Schema, depth int) {
		if x == nil || depth > 8 {
			return
		}
		if slices.Contains(x.Required, name) {
			req = true
		}
		if p := x.Properties[name]; p != nil && prop == nil {
			prop = p
		}
		for _, a := range x.AllOf {
			visit(a.Value, depth+1)
		}
	}
	visit(s, 0)
	if prop == nil || prop.Value == nil {
		return false, false
	}
	next := prop.Value
	if isArray {
		if next.Items == nil {
			return false, false
		}
		next = next.Items.Value
	}
	d, r := confSchemaPath(next, segs[1:])
	return d, d && r && req
}

func confSortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
