package mirror

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v4"

	"github.com/wardenhq/warden/gating"
)

// settingField is one leaf setting: how to read it into the settings, and
// how to put back its last good value.
type settingField struct {
	set  func(s *gating.Settings, n *yaml.Node) error
	keep func(s *gating.Settings, last gating.Settings)
}

// settingGroups are the keys that hold a mapping of settings.
var settingGroups = []string{"labels", "defaults"}

func isSettingGroup(name string) bool { return slices.Contains(settingGroups, name) }

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
	"close_on_complete": closeOnCompleteField,
	"agent_assignees":   agentAssigneesField,
	"agent_lease":       agentLeaseField,
}

// valueError is a value's problem that names where it is (an entry of a
// list, not the list) or what was probably meant.
type valueError struct {
	msg        string
	at         *yaml.Node // nil: the value itself
	suggestion string
}

func (e *valueError) Error() string { return e.msg }

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

// boolWords are the YAML 1.1 spellings of a boolean that YAML 1.2 (and so
// warden) reads as strings.
var boolWords = map[string]string{"yes": "true", "y": "true", "on": "true", "no": "false", "n": "false", "off": "false"}

func boolField(f func(s *gating.Settings) *bool) settingField {
	return settingField{
		set: func(s *gating.Settings, n *yaml.Node) error {
			if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
				e := &valueError{msg: "must be true or false"}
				if n.Kind == yaml.ScalarNode {
					if b, ok := boolWords[strings.ToLower(n.Value)]; ok {
						e.suggestion = b
					} else if v := strings.ToLower(n.Value); v == "true" || v == "false" {
						e.suggestion = v // quoted
					}
				}
				return e
			}
			return n.Decode(f(s))
		},
		keep: func(s *gating.Settings, l gating.Settings) { *f(s) = *f(&l) },
	}
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
		return "", &valueError{msg: "starts or ends with whitespace (GitHub trims label names)", suggestion: quote(strings.TrimSpace(v))}
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
	for i, raw := range n.Content {
		e := yamlDeref(raw)
		v, err := stringValue(e)
		if err != nil || !loginRe.MatchString(v) {
			return nil, &valueError{msg: fmt.Sprintf("has entry %d, %s, which is not a GitHub login", i+1, describe(e)), at: raw}
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
// tags they become are); a near miss names the choice it is near.
func choice(choices ...string) func(*yaml.Node) (string, error) {
	return func(n *yaml.Node) (string, error) {
		v, err := stringValue(n)
		if err != nil || !slices.Contains(choices, v) {
			return "", &valueError{msg: "must be one of " + strings.Join(choices, ", "), suggestion: nearest(v, choices)}
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

// describe names a value for a problem's message: a scalar quoted and cut,
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

// quote sets a user's value in a problem's message: Go-quoted (so control
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

// oneLine flattens an error for a problem's message, at most 200 characters.
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
