package service

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v4"
)

// Compose held to the code (packagingProblems runs these): the SQLite
// setup interpolates without POSTGRES_PASSWORD, the PostgreSQL one refuses
// to start without it, and warden can read the App's key in both.

// --- compose ---------------------------------------------------------------

// composeInterpolate expands one value as compose does: $$ is a dollar,
// $VAR and ${VAR} the variable (empty when unset), ${VAR:-d}/${VAR-d} a
// default when unset or empty/unset, ${VAR:+a}/${VAR+a} an alternative, and
// ${VAR:?e}/${VAR?e} an error when unset or empty/unset. refs are the
// variables named.
func composeInterpolate(s string, env map[string]string) (out string, refs []string, err error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch c := s[i+1]; {
		case c == '$':
			b.WriteByte('$')
			i++
		case c == '{':
			depth, j := 1, i+2
			for ; j < len(s) && depth > 0; j++ {
				switch s[j] {
				case '{':
					depth++
				case '}':
					depth--
				}
			}
			if depth != 0 {
				return "", refs, fmt.Errorf("unclosed ${ in %q", s)
			}
			expr := s[i+2 : j-1]
			k := 0
			for k < len(expr) && (expr[k] == '_' || expr[k] >= 'A' && expr[k] <= 'Z' || expr[k] >= 'a' && expr[k] <= 'z' || k > 0 && expr[k] >= '0' && expr[k] <= '9') {
				k++
			}
			name, op := expr[:k], expr[k:]
			if name == "" {
				return "", refs, fmt.Errorf("invalid interpolation %q", "${"+expr+"}")
			}
			refs = append(refs, name)
			v, set := env[name]
			colon := strings.HasPrefix(op, ":")
			if colon {
				op = op[1:]
			}
			present := set && (!colon || v != "")
			arg := ""
			if op != "" {
				var inner []string
				if arg, inner, err = composeInterpolate(op[1:], env); err != nil {
					return "", refs, err
				}
				refs = append(refs, inner...)
			}
			switch {
			case op == "":
				if colon {
					return "", refs, fmt.Errorf("invalid interpolation %q", "${"+expr+"}")
				}
				b.WriteString(v)
			case op[0] == '-':
				if present {
					b.WriteString(v)
				} else {
					b.WriteString(arg)
				}
			case op[0] == '+':
				if present {
					b.WriteString(arg)
				}
			case op[0] == '?':
				if !present {
					return "", refs, fmt.Errorf("required variable %s is missing a value: %s", name, arg)
				}
				b.WriteString(v)
			default:
				return "", refs, fmt.Errorf("invalid interpolation %q", "${"+expr+"}")
			}
			i = j - 1
		case c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z':
			j := i + 1
			for j < len(s) && (s[j] == '_' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= '0' && s[j] <= '9') {
				j++
			}
			refs = append(refs, s[i+1:j])
			b.WriteString(env[s[i+1:j]])
			i = j - 1
		default:
			b.WriteByte('$')
		}
	}
	return b.String(), refs, nil
}

// composeScalars lists every scalar value of a compose file (compose
// interpolates values, never keys) with its path.
func composeScalars(text string) ([][2]string, error) {
	var root yaml.Node
	if err := yaml.Unmarshal([]byte(text), &root); err != nil {
		return nil, err
	}
	var out [][2]string
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.DocumentNode, yaml.SequenceNode:
			for i, c := range n.Content {
				walk(c, path+"["+strconv.Itoa(i)+"]")
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				walk(n.Content[i+1], path+"."+n.Content[i].Value)
			}
		case yaml.ScalarNode:
			out = append(out, [2]string{path, n.Value})
		}
	}
	walk(&root, "")
	return out, nil
}

// envExample is deploy/env.example as compose reads a .env made from it.
func envExample(files map[string]string) map[string]string {
	env := map[string]string{}
	for _, l := range strings.Split(files["deploy/env.example"], "\n") {
		l = strings.TrimSpace(l)
		if k, v, ok := strings.Cut(l, "="); ok && !strings.HasPrefix(l, "#") {
			env[strings.TrimSpace(k)] = v
		}
	}
	return env
}

// checkComposeInterpolation: compose interpolates every service of a file
// whatever the profiles, so the SQLite setup lives in a file of its own,
// which interpolates with env.example's settings less POSTGRES_PASSWORD; the
// PostgreSQL file interpolates with all of them, and every value of it that
// names POSTGRES_PASSWORD refuses to interpolate without one (it fails
// closed instead of starting PostgreSQL, or warden, with an empty password).
func checkComposeInterpolation(files map[string]string) []string {
	var out []string
	full := envExample(files)
	if full["POSTGRES_PASSWORD"] == "" {
		out = append(out, "deploy/env.example: sets no POSTGRES_PASSWORD for compose.yml")
	}
	noPG := maps.Clone(full)
	delete(noPG, "POSTGRES_PASSWORD")
	for _, c := range []struct {
		file string
		env  map[string]string
		what string
	}{
		{"deploy/compose.sqlite.yml", noPG, "without POSTGRES_PASSWORD"},
		{"deploy/compose.yml", full, "with env.example's settings"},
	} {
		scalars, err := composeScalars(files[c.file])
		if err != nil {
			out = append(out, c.file+": "+err.Error())
			continue
		}
		for _, sc := range scalars {
			if _, _, err := composeInterpolate(sc[1], c.env); err != nil {
				out = append(out, fmt.Sprintf("%s does not interpolate %s: %s: %v", c.file, c.what, sc[0], err))
			}
		}
	}
	scalars, _ := composeScalars(files["deploy/compose.yml"])
	named := 0
	for _, sc := range scalars {
		_, refs, _ := composeInterpolate(sc[1], full)
		if !slices.Contains(refs, "POSTGRES_PASSWORD") {
			continue
		}
		named++
		if _, _, err := composeInterpolate(sc[1], noPG); err == nil {
			out = append(out, fmt.Sprintf("deploy/compose.yml: %s interpolates without POSTGRES_PASSWORD: want ${POSTGRES_PASSWORD:?…}, refusing to start with an empty password", sc[0]))
		}
	}
	if named == 0 {
		out = append(out, "deploy/compose.yml: no value names POSTGRES_PASSWORD (the database's password)")
	}
	return out
}

type composeService struct {
	Image       string         `yaml:"image"`
	Build       any            `yaml:"build"`
	EnvFile     any            `yaml:"env_file"`
	Environment map[string]any `yaml:"environment"`
	Secrets     []any          `yaml:"secrets"`
	GroupAdd    []any          `yaml:"group_add"`
	User        string         `yaml:"user"`
	Volumes     []string       `yaml:"volumes"`
	Deploy      *struct {
		Replicas *int `yaml:"replicas"`
	} `yaml:"deploy"`
	Healthcheck *struct {
		Test any `yaml:"test"`
	} `yaml:"healthcheck"`
}

type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Secrets  map[string]struct {
		File string `yaml:"file"`
	} `yaml:"secrets"`
}

// checkComposeSQLite: compose.sqlite.yml runs one warden on SQLite on a
// volume at /data, and nothing else.
func checkComposeSQLite(text string) []string {
	const name = "deploy/compose.sqlite.yml"
	if text == "" {
		return []string{name + " is missing: the SQLite setup has no compose file"}
	}
	var out []string
	bad := func(format string, a ...any) { out = append(out, fmt.Sprintf(name+": "+format, a...)) }
	var doc composeFile
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		return []string{name + ": " + err.Error()}
	}
	w, ok := doc.Services["warden"]
	if !ok || len(doc.Services) != 1 {
		bad("want exactly one service, warden; have %v", slices.Sorted(maps.Keys(doc.Services)))
		return out
	}
	db := fmt.Sprint(w.Environment["WARDEN_DATABASE"])
	if !strings.HasPrefix(db, "sqlite:/data/") {
		bad("warden's WARDEN_DATABASE %q is not sqlite:/data/…", db)
	}
	if !slices.ContainsFunc(w.Volumes, func(v string) bool {
		return strings.HasSuffix(v, ":/data") && !strings.HasPrefix(v, "/") && !strings.HasPrefix(v, ".")
	}) {
		bad("warden mounts no named volume at /data for the database: %v", w.Volumes)
	}
	if w.Deploy != nil && w.Deploy.Replicas != nil && *w.Deploy.Replicas != 1 {
		bad("deploy.replicas %d: SQLite allows one process per file", *w.Deploy.Replicas)
	}
	if !strings.Contains(fmt.Sprint(w.EnvFile), ".env") {
		bad("warden has no env_file .env for the App's settings")
	}
	if w.Healthcheck == nil || w.Healthcheck.Test == nil {
		bad("warden has no healthcheck")
	}
	return out
}

// checkComposeKey: in both compose files, warden reads the App's key from a
// secret (a bind mount keeping the host file's owner and mode) while running
// as the image's uid 65532, never root and never the operator's uid; it
// joins the key's group (group_add) to read the 0640 key.
func checkComposeKey(files map[string]string) []string {
	var out []string
	for _, name := range []string{"deploy/compose.yml", "deploy/compose.sqlite.yml"} {
		var doc composeFile
		if err := yaml.Unmarshal([]byte(files[name]), &doc); err != nil {
			continue // reported by the file's own check
		}
		w, ok := doc.Services["warden"]
		if !ok {
			continue
		}
		bad := func(format string, a ...any) { out = append(out, fmt.Sprintf(name+": "+format, a...)) }
		if _, ok := w.Environment["WARDEN_PRIVATE_KEY_FILE"]; !ok || len(w.Secrets) == 0 {
			bad("warden's private key should come from a secret via WARDEN_PRIVATE_KEY_FILE")
		}
		for s, def := range doc.Secrets {
			if def.File == "" {
				bad("secret %s has no file", s)
			}
		}
		if w.User != "" {
			bad("warden runs as user %q: it keeps the image's uid 65532 and reads the key through group_add", w.User)
		}
		if len(w.GroupAdd) == 0 {
			bad("warden has no group_add: as uid 65532 it cannot read the 0600 key `warden setup` writes (make it 0640 and add its group)")
		}
	}
	return out
}
