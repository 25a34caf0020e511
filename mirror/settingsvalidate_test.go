package mirror

import (
	"github.com/wardenhq/warden/gating"
	"strings"
	"testing"
)

func TestValidateSettingsFile(t *testing.T) {
	cases := []struct {
		name string
		file string
		want []string // each problem's String(), in order
	}{
		{"a good file", fullFile, nil},
		{"an empty file", "", nil},
		{"the issue's two examples", "labels:\n  item: backlog\npoision_threshold: 2\nrequire_item: yes please\n", []string{
			"line 3: poision_threshold: unknown key, ignored; did you mean poison_threshold?",
			`line 4: require_item: "yes please" must be true or false; it keeps its last good value false`,
		}},
		{"a transposition", "dashbaord: true\n", []string{"line 1: dashbaord: unknown key, ignored; did you mean dashboard?"}},
		{"a misspelt key in a group", "labels:\n  item: a\n  admision: b\n", []string{
			"line 3: labels.admision: unknown key, ignored; did you mean labels.admission?"}},
		{"a misspelt group", "label:\n  item: a\n", []string{"line 1: label: unknown key, ignored; did you mean labels?"}},
		{"a key nothing is near", "\n\ncolour: blue\n", []string{"line 3: colour: unknown key, ignored"}},
		{"a hyphen for an underscore", "max-claims-per-owner: 2\n", []string{
			"line 1: max-claims-per-owner: unknown key, ignored; did you mean max_claims_per_owner?"}},
		{"a flat dotted key", "labels.item: x\n", []string{"line 1: labels.item: unknown key, ignored (write it nested: labels: {item: …})"}},
		{"a YAML 1.1 boolean", "dry_run: false\ncheck_run: no\n", []string{
			`line 2: check_run: "no" must be true or false; it keeps its last good value true; did you mean false?`}},
		{"a quoted boolean", "dashboard: 'false'\n", []string{
			`line 1: dashboard: "false" must be true or false; it keeps its last good value true; did you mean false?`}},
		{"a priority in lower case", "defaults:\n  phase: research\n  priority: p1\n", []string{
			`line 3: defaults.priority: "p1" must be one of P0, P1, P2, P3; it keeps its last good value "P2"; did you mean P1?`}},
		{"a phase nothing is near", "defaults: {phase: design}\n", []string{
			`line 1: defaults.phase: "design" must be one of research, implementation, integration; it keeps its last good value "implementation"`}},
		{"a value on the next line", "poison_threshold:\n  0\n", []string{
			`line 2: poison_threshold: "0" must be from 1 to 100; it keeps its last good value 3`}},
		{"a bad agent in a block list: its own line", "agents:\n  - ci-bot\n  - not a login\n", []string{
			`line 3: agents: a list has entry 2, "not a login", which is not a GitHub login; it keeps its last good value []`}},
		{"a label with spaces around it", "labels: {item: ' work '}\n", []string{
			`line 1: labels.item: " work " starts or ends with whitespace (GitHub trims label names); it keeps its last good value "backlog"; did you mean "work"?`}},
		{"a key given twice", "dry_run: true\n\ndry_run: false\n", []string{"line 3: dry_run: given twice; it keeps its last good value false"}},
		{"labels that clash", "labels:\n  item: work\n  parked: Work\n", []string{
			`line 2: labels.item: labels.item "work" and labels.parked "Work" name the same label (label names compare case-insensitively; the three labels must differ); the labels keep their last good values "backlog", "needs-specification" and "stale"`}},
		{"not YAML", "dry_run: true\nlabels: [\n", []string{"line 3: .github/backlog.yml cannot be read as YAML settings ("}},
		{"tabs", "labels:\n\titem: x\n", []string{"line 2: .github/backlog.yml cannot be read as YAML settings ("}},
		{"two documents", "dry_run: true\n---\ndry_run: false\n", []string{
			"line 2: .github/backlog.yml cannot be read as YAML settings (it holds more than one YAML document); every setting keeps its last good value"}},
		{"a list", "\n- dry_run: true\n", []string{"line 2: .github/backlog.yml must be a mapping of settings, not a list; every setting keeps its last good value"}},
		{"too large: no line", "# " + strings.Repeat("x", 64<<10) + "\n", []string{
			".github/backlog.yml is 65539 bytes, over the 65536 warden reads; every setting keeps its last good value"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := ValidateSettingsFile([]byte(c.file))
			if len(got) != len(c.want) {
				t.Fatalf("%d problems, want %d: %q", len(got), len(c.want), got)
			}
			for i, p := range got {
				s := p.String()
				if s != c.want[i] && !(strings.HasSuffix(c.want[i], "(") && strings.HasPrefix(s, c.want[i])) {
					t.Errorf("problem %d:\n got %s\nwant %s", i, s, c.want[i])
				}
				if p.Code != SettingsInvalid {
					t.Errorf("problem %d: code %q", i, p.Code)
				}
				if p.Key != "" && strings.Count(s, p.Key+":") > 1 {
					t.Errorf("problem %d stutters: %s", i, s)
				}
			}
		})
	}
}

// ValidateSettingsFile is the service's parse: the same problems as
// ParseSettingsFile against the defaults.
func TestValidateSettingsFileIsTheServicesParse(t *testing.T) {
	file := []byte("poision_threshold: 2\nrequire_item: yes please\nlabels: {item: x, parked: X}\n")
	_, want := (settingsFile{Content: file}).parse(gating.DefaultSettings())
	got := ValidateSettingsFile(file)
	if len(got) != len(want) || len(got) != 3 {
		t.Fatalf("got %v, want %v (3 problems)", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("problem %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestSettingsProblemString(t *testing.T) {
	cases := []struct {
		p    SettingsProblem
		want string
	}{
		{SettingsProblem{Line: 3, Key: "poision_threshold", Message: "unknown key", Suggestion: "poison_threshold"},
			"line 3: poision_threshold: unknown key; did you mean poison_threshold?"},
		{SettingsProblem{Key: "dry_run", Message: "x"}, "dry_run: x"},
		{SettingsProblem{Line: 1, Message: "not YAML"}, "line 1: not YAML"},
		{SettingsProblem{Message: "too large"}, "too large"},
	}
	for _, c := range cases {
		if got := c.p.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.p, got, c.want)
		}
	}
}

func TestEditDistance(t *testing.T) {
	cases := []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"abc", "", 3}, {"", "ab", 2}, {"poison", "poison", 0},
		{"poision", "poison", 1}, {"dashbaord", "dashboard", 1}, {"kitten", "sitting", 3},
		{"ca", "abc", 3}, // optimal string alignment, not full Damerau
		{"prioirty", "priority", 1}, {"réseau", "reseau", 1},
	}
	for _, c := range cases {
		if got := editDistance(c.a, c.b); got != c.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := editDistance(c.b, c.a); got != c.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d (symmetric)", c.b, c.a, got, c.want)
		}
	}
}

// A settings-changed-by-agent finding is made without the file; the lines
// are found afterwards.
func TestLocateProblems(t *testing.T) {
	file := []byte("# settings\ndry_run: true\nlabels:\n  item: work\n")
	cur := gating.DefaultSettings()
	proposed, probs := ParseSettingsFile(file, cur)
	_, findings := DecideSettingsChange(cur, proposed, probs, false)
	findings = locateProblems(file, findings)
	want := map[string]int{"labels.item": 4, "dry_run": 2}
	if len(findings) != 2 {
		t.Fatalf("%v", findings)
	}
	for _, f := range findings {
		if f.Code != SettingsChangedByAgent || f.Line != want[f.Key] {
			t.Errorf("%+v: want %s at line %d", f, SettingsChangedByAgent, want[f.Key])
		}
	}
}
