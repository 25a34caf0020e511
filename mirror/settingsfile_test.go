package mirror

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/wardenhq/warden/gating"
)

// customSettings is a last good value unlike the defaults in every field.
func customSettings() gating.Settings {
	return gating.Settings{ItemLabel: "todo", AdmissionLabel: "triage", ParkedLabel: "on-hold", PoisonThreshold: 5,
		Agents: []string{"robo-1"}, RulingOwner: "lead", DefaultPriority: "P1", DefaultPhase: "research",
		CheckRun: false, RequireItem: true, Dashboard: false, PostMarkers: true, DryRun: true, CloseOnComplete: true,
		AgentAssignees: []string{"helper"}, AgentLease: 45 * time.Minute}
}

func defaultsWith(f func(*gating.Settings)) gating.Settings {
	s := gating.DefaultSettings()
	f(&s)
	return s
}

// fullFile sets every field to a valid value unlike the defaults.
const fullFile = `labels:
  item: work
  admission: Needs Spec
  parked: parked
poison_threshold: 4
agents: [ci-bot, "renovate[bot]"]
ruling_owner: alice
defaults: { priority: P0, phase: integration }
check_run: false
require_item: true
dashboard: false
post_markers: true
dry_run: true
close_on_complete: false
agent_assignees: [helper-bot]
agent_lease: 90m
`

func fullSettings() gating.Settings {
	return gating.Settings{ItemLabel: "work", AdmissionLabel: "Needs Spec", ParkedLabel: "parked", PoisonThreshold: 4,
		Agents: []string{"ci-bot", "renovate[bot]"}, RulingOwner: "alice", DefaultPriority: "P0", DefaultPhase: "integration",
		CheckRun: false, RequireItem: true, Dashboard: false, PostMarkers: true, DryRun: true,
		AgentAssignees: []string{"helper-bot"}, AgentLease: 90 * time.Minute}
}

func TestParseSettingsFile(t *testing.T) {
	type problem struct{ field, detail string } // detail: a substring
	cases := []struct {
		name     string
		file     string
		lastGood gating.Settings
		want     gating.Settings
		problems []problem
	}{
		// Absent, empty, defaults.
		{"empty file", "", customSettings(), gating.DefaultSettings(), nil},
		{"only comments", "# nothing yet\n", customSettings(), gating.DefaultSettings(), nil},
		{"null document", "~\n", customSettings(), gating.DefaultSettings(), nil},
		{"empty mapping", "{}\n", customSettings(), gating.DefaultSettings(), nil},
		{"the contract's example", `labels:
  item: backlog                    # an issue with this label is a backlog item
  admission: needs-specification   # the admission gate
  parked: stale                    # the parking ladder's visible half
poison_threshold: 3
agents: []
ruling_owner: pm
defaults: { priority: P2, phase: implementation }
check_run: true
require_item: false
dashboard: true
post_markers: false
dry_run: false
`, customSettings(), defaultsWith(func(s *gating.Settings) { s.Agents = []string{} }), nil},
		{"every field set", fullFile, customSettings(), fullSettings(), nil},
		{"absent fields take the defaults, not the last good values", "dashboard: false\n", customSettings(),
			defaultsWith(func(s *gating.Settings) { s.Dashboard = false }), nil},
		{"null values take the defaults", "labels:\n  item:\npoison_threshold: ~\nagents:\ndefaults:\ncheck_run: null\n", customSettings(), gating.DefaultSettings(), nil},
		{"a byte-order mark", "\ufeffdry_run: true\n", gating.DefaultSettings(), defaultsWith(func(s *gating.Settings) { s.DryRun = true }), nil},
		{"YAML aliases", "defaults: &d {priority: P1, phase: research}\nruling_owner: &o bob\nagents: [*o]\n", gating.DefaultSettings(),
			defaultsWith(func(s *gating.Settings) {
				s.DefaultPriority, s.DefaultPhase, s.RulingOwner, s.Agents = "P1", "research", "bob", []string{"bob"}
			}), nil},

		// labels.*
		{"item label", "labels: {item: work-item}\n", gating.DefaultSettings(), defaultsWith(func(s *gating.Settings) { s.ItemLabel = "work-item" }), nil},
		{"admission label with spaces and emoji", "labels: {admission: \"🛑 needs spec\"}\n", gating.DefaultSettings(),
			defaultsWith(func(s *gating.Settings) { s.AdmissionLabel = "🛑 needs spec" }), nil},
		{"a numeric label", "labels: {parked: 2024}\n", gating.DefaultSettings(), defaultsWith(func(s *gating.Settings) { s.ParkedLabel = "2024" }), nil},
		{"50-character label", "labels: {item: " + strings.Repeat("é", 50) + "}\n", gating.DefaultSettings(),
			defaultsWith(func(s *gating.Settings) { s.ItemLabel = strings.Repeat("é", 50) }), nil},
		{"51-character label", "labels: {item: " + strings.Repeat("x", 51) + "}\n", customSettings(),
			defaultsWith(func(s *gating.Settings) { s.ItemLabel = "todo" }), []problem{{"labels.item", "is 51 characters"}}},
		{"empty label", "labels: {admission: ''}\n", customSettings(),
			defaultsWith(func(s *gating.Settings) { s.AdmissionLabel = "triage" }), []problem{{"labels.admission", "is empty"}}},
		{"label with a trailing space", "labels: {parked: 'stale '}\n", customSettings(),
			defaultsWith(func(s *gating.Settings) { s.ParkedLabel = "on-hold" }), []problem{{"labels.parked", "whitespace"}}},
		{"label with a control character", "labels: {item: \"a\\tb\"}\n", customSettings(),
			defaultsWith(func(s *gating.Settings) { s.ItemLabel = "todo" }), []problem{{"labels.item", "control"}}},
		{"boolean label", "labels: {item: true}\n", customSettings(),
			defaultsWith(func(s *gating.Settings) { s.ItemLabel = "todo" }), []problem{{"labels.item", "must be a string"}}},
		{"list label", "labels: {item: [a]}\n", customSettings(),
			defaultsWith(func(s *gating.Settings) { s.ItemLabel = "todo" }), []problem{{"labels.item", "a list must be a string"}}},
		{"labels not a mapping", "labels: backlog\ndry_run: true\n", customSettings(),
			defaultsWith(func(s *gating.Settings) {
				s.ItemLabel, s.AdmissionLabel, s.ParkedLabel, s.DryRun = "todo", "triage", "on-hold", true
			}), []problem{{"labels", "must be a mapping"}}},
		{"two labels the same", "labels: {item: work, admission: work}\n", customSettings(),
			defaultsWith(func(s *gating.Settings) { s.ItemLabel, s.AdmissionLabel, s.ParkedLabel = "todo", "triage", "on-hold" }),
			[]problem{{"labels.item", `labels.item "work" and labels.admission "work" name the same label`}}},
		{"labels the same but for case", "labels: {item: Work, parked: wORK}\n", customSettings(),
			defaultsWith(func(s *gating.Settings) { s.ItemLabel, s.AdmissionLabel, s.ParkedLabel = "todo", "triage", "on-hold" }),
			[]problem{{"labels.item", "case-insensitively"}}},
		{"a label equal to another's default", "labels: {item: Stale}\n", gating.DefaultSettings(), gating.DefaultSettings(),
			[]problem{{"labels.item", `labels.item "Stale" and labels.parked "stale"`}}},
		{"a failed label's last good value clashes with a new one", "labels: {item: triage, admission: ''}\n", customSettings(),
			defaultsWith(func(s *gating.Settings) { s.ItemLabel, s.AdmissionLabel, s.ParkedLabel = "todo", "triage", "on-hold" }),
			[]problem{{"labels.admission", "is empty"}, {"labels.item", "name the same label"}}},
		{"labels swapped are fine", "labels: {item: stale, parked: backlog}\n", gating.DefaultSettings(),
			defaultsWith(func(s *gating.Settings) { s.ItemLabel, s.ParkedLabel = "stale", "backlog" }), nil},

		// poison_threshold
		{"threshold 1", "poison_threshold: 1\n", gating.DefaultSettings(), defaultsWith(func(s *gating.Settings) { s.PoisonThreshold = 1 }), nil},
		{"threshold 100", "poison_threshold: 100\n", gating.DefaultSettings(), defaultsWith(func(s *gating.Settings) { s.PoisonThreshold = 100 }), nil},
		{"threshold 0", "poison_threshold: 0\n", customSettings(), defaultsWith(func(s *gating.Settings) { s.PoisonThreshold = 5 }),
			[]problem{{"poison_threshold", `"0" must be from 1 to 100; it keeps its last good value 5`}}},
		{"threshold negative", "poison_threshold: -3\n", customSettings(), defaultsWith(func(s *gating.Settings) { s.PoisonThreshold = 5 }),
			[]problem{{"poison_threshold", "from 1 to 100"}}},
		{"threshold 101", "poison_threshold: 101\n", customSettings(), defaultsWith(func(s *gating.Settings) { s.PoisonThreshold = 5 }),
			[]problem{{"poison_threshold", "from 1 to 100"}}},
		{"threshold huge", "poison_threshold: 99999999999999999999999\n", customSettings(), defaultsWith(func(s *gating.Settings) { s.PoisonThreshold = 5 }),
			[]problem{{"poison_threshold", "whole number"}}},
		{"threshold quoted", "poison_threshold: '3'\n", customSettings(), defaultsWith(func(s *gating.Settings) { s.PoisonThreshold = 5 }),
			[]problem{{"poison_threshold", "whole number"}}},
		{"threshold fractional", "poison_threshold: 2.5\n", customSettings(), defaultsWith(func(s *gating.Settings) { s.PoisonThreshold = 5 }),
			[]problem{{"poison_threshold", "whole number"}}},
		{"threshold words", "poison_threshold: three\n", customSettings(), defaultsWith(func(s *gating.Settings) { s.PoisonThreshold = 5 }),
			[]problem{{"poison_threshold", `"three"`}}},

		// agents
		{"agents", "agents:\n  - ci-bot\n  - dependabot[bot]\n  - A1\n", gating.DefaultSettings(),
			defaultsWith(func(s *gating.Settings) { s.Agents = []string{"ci-bot", "dependabot[bot]", "A1"} }), nil},
		{"agents deduplicated case-insensitively", "agents: [ci-bot, CI-Bot]\n", gating.DefaultSettings(),
			defaultsWith(func(s *gating.Settings) { s.Agents = []string{"ci-bot"} }), nil},
		{"agent with a space", "agents: [ok, 'b c']\n", customSettings(), defaultsWith(func(s *gating.Settings) { s.Agents = []string{"robo-1"} }),
			[]problem{{"agents", `entry 2, "b c", which is not a GitHub login; it keeps its last good value ["robo-1"]`}}},
		{"agent starting with a hyphen", "agents: [-x]\n", customSettings(), defaultsWith(func(s *gating.Settings) { s.Agents = []string{"robo-1"} }),
			[]problem{{"agents", "not a GitHub login"}}},
		{"agent login too long", "agents: [" + strings.Repeat("a", 40) + "]\n", customSettings(), defaultsWith(func(s *gating.Settings) { s.Agents = []string{"robo-1"} }),
			[]problem{{"agents", "not a GitHub login"}}},
		{"agent with a bad bot suffix", "agents: ['x[Bot]']\n", customSettings(), defaultsWith(func(s *gating.Settings) { s.Agents = []string{"robo-1"} }),
			[]problem{{"agents", "not a GitHub login"}}},
		{"agent entry a mapping", "agents: [{login: x}]\n", customSettings(), defaultsWith(func(s *gating.Settings) { s.Agents = []string{"robo-1"} }),
			[]problem{{"agents", "entry 1, a mapping"}}},
		{"agents a single login", "agents: ci-bot\n", customSettings(), defaultsWith(func(s *gating.Settings) { s.Agents = []string{"robo-1"} }),
			[]problem{{"agents", "must be a list of logins"}}},
		{"100 agents", "agents: [" + logins(100) + "]\n", gating.DefaultSettings(),
			defaultsWith(func(s *gating.Settings) { s.Agents = strings.Split(logins(100), ", ") }), nil},
		{"101 agents", "agents: [" + logins(101) + "]\n", customSettings(), defaultsWith(func(s *gating.Settings) { s.Agents = []string{"robo-1"} }),
			[]problem{{"agents", "has 101 entries, over the 100 allowed"}}},

		// ruling_owner
		{"ruling owner", "ruling_owner: product-lead\n", gating.DefaultSettings(), defaultsWith(func(s *gating.Settings) { s.RulingOwner = "product-lead" }), nil},
		{"ruling owner with a space", "ruling_owner: a b\n", customSettings(), defaultsWith(func(s *gating.Settings) { s.RulingOwner = "lead" }),
			[]problem{{"ruling_owner", `"a b" cannot be a ruling-owner: tag`}}},
		{"ruling owner empty", "ruling_owner: ''\n", customSettings(), defaultsWith(func(s *gating.Settings) { s.RulingOwner = "lead" }),
			[]problem{{"ruling_owner", "is empty"}}},
		{"ruling owner a list", "ruling_owner: [a]\n", customSettings(), defaultsWith(func(s *gating.Settings) { s.RulingOwner = "lead" }),
			[]problem{{"ruling_owner", "must be a string"}}},

		// defaults.*
		{"priority P3", "defaults: {priority: P3}\n", gating.DefaultSettings(), defaultsWith(func(s *gating.Settings) { s.DefaultPriority = "P3" }), nil},
		{"priority P4", "defaults: {priority: P4}\n", customSettings(), defaultsWith(func(s *gating.Settings) { s.DefaultPriority = "P1" }),
			[]problem{{"defaults.priority", `"P4" must be one of P0, P1, P2, P3; it keeps its last good value "P1"`}}},
		{"priority lowercase", "defaults: {priority: p1}\n", customSettings(), defaultsWith(func(s *gating.Settings) { s.DefaultPriority = "P1" }),
			[]problem{{"defaults.priority", "must be one of"}}},
		{"priority a number", "defaults: {priority: 1}\n", customSettings(), defaultsWith(func(s *gating.Settings) { s.DefaultPriority = "P1" }),
			[]problem{{"defaults.priority", "must be one of"}}},
		{"phase research", "defaults: {phase: research}\n", gating.DefaultSettings(), defaultsWith(func(s *gating.Settings) { s.DefaultPhase = "research" }), nil},
		{"phase unknown", "defaults: {phase: design}\n", customSettings(), defaultsWith(func(s *gating.Settings) { s.DefaultPhase = "research" }),
			[]problem{{"defaults.phase", "must be one of research, implementation, integration"}}},
		{"phase carrying state", "defaults: {phase: complete}\n", customSettings(), defaultsWith(func(s *gating.Settings) { s.DefaultPhase = "research" }),
			[]problem{{"defaults.phase", "must be one of"}}},
		{"defaults not a mapping", "defaults: P1\n", customSettings(), defaultsWith(func(s *gating.Settings) { s.DefaultPriority, s.DefaultPhase = "P1", "research" }),
			[]problem{{"defaults", "must be a mapping"}}},
		{"unknown key under defaults", "defaults: {priority: P0, region: eu}\n", gating.DefaultSettings(),
			defaultsWith(func(s *gating.Settings) { s.DefaultPriority = "P0" }), []problem{{"defaults.region", "unknown key, ignored"}}},

		// booleans
		{"booleans in capitals", "check_run: False\ndry_run: TRUE\n", gating.DefaultSettings(),
			defaultsWith(func(s *gating.Settings) { s.CheckRun, s.DryRun = false, true }), nil},
		{"check_run yes", "check_run: yes\n", customSettings(), defaultsWith(func(s *gating.Settings) { s.CheckRun = false }),
			[]problem{{"check_run", `"yes" must be true or false; it keeps its last good value false`}}},
		{"require_item 1", "require_item: 1\n", customSettings(), defaultsWith(func(s *gating.Settings) { s.RequireItem = true }),
			[]problem{{"require_item", "must be true or false"}}},
		{"dashboard quoted", "dashboard: 'true'\n", customSettings(), defaultsWith(func(s *gating.Settings) { s.Dashboard = false }),
			[]problem{{"dashboard", "must be true or false"}}},
		{"post_markers on", "post_markers: on\n", customSettings(), defaultsWith(func(s *gating.Settings) { s.PostMarkers = true }),
			[]problem{{"post_markers", "must be true or false"}}},
		{"dry_run a list", "dry_run: [true]\n", customSettings(), defaultsWith(func(s *gating.Settings) { s.DryRun = true }),
			[]problem{{"dry_run", "a list must be true or false"}}},

		// Unknown and repeated keys.
		{"unknown key", "colour: blue\ndry_run: true\n", gating.DefaultSettings(), defaultsWith(func(s *gating.Settings) { s.DryRun = true }),
			[]problem{{"colour", "colour: unknown key, ignored"}}},
		{"a hyphenated key", "poison-threshold: 2\n", gating.DefaultSettings(), gating.DefaultSettings(),
			[]problem{{"poison-threshold", "did you mean poison_threshold?"}}},
		{"a capitalised key", "Dry_Run: true\n", gating.DefaultSettings(), gating.DefaultSettings(), []problem{{"Dry_Run", "did you mean dry_run?"}}},
		{"a flat dotted key", "labels.item: x\n", gating.DefaultSettings(), gating.DefaultSettings(), []problem{{"labels.item", "write it nested"}}},
		{"unknown label key", "labels: {item: work, closed: done}\n", gating.DefaultSettings(),
			defaultsWith(func(s *gating.Settings) { s.ItemLabel = "work" }), []problem{{"labels.closed", "unknown key"}}},
		{"non-string key", "? [a, b]\n: 1\ndry_run: true\n", gating.DefaultSettings(), defaultsWith(func(s *gating.Settings) { s.DryRun = true }),
			[]problem{{"a list", "unknown key"}}},
		{"a merge key", "<<: {dry_run: true}\n", gating.DefaultSettings(), gating.DefaultSettings(), []problem{{"<<", "unknown key"}}},
		{"a key given twice", "poison_threshold: 2\npoison_threshold: 4\n", customSettings(), defaultsWith(func(s *gating.Settings) { s.PoisonThreshold = 5 }),
			[]problem{{"poison_threshold", "poison_threshold: given twice; it keeps its last good value 5"}}},
		{"a group given twice", "labels: {item: a}\nlabels: {item: b}\n", customSettings(),
			defaultsWith(func(s *gating.Settings) { s.ItemLabel, s.AdmissionLabel, s.ParkedLabel = "todo", "triage", "on-hold" }),
			[]problem{{"labels", "labels: given twice; its settings keep their last good values"}}},
		{"a nested key given twice", "labels: {item: a, item: b}\n", customSettings(), defaultsWith(func(s *gating.Settings) { s.ItemLabel = "todo" }),
			[]problem{{"labels.item", "given twice"}}},

		// Several problems at once: each field on its own.
		{"good and bad fields together", "poison_threshold: 0\ndashboard: true\nagents: [x y]\nruling_owner: carol\nmystery: 1\n", customSettings(),
			defaultsWith(func(s *gating.Settings) {
				s.PoisonThreshold, s.Dashboard, s.Agents, s.RulingOwner = 5, true, []string{"robo-1"}, "carol"
			}), []problem{{"poison_threshold", ""}, {"agents", ""}, {"mystery", ""}}},

		// The whole file fails: every field keeps its last good value.
		{"an unquoted bot login in a flow list", "agents: [renovate[bot]]\n", customSettings(), customSettings(),
			[]problem{{"", "cannot be read as YAML"}}},
		{"not YAML", "labels: [\n", customSettings(), customSettings(), []problem{{"", "cannot be read as YAML"}}},
		{"tabs for indentation", "labels:\n\titem: x\n", customSettings(), customSettings(), []problem{{"", "cannot be read as YAML"}}},
		{"a list", "- dry_run: true\n", customSettings(), customSettings(), []problem{{"", "must be a mapping of settings, not a list"}}},
		{"a string", "dry_run\n", customSettings(), customSettings(), []problem{{"", `not "dry_run"`}}},
		{"two documents", "dry_run: true\n---\ndry_run: false\n", customSettings(), customSettings(), []problem{{"", "more than one YAML document"}}},
		{"garbage after a document end", "dry_run: true\n...\n]]]\n", customSettings(), customSettings(), []problem{{"", "cannot be read"}}},
		{"over 64 KiB", "# " + strings.Repeat("x", 64<<10) + "\ndry_run: true\n", customSettings(), customSettings(),
			[]problem{{"", "over the 65536 warden reads"}}},
		{"no last good value: the defaults", "labels: [\n", gating.Settings{}, gating.DefaultSettings(), []problem{{"", "cannot be read"}}},
		{"a failing field with no last good value: the default", "poison_threshold: 0\nruling_owner: ''\n", gating.Settings{}, gating.DefaultSettings(),
			[]problem{{"poison_threshold", "last good value 3"}, {"ruling_owner", `last good value "pm"`}}},
	}
	for _, c := range cases {
		got, probs := ParseSettingsFile([]byte(c.file), c.lastGood)
		if !sameSettings(got, c.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, got, c.want)
		}
		if len(probs) != len(c.problems) {
			t.Errorf("%s: %d problems, want %d: %+v", c.name, len(probs), len(c.problems), probs)
			continue
		}
		for i, p := range probs {
			w := c.problems[i]
			if p.Code != SettingsInvalid || p.Key != w.field || !strings.Contains(p.String(), w.detail) {
				t.Errorf("%s: problem %d is %+v, want %s on %q saying %q", c.name, i, p, SettingsInvalid, w.field, w.detail)
			}
		}
	}
}

func logins(n int) string {
	l := make([]string, n)
	for i := range l {
		l[i] = fmt.Sprintf("agent-%d", i)
	}
	return strings.Join(l, ", ")
}

// sameSettings compares settings, an empty agents list equal to none.
func sameSettings(a, b gating.Settings) bool {
	if len(a.Agents) == 0 && len(b.Agents) == 0 {
		a.Agents, b.Agents = nil, nil
	}
	if len(a.AgentAssignees) == 0 && len(b.AgentAssignees) == 0 {
		a.AgentAssignees, b.AgentAssignees = nil, nil
	}
	return reflect.DeepEqual(a, b)
}

func TestParseSettingsFileKeepsLastGoodIntact(t *testing.T) {
	last := customSettings()
	got, _ := ParseSettingsFile([]byte("agents: [bad login]\n"), last)
	got.Agents[0] = "changed"
	if last.Agents[0] != "robo-1" {
		t.Fatalf("the result shares the last good agents list: %v", last.Agents)
	}
}

func TestParseSettingsFileDetailsAreBounded(t *testing.T) {
	long := strings.Repeat("x@#", 1000)
	_, probs := ParseSettingsFile([]byte("ruling_owner: "+long+" y\n"+long+": 1\n"), gating.DefaultSettings())
	if len(probs) != 2 {
		t.Fatalf("%+v", probs)
	}
	for _, p := range probs {
		if len(p.String()) > 400 || len(p.Key) > 200 {
			t.Errorf("detail of %d bytes, field of %d: %.100s…", len(p.String()), len(p.Key), p.String())
		}
	}
}

func TestDecideSettingsChange(t *testing.T) {
	current := gating.DefaultSettings()
	parse := func(file string) (gating.Settings, []SettingsProblem) {
		return ParseSettingsFile([]byte(file), current)
	}

	t.Run("a human's push takes effect", func(t *testing.T) {
		proposed, probs := parse(fullFile)
		got, findings := DecideSettingsChange(current, proposed, probs, true)
		if !sameSettings(got, fullSettings()) || len(findings) != 0 {
			t.Fatalf("%+v %+v", got, findings)
		}
	})
	t.Run("a human's push with problems: the valid fields take effect, the problems are reported", func(t *testing.T) {
		proposed, probs := parse("dashboard: true\npoison_threshold: 0\n")
		got, findings := DecideSettingsChange(current, proposed, probs, true)
		if !got.Dashboard || got.PoisonThreshold != 3 || len(findings) != 1 || findings[0].Code != SettingsInvalid {
			t.Fatalf("%+v %+v", got, findings)
		}
	})
	t.Run("an agent's push changes nothing and names every field it would have altered", func(t *testing.T) {
		proposed, probs := parse(fullFile)
		got, findings := DecideSettingsChange(current, proposed, probs, false)
		if !sameSettings(got, current) {
			t.Fatalf("settings changed: %+v", got)
		}
		want := []string{"labels.item", "labels.admission", "labels.parked", "poison_threshold", "agents", "ruling_owner",
			"defaults.priority", "defaults.phase", "check_run", "require_item", "dashboard", "post_markers", "dry_run", "close_on_complete",
			"agent_assignees", "agent_lease"}
		if len(findings) != len(want) {
			t.Fatalf("%d findings, want %d: %+v", len(findings), len(want), findings)
		}
		for i, f := range findings {
			if f.Code != SettingsChangedByAgent || f.Key != want[i] {
				t.Errorf("finding %d: %+v, want %s on %s", i, f, SettingsChangedByAgent, want[i])
			}
		}
		if d := findings[3].String(); !strings.Contains(d, "poison_threshold: a push not made by a human would change it from 3 to 4") {
			t.Errorf("detail %q", d)
		}
		if d := findings[4].String(); !strings.Contains(d, `from [] to ["ci-bot", "renovate[bot]"]`) {
			t.Errorf("detail %q", d)
		}
	})
	t.Run("an agent's push that only reorders agents or changes comments alters nothing", func(t *testing.T) {
		cur := defaultsWith(func(s *gating.Settings) { s.Agents = []string{"a", "b"} })
		proposed, probs := ParseSettingsFile([]byte("# reordered\nagents: [B, a]\n"), cur)
		got, findings := DecideSettingsChange(cur, proposed, probs, false)
		if !sameSettings(got, cur) || len(findings) != 0 {
			t.Fatalf("%+v %+v", got, findings)
		}
	})
	t.Run("an agent's push of a broken file: nothing changes, the file's problems are reported", func(t *testing.T) {
		proposed, probs := parse("labels: [\n")
		got, findings := DecideSettingsChange(current, proposed, probs, false)
		if !sameSettings(got, current) || len(findings) != 1 || findings[0].Code != SettingsInvalid {
			t.Fatalf("%+v %+v", got, findings)
		}
	})
	t.Run("an agent's push with a bad field: the change and the problem are both reported", func(t *testing.T) {
		proposed, probs := parse("dry_run: true\npoison_threshold: zero\n")
		got, findings := DecideSettingsChange(current, proposed, probs, false)
		if !sameSettings(got, current) || len(findings) != 2 ||
			findings[0].Code != SettingsChangedByAgent || findings[0].Key != "dry_run" ||
			findings[1].Code != SettingsInvalid || findings[1].Key != "poison_threshold" {
			t.Fatalf("%+v %+v", got, findings)
		}
	})
	t.Run("an agent removing the file would restore the defaults: refused", func(t *testing.T) {
		cur := customSettings()
		proposed, probs := ParseSettingsFile(nil, cur)
		got, findings := DecideSettingsChange(cur, proposed, probs, false)
		if !sameSettings(got, cur) || len(findings) != 15 {
			t.Fatalf("%+v %d findings", got, len(findings))
		}
	})
	t.Run("an agent's push that changes nothing", func(t *testing.T) {
		proposed, probs := parse("")
		got, findings := DecideSettingsChange(current, proposed, probs, false)
		if !sameSettings(got, current) || len(findings) != 0 {
			t.Fatalf("%+v %+v", got, findings)
		}
	})
	t.Run("the result does not share the agents list", func(t *testing.T) {
		cur := customSettings()
		got, _ := DecideSettingsChange(cur, cur, nil, false)
		got.Agents[0] = "x"
		got2, _ := DecideSettingsChange(cur, cur, nil, true)
		got2.Agents[0] = "y"
		if cur.Agents[0] != "robo-1" {
			t.Fatal("shared")
		}
	})
}

func TestDefaultSettingsAreTheContracts(t *testing.T) {
	want := gating.Settings{ItemLabel: "backlog", AdmissionLabel: "needs-specification", ParkedLabel: "stale", PoisonThreshold: 3,
		RulingOwner: "pm", DefaultPriority: "P2", DefaultPhase: "implementation", CheckRun: true, Dashboard: true, CloseOnComplete: true,
		AgentLease: 2 * time.Hour}
	if got := gating.DefaultSettings(); !sameSettings(got, want) {
		t.Fatalf("%+v", got)
	}
}
