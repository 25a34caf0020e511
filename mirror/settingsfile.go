package mirror

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

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

// SettingsProblem is one thing wrong with a settings file: a repository
// finding of the service, an annotation of the backlog/settings check run,
// and a line of `warden settings check`. The JSON names are those of the
// rows earlier wardens stored (Field, Detail).
type SettingsProblem struct {
	// Code is SettingsInvalid or SettingsChangedByAgent.
	Code string `json:"Code"`
	// Line is the 1-based line of the file the problem is at; 0 when it is
	// about the whole file, or the file is not at hand.
	Line int `json:"Line,omitempty"`
	// Key is the setting's dotted key (labels.item, poison_threshold, an
	// unknown key); empty for the whole file.
	Key string `json:"Field"`
	// Message says what is wrong and what stays in effect, without the key.
	Message string `json:"Detail"`
	// Suggestion is what the file probably meant instead (a known key for
	// a misspelt one, a valid value for a near miss); empty when nothing is
	// close.
	Suggestion string `json:"Suggestion,omitempty"`
}

// String renders the problem on one line:
// `line 3: poision_threshold: unknown key, ignored; did you mean poison_threshold?`.
func (p SettingsProblem) String() string {
	var b strings.Builder
	if p.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", p.Line)
	}
	if p.Key != "" {
		b.WriteString(p.Key + ": ")
	}
	b.WriteString(p.Message)
	if p.Suggestion != "" {
		b.WriteString("; did you mean " + p.Suggestion + "?")
	}
	return b.String()
}

// ValidateSettingsFile checks a `.github/backlog.yml` offline, with the
// validation the service applies to a pushed one (ParseSettingsFile,
// judged against the defaults): nil when the file is good. Each problem
// carries its line where the file has one.
func ValidateSettingsFile(data []byte) []SettingsProblem {
	_, problems := ParseSettingsFile(data, gating.DefaultSettings())
	return problems
}

// ParseSettingsFile reads a `.github/backlog.yml` (data; nil or empty, or a
// file of only comments, means the defaults) against the settings last in
// effect (lastGood; DefaultSettings when there were none). It returns the
// settings the file asks for and what is wrong with it, each a
// settings-invalid problem at its line:
//
//   - a file over 64 KiB, or one that is not YAML, holds more than one
//     document or is not a mapping: every field keeps its lastGood value;
//   - a key it does not know: reported (with the known key it probably
//     means), and ignored (the others count);
//   - a field whose value is invalid, or whose key is given twice: that
//     field keeps its lastGood value, the others take effect;
//   - labels that name the same label (case-insensitively): the three
//     labels keep their lastGood values together;
//   - a field the file leaves out, or sets to null: the default.
//
// Whether the result takes effect is DecideSettingsChange's to say.
func ParseSettingsFile(data []byte, lastGood gating.Settings) (gating.Settings, []SettingsProblem) {
	lastGood = withDefaults(lastGood)
	const keep = "; every setting keeps its last good value"
	whole := func(line int, format string, a ...any) []SettingsProblem {
		return []SettingsProblem{{Code: SettingsInvalid, Line: line, Message: fmt.Sprintf(format, a...) + keep}}
	}
	if len(data) > MaxSettingsFileSize {
		return lastGood, whole(0, "%s is %d bytes, over the %d warden reads", SettingsPath, len(data), MaxSettingsFileSize)
	}
	root, err := loadOneDocument(data)
	if err != nil {
		line, msg := yamlErrorAt(err)
		return lastGood, whole(line, "%s cannot be read as YAML settings (%s)", SettingsPath, oneLine(msg))
	}
	if root == nil || isNull(root) {
		return gating.DefaultSettings(), nil
	}
	if root.Kind != yaml.MappingNode {
		return lastGood, whole(root.Line, "%s must be a mapping of settings, not %s", SettingsPath, describe(root))
	}
	p := settingsParser{out: gating.DefaultSettings(), last: lastGood, lines: map[string]int{}}
	p.mapping(root, "")
	p.checkLabels()
	return p.out, p.problems
}

// errMoreDocuments: the file holds a second YAML document.
type errMoreDocuments struct{ line int }

func (e errMoreDocuments) Error() string { return "it holds more than one YAML document" }

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
		return nil, errMoreDocuments{line: more.Line}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, nil
	}
	return yamlDeref(doc.Content[0]), nil
}

// yamlErrorAt splits a YAML error into the line it names (0: none) and its
// message without the parser's prefix and position.
func yamlErrorAt(err error) (int, string) {
	var more errMoreDocuments
	if errors.As(err, &more) {
		return more.line, more.Error()
	}
	var le *yaml.LoadError
	if errors.As(err, &le) && le.Message != "" {
		return le.Mark.Line, le.Message
	}
	var les *yaml.LoadErrors
	if errors.As(err, &les) && len(les.Errors) > 0 && les.Errors[0].Message != "" {
		return les.Errors[0].Mark.Line, les.Errors[0].Message
	}
	return 0, err.Error()
}

// settingsParser walks the file's mapping.
type settingsParser struct {
	out, last gating.Settings
	problems  []SettingsProblem
	explicit  map[string]bool // labels the file set
	lines     map[string]int  // the line of each key the file gives
}

// problem records a settings-invalid problem on key at line.
func (p *settingsParser) problem(line int, key, suggestion, format string, a ...any) {
	p.problems = append(p.problems, SettingsProblem{Code: SettingsInvalid, Line: line, Key: key,
		Message: fmt.Sprintf(format, a...), Suggestion: suggestion})
}

// mapping reads a mapping of settings under prefix ("" for the file).
func (p *settingsParser) mapping(m *yaml.Node, prefix string) {
	seen := map[string]bool{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		keyNode, rawVal := yamlDeref(m.Content[i]), m.Content[i+1]
		val := yamlDeref(rawVal)
		name := keyNode.Value
		if keyNode.Kind != yaml.ScalarNode {
			name = describe(keyNode)
		}
		key := name
		if prefix != "" {
			key = prefix + "." + name
		}
		line := m.Content[i].Line
		_, leaf := settingFields[key]
		leaf = leaf && !strings.Contains(name, ".")
		group := prefix == "" && isSettingGroup(name)
		if keyNode.Kind != yaml.ScalarNode || keyNode.Tag == "!!merge" || (!leaf && !group) {
			field := key
			if c := cut(key, 60); c != key {
				field = c + "…"
			}
			if g, rest, dotted := strings.Cut(key, "."); dotted && prefix == "" && isSettingGroup(g) && settingFields[key].set != nil {
				p.problem(line, field, "", "unknown key, ignored (write it nested: %s: {%s: …})", g, rest)
				continue
			}
			p.problem(line, field, suggestKey(key, keyNode.Kind == yaml.ScalarNode), "unknown key, ignored")
			continue
		}
		if seen[name] {
			p.keepAll(key)
			if group {
				p.problem(line, key, "", "given twice; its settings keep their last good values")
			} else {
				p.problem(line, key, "", "given twice; it keeps its last good value%s", lastValue(key, p.last))
			}
			continue
		}
		seen[name] = true
		p.lines[key] = line
		if isNull(val) {
			continue // the default
		}
		if group {
			if val.Kind != yaml.MappingNode {
				p.keepAll(key)
				p.problem(line, key, "", "must be a mapping, not %s; its settings keep their last good values", describe(val))
				continue
			}
			p.mapping(val, key)
			continue
		}
		if err := settingFields[key].set(&p.out, val); err != nil {
			settingFields[key].keep(&p.out, p.last)
			at, suggestion := rawVal.Line, ""
			var ve *valueError
			if errors.As(err, &ve) {
				if ve.at != nil && ve.at.Line > 0 {
					at = ve.at.Line
				}
				suggestion = ve.suggestion
			}
			if at == 0 {
				at = line
			}
			p.problem(at, key, suggestion, "%s %s; it keeps its last good value%s", describe(val), err, lastValue(key, p.last))
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

// keepAll puts back the last good value of every field under prefix.
func (p *settingsParser) keepAll(prefix string) {
	for _, k := range sortedKeys(settingFields) {
		if k == prefix || strings.HasPrefix(k, prefix+".") {
			settingFields[k].keep(&p.out, p.last)
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
	p.problem(p.lines[field], field, "", "%s (label names compare case-insensitively; the three labels must differ); the labels keep their last good values %s, %s and %s",
		strings.Join(clashes, "; "), quote(fallback.ItemLabel), quote(fallback.AdmissionLabel), quote(fallback.ParkedLabel))
}

// settingLines returns the line of each key data gives (dotted, as the
// problems name them); empty for a file that is not a mapping.
func settingLines(data []byte) map[string]int {
	lines := map[string]int{}
	if len(data) > MaxSettingsFileSize {
		return lines
	}
	root, err := loadOneDocument(data)
	if err != nil || root == nil || root.Kind != yaml.MappingNode {
		return lines
	}
	var walk func(m *yaml.Node, prefix string)
	walk = func(m *yaml.Node, prefix string) {
		for i := 0; i+1 < len(m.Content); i += 2 {
			k, v := yamlDeref(m.Content[i]), yamlDeref(m.Content[i+1])
			if k.Kind != yaml.ScalarNode {
				continue
			}
			key := k.Value
			if prefix != "" {
				key = prefix + "." + key
			}
			if _, dup := lines[key]; !dup {
				lines[key] = m.Content[i].Line
			}
			if prefix == "" && v.Kind == yaml.MappingNode && isSettingGroup(k.Value) {
				walk(v, key)
			}
		}
	}
	walk(root, "")
	return lines
}

// locateProblems gives each problem without a line the line of its key in
// data (a settings-changed-by-agent finding is made without the file), or
// of its group (labels for labels.item).
func locateProblems(data []byte, problems []SettingsProblem) []SettingsProblem {
	var lines map[string]int
	for i := range problems {
		if problems[i].Line != 0 || problems[i].Key == "" {
			continue
		}
		if lines == nil {
			lines = settingLines(data)
		}
		key := problems[i].Key
		if l, ok := lines[key]; ok {
			problems[i].Line = l
		} else if g, _, ok := strings.Cut(key, "."); ok {
			problems[i].Line = lines[g]
		}
	}
	return problems
}
