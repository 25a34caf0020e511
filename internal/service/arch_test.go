package service

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/wardenhq/warden"

// imports reads the direct imports of every package of the module from its
// non-test source files: import path → imported paths.
func imports(t *testing.T, root string) map[string]map[string]bool {
	t.Helper()
	out := map[string]map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "node_modules" || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		pkg := module
		if rel != "." {
			pkg += "/" + filepath.ToSlash(rel)
		}
		if out[pkg] == nil {
			out[pkg] = map[string]bool{}
		}
		for _, im := range f.Imports {
			out[pkg][strings.Trim(im.Path.Value, `"`)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// arrowRule is an arrow that must never exist (ARCHITECTURE.md, and the
// README's Layout table): from a package (or the packages under a prefix)
// to an import whose path starts with one of banned.
type arrowRule struct {
	from   string
	banned []string
	why    string
}

func (r arrowRule) applies(pkg string) bool {
	return pkg == module+"/"+r.from || strings.HasPrefix(pkg, module+"/"+r.from+"/")
}

var (
	testDoubles = []string{module + "/internal/ghsim", module + "/internal/harness"}
	arrowRules  = []arrowRule{
		{"mirror/store", []string{"github.com/google/go-github", module + "/app", module + "/mirror", module + "/webhooks", module + "/internal/service"},
			"storage knows no GitHub"},
		{"app", []string{module + "/gating", module + "/mirror", module + "/webhooks"}, "GitHub access knows no protocol"},
		{"webhooks", []string{module + "/mirror", module + "/gating", module + "/app"}, "ingress is generic; handlers are registered into it"},
		{"mirror", testDoubles, "production code never imports a test double"},
		{"webhooks", testDoubles, "production code never imports a test double"},
		{"app", testDoubles, "production code never imports a test double"},
		{"gating", testDoubles, "production code never imports a test double"},
		{"internal/service", testDoubles, "production code never imports a test double"},
		{"internal/agentapi", testDoubles, "production code never imports a test double"},
		{"internal/mcpapi", testDoubles, "production code never imports a test double"},
	}
)

// TestArchitecture holds the code to the arrows that must never exist:
// gating imports only the standard library, the store knows no GitHub, the
// GitHub side keeps no SQL of its own, GitHub access knows no protocol,
// ingress is generic, and no production package imports a test double.
func TestArchitecture(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the module root: %v", err)
	}
	all := imports(t, root)
	for _, want := range []string{"gating", "mirror", "mirror/store", "app", "webhooks"} {
		if all[module+"/"+want] == nil {
			t.Fatalf("no package %s found under %s: the instrument reads nothing", want, root)
		}
	}
	var bad []string
	for pkg, ims := range all {
		for im := range ims {
			if pkg == module+"/gating" && strings.Contains(strings.SplitN(im, "/", 2)[0], ".") {
				bad = append(bad, pkg+" → "+im+": the rules do no I/O and import only the standard library")
			}
			if pkg == module+"/mirror" && (im == "database/sql" || im == module+"/internal/db") {
				bad = append(bad, pkg+" → "+im+": every table and SQL statement is the store's")
			}
			for _, r := range arrowRules {
				if !r.applies(pkg) || strings.HasPrefix(pkg, module+"/mirror/store") && r.from == "mirror" {
					continue
				}
				for _, b := range r.banned {
					if im == b || strings.HasPrefix(im, b+"/") {
						bad = append(bad, pkg+" → "+im+": "+r.why)
					}
				}
			}
		}
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Error(b)
	}
}
