package mirror

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v4"

	"github.com/wardenhq/warden/gating"
)

// SettingsPath is where a repository keeps its settings, on its default
// branch (CONTRACT.md §2).
const SettingsPath = ".github/backlog.yml"

// Limits of the settings file.
const (
	MaxSettingsFileSize = 64 << 10 // bytes; a larger file is not read
	MaxSettingsAgents   = 100      // logins in agents:
	MaxLabelLength      = 50       // characters in a label name (GitHub's limit)
	MaxPoisonThreshold  = 100      // a larger poison_threshold is no threshold at all
)

// The settings findings' codes (CONTRACT.md §6, repository findings).
const (
	SettingsInvalid        = "settings-invalid"
	SettingsChangedByAgent = "settings-changed-by-agent"
)

// SettingsProblem is a repository finding about its settings file.
type SettingsProblem struct {
	Code   string // SettingsInvalid or SettingsChangedByAgent
	Field  string // the setting's dotted key (labels.item, poison_threshold, an unknown key); empty for the whole file
	Detail string // what is wrong, the value, and what stays in effect
}

// ParseSettingsFile reads a `.github/backlog.yml` (data; nil or empty, or a
// file of only comments, means the defaults) against the settings last in
// effect (lastGood; DefaultSettings when there were none). It returns the
// settings the file asks for and what is wrong with it, each a
// settings-invalid problem:
//
//   - a file over 64 KiB, or one that is not YAML, holds more than one
//     document or is not a mapping: every field keeps its lastGood value;
//   - a key it does not know: reported, and ignored (the others count);
//   - a field whose value is invalid, or whose key is given twice: that
//     field keeps its lastGood value, the others take effect;
//   - labels that name the same label (case-insensitively): the three
//     labels keep their lastGood values together;
//   - a field the file leaves out, or sets to null: the default.
//
// Whether the result takes effect is DecideSettingsChange's to say.
func ParseSettingsFile(data []byte, lastGood gating.Settings) (gating.Settings, []SettingsProblem) {
	lastGood = withDefaults(lastGood)
	if len(data) > MaxSettingsFileSize {
		return lastGood, []SettingsProblem{{SettingsInvalid, "", fmt.Sprintf("%s is %d bytes, over the %d warden reads; every setting keeps its last good value", SettingsPath, len(data), MaxSettingsFileSize)}}
	}
	root, err := loadOneDocument(data)
	if err != nil {
		return lastGood, []SettingsProblem{{SettingsInvalid, "", fmt.Sprintf("%s cannot be read as YAML settings (%s); every setting keeps its last good value", SettingsPath, oneLine(err.Error()))}}
	}
	if root == nil || isNull(root) {
		return gating.DefaultSettings(), nil
	}
	if root.Kind != yaml.MappingNode {
		return lastGood, []SettingsProblem{{SettingsInvalid, "", fmt.Sprintf("%s must be a mapping of settings, not %s; every setting keeps its last good value", SettingsPath, describe(root))}}
	}
	p := settingsParser{out: gating.DefaultSettings(), last: lastGood}
	p.mapping(root, "")
	p.checkLabels()
	return p.out, p.problems
}

// loadOneDocument parses data as exactly one YAML document; nil for none.
func loadOneDocument(data []byte) (*yaml.Node, error) {
	l, err := yaml.NewLoader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := l.Load(&doc); err == io.EOF {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	var more yaml.Node
	if err := l.Load(&more); err != io.EOF {
		return nil, errors.New("it holds more than one YAML document")
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, nil
	}
	return yamlDeref(doc.Content[0]), nil
}

// settingField is one leaf setting: how to read it into the settings, and
// how to put back its last good value.
type settingField struct {
	set  func(s *gating.Settings, n *yaml.Node) error
	keep func(s *gating.Settings, last gating.Settings)
}

// settingGroups are the keys that hold a mapping of settings.
var settingGroups = []string{"labels", "defaults"}

// settingFields are the leaf settings by dotted key.
var settingFields = map[string]settingField{
	"labels.item":       stringField(func(s *gating.Settings) *string { return &s.ItemLabel }, labelValue),
	"labels.admission":  stringField(func(s *gating.Settings) *string { return &s.AdmissionLabel }, labelValue),
	"labels.parked":     stringField(func(s *gating.Settings) *string { return &s.ParkedLabel }, labelValue),
	"ruling_owner":      stringField(func(s *gating.Settings) *string { return &s.RulingOwner }, rulingOwnerValue),
	"defaults.priority": stringField(func(s *gating.Settings) *string { return &s.DefaultPriority }, choice("P0", "P1", "P2", "P3")),
	"defaults.phase":    stringField(func(s *gating.Settings) *string { return &s.DefaultPhase }, choice(gating.Phases...)),
	"poison_threshold": {
		set:  func(s *gating.Settings, n *yaml.Node) (err error) { s.PoisonThreshold, err = thresholdValue(n); return },
		keep: func(s *gating.Settings, l gating.Settings) { s.PoisonThreshold = l.PoisonThreshold },
	},
	"agents": {
		set:  func(s *gating.Settings, n *yaml.Node) (err error) { s.Agents, err = agentsValue(n); return },
		keep: func(s *gating.Settings, l gating.Settings) { s.Agents = slices.Clone(l.Agents) },
	},
	"check_run":    boolField(func(s *gating.Settings) *bool { return &s.CheckRun }),
	"require_item": boolField(func(s *gating.Settings) *bool { return &s.RequireItem }),
	"dashboard":    boolField(func(s *gating.Settings) *bool { return &s.Dashboard }),
	"post_markers": boolField(func(s *gating.Settings) *bool { return &s.PostMarkers }),
	"dry_run":      boolField(func(s *gating.Settings) *bool { return &s.DryRun }),
	"max_claims_per_owner": {
		set: func(s *gating.Settings, n *yaml.Node) (err error) {
			s.MaxClaimsPerOwner, err = claimCapValue(n)
			return
		},
		keep: func(s *gating.Settings, l gating.Settings) { s.MaxClaimsPerOwner = l.MaxClaimsPerOwner },
	},
}

func stringField(f func(s *gating.Settings) *string, read func(*yaml.Node) (string, error)) settingField {
	return settingField{
		set: func(s *gating.Settings, n *yaml.Node) (err error) {
			v, err := read(n)
			if err == nil {
				*f(s) = v
			}
			return err
		},
		keep: func(s *gating.Settings, l gating.Settings) { *f(s) = *f(&l) },
	}
}

func boolField(f func(s *gating.Settings) *bool) settingField {
	return settingField{
		set: func(s *gating.Settings, n *yaml.Node) error {
			if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
				return fmt.Errorf("must be true or false")
			}
			return n.Decode(f(s))
		},
		keep: func(s *gating.Settings, l gating.Settings) { *f(s) = *f(&l) },
	}
}

// settingsParser walks the file's mapping.
type settingsParser struct {
	out, last gating.Settings
	problems  []SettingsProblem
	explicit  map[string]bool // labels the file set
}

func (p *settingsParser) problem(field, format string, a ...any) {
	p.problems = append(p.problems, SettingsProblem{SettingsInvalid, field, fmt.Sprintf(format, a...)})
}

// keepAll puts back the last good value of every field under prefix.
func (p *settingsParser) keepAll(prefix string) {
	for _, k := range sortedKeys(settingFields) {
		if k == prefix || strings.HasPrefix(k, prefix+".") {
			settingFields[k].keep(&p.out, p.last)
		}
	}
}

// mapping reads a mapping of settings under prefix ("" for the file).
func (p *settingsParser) mapping(m *yaml.Node, prefix string) {
	seen := map[string]bool{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		keyNode, val := yamlDeref(m.Content[i]), yamlDeref(m.Content[i+1])
		name := keyNode.Value
		if keyNode.Kind != yaml.ScalarNode {
			name = describe(keyNode)
		}
		key := name
		if prefix != "" {
			key = prefix + "." + name
		}
		_, leaf := settingFields[key]
		leaf = leaf && !strings.Contains(name, ".")
		group := prefix == "" && slices.Contains(settingGroups, name)
		if keyNode.Kind != yaml.ScalarNode || keyNode.Tag == "!!merge" || (!leaf && !group) {
			field := key
			if c := cut(key, 60); c != key {
				field = c + "…"
			}
			p.problem(field, "unknown setting %s; it is ignored%s", quote(key), suggest(key))
			continue
		}
		if seen[name] {
			p.keepAll(key)
			p.problem(key, "%s is given twice; it keeps its last good value%s", key, lastValue(key, p.last))
			continue
		}
		seen[name] = true
		if isNull(val) {
			continue // the default
		}
		if group {
			if val.Kind != yaml.MappingNode {
				p.keepAll(key)
				p.problem(key, "%s must be a mapping, not %s; its settings keep their last good values", key, describe(val))
				continue
			}
			p.mapping(val, key)
			continue
		}
		if err := settingFields[key].set(&p.out, val); err != nil {
			settingFields[key].keep(&p.out, p.last)
			p.problem(key, "%s: %s %s; it keeps its last good value%s", key, describe(val), err, lastValue(key, p.last))
			continue
		}
		if strings.HasPrefix(key, "labels.") {
			if p.explicit == nil {
				p.explicit = map[string]bool{}
			}
			p.explicit[key] = true
		}
	}
}

// checkLabels refuses labels that name the same label: when any two of the
// three do, all three keep their last good values (or, if those collide
// too, the defaults).
func (p *settingsParser) checkLabels() {
	names := labelNames(p.out)
	var clashes []string
	for i := 0; i < len(names); i++ {
		for j := i + 1; j < len(names); j++ {
			if strings.EqualFold(names[i][1], names[j][1]) {
				clashes = append(clashes, fmt.Sprintf("%s %s and %s %s name the same label", names[i][0], quote(names[i][1]), names[j][0], quote(names[j][1])))
			}
		}
	}
	if len(clashes) == 0 {
		return
	}
	field := "labels"
	for _, n := range names {
		if p.explicit[n[0]] {
			field = n[0]
			break
		}
	}
	fallback := p.last
	if labelsClash(fallback) {
		fallback = gating.DefaultSettings()
	}
	p.out.ItemLabel, p.out.AdmissionLabel, p.out.ParkedLabel = fallback.ItemLabel, fallback.AdmissionLabel, fallback.ParkedLabel
	p.problem(field, "%s (label names compare case-insensitively; the three labels must differ); the labels keep their last good values %s, %s and %s",
		strings.Join(clashes, "; "), quote(fallback.ItemLabel), quote(fallback.AdmissionLabel), quote(fallback.ParkedLabel))
}

func labelNames(s gating.Settings) [][2]string {
	return [][2]string{{"labels.item", s.ItemLabel}, {"labels.admission", s.AdmissionLabel}, {"labels.parked", s.ParkedLabel}}
}

func labelsClash(s gating.Settings) bool {
	return strings.EqualFold(s.ItemLabel, s.AdmissionLabel) || strings.EqualFold(s.ItemLabel, s.ParkedLabel) ||
		strings.EqualFold(s.AdmissionLabel, s.ParkedLabel)
}

// withDefaults fills the fields of lastGood that no valid file leaves
// empty from the defaults; a lastGood with no labels at all (the zero
// value: the caller had none) is the defaults.
func withDefaults(s gating.Settings) gating.Settings {
	def := gating.DefaultSettings()
	if s.ItemLabel == "" && s.AdmissionLabel == "" && s.ParkedLabel == "" {
		return def
	}
	for _, f := range []struct{ v, d *string }{{&s.ItemLabel, &def.ItemLabel}, {&s.AdmissionLabel, &def.AdmissionLabel},
		{&s.ParkedLabel, &def.ParkedLabel}, {&s.RulingOwner, &def.RulingOwner}, {&s.DefaultPriority, &def.DefaultPriority},
		{&s.DefaultPhase, &def.DefaultPhase}} {
		if *f.v == "" {
			*f.v = *f.d
		}
	}
	if s.PoisonThreshold <= 0 {
		s.PoisonThreshold = def.PoisonThreshold
	}
	if labelsClash(s) {
		s.ItemLabel, s.AdmissionLabel, s.ParkedLabel = def.ItemLabel, def.AdmissionLabel, def.ParkedLabel
	}
	s.Agents = slices.Clone(s.Agents)
	return s
}

// stringValue reads a scalar as text: a string, or a plain number (a label
// may be "2024"); not a boolean, a null, a list or a mapping.
func stringValue(n *yaml.Node) (string, error) {
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!str" && n.Tag != "!!int" && n.Tag != "!!float") {
		return "", fmt.Errorf("must be a string")
	}
	if !utf8.ValidString(n.Value) {
		return "", fmt.Errorf("is not valid UTF-8")
	}
	return n.Value, nil
}

func labelValue(n *yaml.Node) (string, error) {
	v, err := stringValue(n)
	if err != nil {
		return "", err
	}
	switch c := utf8.RuneCountInString(v); {
	case c == 0:
		return "", fmt.Errorf("is empty; a label name is 1 to %d characters", MaxLabelLength)
	case c > MaxLabelLength:
		return "", fmt.Errorf("is %d characters; a label name is at most %d", c, MaxLabelLength)
	case strings.TrimSpace(v) != v:
		return "", fmt.Errorf("starts or ends with whitespace (GitHub trims label names)")
	case strings.IndexFunc(v, func(r rune) bool { return !unicode.IsPrint(r) && r != ' ' }) >= 0:
		return "", fmt.Errorf("holds a control or invisible character")
	}
	return v, nil
}

func thresholdValue(n *yaml.Node) (int, error) {
	var v int64
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" || n.Decode(&v) != nil {
		return 0, fmt.Errorf("must be a whole number from 1 to %d", MaxPoisonThreshold)
	}
	if v < 1 || v > MaxPoisonThreshold {
		return 0, fmt.Errorf("must be from 1 to %d", MaxPoisonThreshold)
	}
	return int(v), nil
}

// loginRe is a GitHub login, or an App's bot account (the same rule as
// WARDEN_AGENTS).
var loginRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9-]{0,38}(?:\[bot\])?$`)

// agentsValue reads agents: a list of logins, duplicates (case-insensitive)
// dropped; one bad entry fails the whole list.
func agentsValue(n *yaml.Node) ([]string, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf("must be a list of logins")
	}
	if len(n.Content) > MaxSettingsAgents {
		return nil, fmt.Errorf("has %d entries, over the %d allowed", len(n.Content), MaxSettingsAgents)
	}
	out := []string{}
	for i, e := range n.Content {
		e = yamlDeref(e)
		v, err := stringValue(e)
		if err != nil || !loginRe.MatchString(v) {
			return nil, fmt.Errorf("has entry %d, %s, which is not a GitHub login", i+1, describe(e))
		}
		if !slices.ContainsFunc(out, func(o string) bool { return strings.EqualFold(o, v) }) {
			out = append(out, v)
		}
	}
	return out, nil
}

func rulingOwnerValue(n *yaml.Node) (string, error) {
	v, err := stringValue(n)
	if err != nil {
		return "", err
	}
	if v == "" {
		return "", fmt.Errorf("is empty")
	}
	if gating.ValidTagSyntax("ruling-owner:"+v) != nil {
		return "", fmt.Errorf("cannot be a ruling-owner: tag (a tag is at most 200 bytes, with no spaces or control characters)")
	}
	return v, nil
}

// choice reads one of a closed set of strings (case-sensitive, as the
// tags they become are).
func choice(choices ...string) func(*yaml.Node) (string, error) {
	return func(n *yaml.Node) (string, error) {
		v, err := stringValue(n)
		if err != nil || !slices.Contains(choices, v) {
			return "", fmt.Errorf("must be one of %s", strings.Join(choices, ", "))
		}
		return v, nil
	}
}

// yamlDeref follows aliases (bounded: an alias chain cannot loop, but stay
// safe).
func yamlDeref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && n.Alias != nil && i < 16; i++ {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

// describe names a value for a problem's detail: a scalar quoted and cut,
// otherwise its kind.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.ScalarNode:
		if isNull(n) {
			return "null"
		}
		return quote(n.Value)
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.AliasNode:
		return "an alias"
	}
	return "an empty document"
}

// quote sets a user's value in a problem's detail: Go-quoted (so control
// characters show) and cut at 60 characters.
func quote(s string) string {
	if c := cut(s, 60); c != s {
		return fmt.Sprintf("%q…", c)
	}
	return fmt.Sprintf("%q", s)
}

// cut shortens s to at most most runes.
func cut(s string, most int) string {
	n := 0
	for i := range s {
		if n == most {
			return s[:i]
		}
		n++
	}
	return s
}

// suggest names the setting an unknown key probably meant.
func suggest(key string) string {
	norm := func(s string) string { return strings.ReplaceAll(strings.ToLower(s), "-", "_") }
	for _, k := range append(sortedKeys(settingFields), settingGroups...) {
		if norm(k) == norm(key) || norm(k) == norm(strings.ReplaceAll(key, "_", ".")) {
			return " (did you mean " + k + "?)"
		}
	}
	return ""
}

// lastValue renders the value a field keeps.
func lastValue(key string, last gating.Settings) string {
	for _, v := range settingValues(last) {
		if v[0] == key {
			return " " + v[1]
		}
	}
	return ""
}

// oneLine flattens an error for a problem's detail, at most 200 characters.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if c := cut(s, 200); c != s {
		return c + "…"
	}
	return s
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// settingChange is one field that differs between two settings.
type settingChange struct{ field, from, to string }

// settingValues renders every field, in the file's order.
func settingValues(s gating.Settings) [][2]string {
	return [][2]string{
		{"labels.item", quote(s.ItemLabel)},
		{"labels.admission", quote(s.AdmissionLabel)},
		{"labels.parked", quote(s.ParkedLabel)},
		{"poison_threshold", fmt.Sprint(s.PoisonThreshold)},
		{"agents", loginList(s.Agents)},
		{"ruling_owner", quote(s.RulingOwner)},
		{"defaults.priority", quote(s.DefaultPriority)},
		{"defaults.phase", quote(s.DefaultPhase)},
		{"check_run", fmt.Sprint(s.CheckRun)},
		{"require_item", fmt.Sprint(s.RequireItem)},
		{"dashboard", fmt.Sprint(s.Dashboard)},
		{"post_markers", fmt.Sprint(s.PostMarkers)},
		{"dry_run", fmt.Sprint(s.DryRun)},
		{"max_claims_per_owner", fmt.Sprint(s.MaxClaimsPerOwner)},
	}
}

// settingsDiff lists the fields that differ, in the file's order. agents
// compare as a set, case-insensitively.
func settingsDiff(a, b gating.Settings) []settingChange {
	var out []settingChange
	av, bv := settingValues(a), settingValues(b)
	for i := range av {
		if av[i][0] == "agents" {
			if sameLogins(a.Agents, b.Agents) {
				continue
			}
		} else if av[i][1] == bv[i][1] {
			continue
		}
		out = append(out, settingChange{av[i][0], av[i][1], bv[i][1]})
	}
	return out
}

func sameLogins(a, b []string) bool {
	norm := func(l []string) []string {
		out := make([]string, len(l))
		for i, x := range l {
			out[i] = strings.ToLower(x)
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	return slices.Equal(norm(a), norm(b))
}

func loginList(l []string) string {
	q := make([]string, len(l))
	for i, x := range l {
		q[i] = quote(x)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// DecideSettingsChange applies the human-push rule (CONTRACT.md §2) to
// settings read from a push to the default branch: proposed and problems
// are ParseSettingsFile's answer for the pushed file (read against
// current), current the settings in effect before the push, byHuman
// whether the push was made by a human (§4: the pusher, or for a merge the
// person who merged).
//
// A human's push takes effect: proposed, with the file's problems. Any
// other push changes nothing: current stays, each field the file would have
// changed is reported settings-changed-by-agent (naming the field, its
// value and the value it would have taken), and the file's own problems are
// reported too (the file on the default branch is what a human will fix).
func DecideSettingsChange(current, proposed gating.Settings, problems []SettingsProblem, byHuman bool) (gating.Settings, []SettingsProblem) {
	if byHuman {
		proposed.Agents = slices.Clone(proposed.Agents)
		return proposed, slices.Clone(problems)
	}
	var findings []SettingsProblem
	for _, c := range settingsDiff(current, proposed) {
		findings = append(findings, SettingsProblem{SettingsChangedByAgent, c.field,
			fmt.Sprintf("a push not made by a human would change %s from %s to %s; it stays %s until a human pushes the change", c.field, c.from, c.to, c.from)})
	}
	current.Agents = slices.Clone(current.Agents)
	return current, append(findings, problems...)
}
