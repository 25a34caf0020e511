// Package docs_test holds warden's user documentation (the Markdown files
// beside it) to the code: every defect code, exclusion and write refusal
// the code knows is in defects.md, every /backlog command in commands.md
// with its role, every settings key and WARDEN_* variable in settings.md,
// every agent API route and refusal reason in agent-api.md, and every
// example marker in markers.md parses. The lists come from the code (an
// exported list, or the source itself), never from a copy kept here.
package docs_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror"
)

// pendingCodes are codes the contract names that the code does not emit
// yet: other work is adding them. docs/defects.md documents them already;
// the test allows them there without a source. Drop a name once the code
// emits it (the test logs which ones it found).
var pendingCodes = []string{}

// pendingSettings are `.github/backlog.yml` keys the contract names that
// the parser does not accept yet (other work is adding them).
var pendingSettings = []string{}

// read returns a documentation file's text.
func read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatalf("read the documentation: %v", err)
	}
	return string(b)
}

// rowKey matches a Markdown table row whose first cell starts with a code
// span, and captures the span's text.
var rowKey = regexp.MustCompile("(?m)^\\|\\s*`([^`]+)`")

// rowKeys is the first code span of every table row of doc.
func rowKeys(doc string) map[string]bool {
	out := map[string]bool{}
	for _, m := range rowKey.FindAllStringSubmatch(doc, -1) {
		out[m[1]] = true
	}
	return out
}

// rows maps the first code span of every table row of doc to the row.
func rows(doc string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(doc, "\n") {
		if m := rowKey.FindStringSubmatch(line); m != nil {
			out[m[1]] = line
		}
	}
	return out
}

// codeConst is the name of a constant that holds a code.
var codeConst = regexp.MustCompile(`^(Code|Ex|Defect)[A-Z]`)

// codeRe is the shape of a code: lowercase words joined by hyphens.
var codeRe = regexp.MustCompile(`^[a-z][a-z0-9]*(-[a-z0-9]+)*$`)

// sourceCodes reads the defect, exclusion and refusal codes out of the
// non-test Go files of dirs (relative to the module root): constants named
// Code…, Ex… or Defect…; the first argument of calls to refuse, add and
// report (the rules' emitters); and Code:, Codes: and Reason: fields set to
// literals. It returns each code with where it was found.
func sourceCodes(t *testing.T, dirs ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	fset := token.NewFileSet()
	lit := func(e ast.Expr) (string, bool) {
		b, ok := e.(*ast.BasicLit)
		if !ok || b.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(b.Value)
		return s, err == nil && codeRe.MatchString(s)
	}
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join("..", dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no Go files in %s (%v): the scan reads nothing", dir, err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatalf("parse %s: %v", f, err)
			}
			add := func(s string, n ast.Node) {
				if _, ok := out[s]; !ok {
					out[s] = fset.Position(n.Pos()).String()
				}
			}
			ast.Inspect(file, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.ValueSpec:
					for i, name := range n.Names {
						if i >= len(n.Values) || !codeConst.MatchString(name.Name) {
							continue
						}
						if s, ok := lit(n.Values[i]); ok {
							add(s, n)
						}
					}
				case *ast.CallExpr:
					var name string
					switch fn := n.Fun.(type) {
					case *ast.Ident:
						name = fn.Name
					case *ast.SelectorExpr:
						name = fn.Sel.Name
					}
					if (name == "refuse" || name == "add" || name == "report") && len(n.Args) > 0 {
						if s, ok := lit(n.Args[0]); ok {
							add(s, n)
						}
					}
				case *ast.KeyValueExpr:
					k, ok := n.Key.(*ast.Ident)
					if !ok || (k.Name != "Code" && k.Name != "Codes" && k.Name != "Reason") {
						return true
					}
					if s, ok := lit(n.Value); ok {
						add(s, n)
					}
					if cl, ok := n.Value.(*ast.CompositeLit); ok {
						for _, e := range cl.Elts {
							if s, ok := lit(e); ok {
								add(s, n)
							}
						}
					}
				}
				return true
			})
		}
	}
	return out
}

// apiReasons are literals the scan meets that are no finding: the claim
// and release refusal reasons the ledger sets as Reason fields, which
// agent-api.md documents (TestAgentAPIDocumented holds it to them).
var apiReasons = regexp.MustCompile(`^(contended|timeout|missing|superseded|not-ready|stale|unclaimed)$`)

func TestDefectCodesDocumented(t *testing.T) {
	doc := read(t, "defects.md")
	documented := rowKeys(doc)
	known := map[string]string{}
	for _, c := range gating.KnownCodes() {
		known[c] = "gating.KnownCodes"
	}
	for c, where := range sourceCodes(t, "gating", "mirror", "mirror/store", "internal/service") {
		if apiReasons.MatchString(c) {
			continue
		}
		if _, ok := known[c]; !ok {
			known[c] = where
		}
	}
	if len(known) < 60 {
		t.Fatalf("found only %d codes in the code: the scan is broken", len(known))
	}
	var missing []string
	for c, where := range known {
		if !documented[c] {
			missing = append(missing, c+" (from "+where+")")
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("docs/defects.md does not document %s: add a table row for it", m)
	}
	for c := range documented {
		if _, ok := known[c]; ok {
			if slices.Contains(pendingCodes, c) {
				t.Logf("%s is pending in this test but the code knows it now: drop it from pendingCodes", c)
			}
			continue
		}
		if !slices.Contains(pendingCodes, c) {
			t.Errorf("docs/defects.md documents %s, which the code does not know (nor is it pending)", c)
		}
	}
}

func TestCommandsDocumented(t *testing.T) {
	doc := read(t, "commands.md")
	byVerb := map[string]string{}
	for key, row := range rows(doc) {
		if v, ok := strings.CutPrefix(key, "/backlog "); ok {
			byVerb[strings.Fields(v)[0]] = row
		}
	}
	if len(gating.CommandVerbs) == 0 {
		t.Fatal("gating.CommandVerbs is empty")
	}
	for _, v := range gating.CommandVerbs {
		row, ok := byVerb[v]
		if !ok {
			t.Errorf("docs/commands.md has no table row for /backlog %s", v)
			continue
		}
		cells := strings.Split(row, "|")
		if len(cells) < 4 {
			t.Errorf("docs/commands.md: the row of /backlog %s has no \"who\" cell: %s", v, row)
			continue
		}
		who := strings.ToLower(cells[2])
		human, triage := gating.CommandRule(v)
		want := "anyone"
		switch {
		case human && triage:
			want = "human with triage"
		case triage:
			want = "triage"
		}
		if !strings.Contains(who, want) || (!human && strings.Contains(who, "human")) {
			t.Errorf("docs/commands.md says /backlog %s is for %q; the code says %q", v, strings.TrimSpace(cells[2]), want)
		}
	}
	for v := range byVerb {
		if !slices.Contains(gating.CommandVerbs, v) {
			t.Errorf("docs/commands.md documents /backlog %s, which gating does not know", v)
		}
	}
}

// settingsExample is the annotated file in settings.md: the first ```yaml
// block.
func settingsExample(t *testing.T, doc string) string {
	t.Helper()
	_, rest, ok := strings.Cut(doc, "```yaml\n")
	if !ok {
		t.Fatal("docs/settings.md has no ```yaml block")
	}
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("docs/settings.md: the ```yaml block is not closed")
	}
	return block
}

func TestSettingsKeysDocumented(t *testing.T) {
	doc := read(t, "settings.md")
	documented := rows(doc)
	keys := mirror.SettingsKeys()
	defaults := mirror.SettingsDefaults()
	if len(keys) < 10 || len(defaults) < 10 {
		t.Fatalf("mirror knows %d settings keys, %d defaults: the accessor is broken", len(keys), len(defaults))
	}
	for _, k := range keys {
		row, ok := documented[k]
		if !ok {
			t.Errorf("docs/settings.md has no table row for the settings key %s", k)
			continue
		}
		def, leaf := defaults[k]
		if !leaf {
			continue
		}
		cells := strings.Split(row, "|")
		if len(cells) < 5 {
			t.Errorf("docs/settings.md: the row of %s has no default cell: %s", k, row)
			continue
		}
		// The default cell holds the value as the code writes it, quotes
		// dropped: `backlog`, `3`, `false`, `[]`.
		want := "`" + strings.Trim(def, `"`) + "`"
		if got := strings.TrimSpace(cells[3]); got != want {
			t.Errorf("docs/settings.md gives %s the default %s; the code's is %s", k, got, want)
		}
	}
	for k := range documented {
		if strings.HasPrefix(k, "WARDEN_") || slices.Contains(keys, k) {
			continue
		}
		if !slices.Contains(pendingSettings, k) {
			t.Errorf("docs/settings.md documents the settings key %s, which the parser does not accept (nor is it pending)", k)
		}
	}

	// The annotated file is a valid settings file that sets every key to
	// its default: parsed, it is the defaults, and nothing but a pending
	// key is a problem.
	got, problems := mirror.ParseSettingsFile([]byte(settingsExample(t, doc)), gating.DefaultSettings())
	for _, p := range problems {
		pending := false
		for _, k := range pendingSettings {
			pending = pending || p.Key == k
		}
		if !pending {
			t.Errorf("docs/settings.md's example file: %s", p)
		}
	}
	want := gating.DefaultSettings()
	if len(got.Agents) == 0 {
		got.Agents = nil
	}
	if len(got.AgentAssignees) == 0 {
		got.AgentAssignees = nil
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("docs/settings.md's example file reads as %+v, not the defaults %+v", got, want)
	}
	example := settingsExample(t, doc)
	for _, k := range keys {
		leaf := k[strings.LastIndex(k, ".")+1:]
		if !regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(leaf) + `:`).MatchString(example) {
			t.Errorf("docs/settings.md's example file does not set %s", k)
		}
	}
}

// envRe is a WARDEN_* name as a whole Go string literal.
var envRe = regexp.MustCompile(`"(WARDEN_[A-Z0-9_]+)"`)

func TestEnvironmentDocumented(t *testing.T) {
	doc := read(t, "settings.md")
	documented := rowKeys(doc)
	read := map[string]string{}
	for _, dir := range []string{"internal/config", "cmd/warden"} {
		files, _ := filepath.Glob(filepath.Join("..", dir, "*.go"))
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range envRe.FindAllStringSubmatch(string(b), -1) {
				read[m[1]] = f
			}
		}
	}
	if len(read) < 10 {
		t.Fatalf("found only %d WARDEN_* names in internal/config and cmd/warden: the scan is broken", len(read))
	}
	for name, where := range read {
		if !documented[name] {
			t.Errorf("docs/settings.md's environment table has no row for %s (read in %s)", name, where)
		}
	}
	for name := range documented {
		if strings.HasPrefix(name, "WARDEN_") && read[name] == "" {
			t.Errorf("docs/settings.md documents %s, which no deployment code reads", name)
		}
	}
}
