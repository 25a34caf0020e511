package service

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The build context of deploy/Dockerfile, held small for both builders
// (packagingProblems runs checkDockerignore; TestBuildContextSize measures
// this checkout).

// --- the build context -----------------------------------------------------

// dockerignore is a parsed .dockerignore: patterns in order, the last match
// deciding, "!" re-including; a pattern that matches a directory excludes
// everything under it. Patterns are anchored at the context root, "**"
// matching any number of directories.
type dockerignore []struct {
	re      *regexp.Regexp
	include bool
}

func parseDockerignore(text string) dockerignore {
	var d dockerignore
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		include := strings.HasPrefix(l, "!")
		l = strings.TrimPrefix(strings.TrimPrefix(l, "!"), "/")
		l = strings.TrimSuffix(l, "/")
		var re strings.Builder
		re.WriteString("^")
		for i := 0; i < len(l); i++ {
			switch {
			case strings.HasPrefix(l[i:], "**/"):
				re.WriteString("(.*/)?")
				i += 2
			case strings.HasPrefix(l[i:], "**"):
				re.WriteString(".*")
				i++
			case l[i] == '*':
				re.WriteString("[^/]*")
			case l[i] == '?':
				re.WriteString("[^/]")
			default:
				re.WriteString(regexp.QuoteMeta(l[i : i+1]))
			}
		}
		re.WriteString("(/.*)?$") // a directory's pattern covers its contents
		d = append(d, struct {
			re      *regexp.Regexp
			include bool
		}{regexp.MustCompile(re.String()), include})
	}
	return d
}

// excluded reports whether the slash path (relative to the context root)
// stays out of the context.
func (d dockerignore) excluded(path string) bool {
	out := false
	for _, p := range d {
		if p.re.MatchString(path) {
			out = !p.include
		}
	}
	return out
}

// checkDockerignore: the context's filter is the root .dockerignore, which
// both builders read (a deploy/Dockerfile.dockerignore would be read by
// BuildKit alone, so the two would send different contexts); it keeps out
// version control, the npm corpora, binaries, databases and secrets, and
// lets in what the build compiles.
func checkDockerignore(files map[string]string) []string {
	text, ok := files[".dockerignore"]
	if !ok {
		return []string{".dockerignore is missing: the legacy builder would send the whole checkout (node_modules included)"}
	}
	var out []string
	if _, ok := files["deploy/Dockerfile.dockerignore"]; ok {
		out = append(out, "deploy/Dockerfile.dockerignore exists: BuildKit reads it instead of .dockerignore and the legacy builder ignores it; keep the one root .dockerignore")
	}
	d := parseDockerignore(text)
	for _, p := range []string{".git/HEAD", "node_modules/@octokit/webhooks-examples/package.json", "warden", "warden.db",
		"deploy/.env", "deploy/secrets/private-key.pem", "warden-app.pem", "warden-app.env", "bench/out/x.json"} {
		if !d.excluded(p) {
			out = append(out, fmt.Sprintf(".dockerignore lets %s into the build context", p))
		}
	}
	for _, p := range []string{"go.mod", "go.sum", "cmd/warden/main.go", "deploy/probe/main.go", "internal/service/service.go",
		"app/app.go", "gating/report.go", "mirror/mirror.go", "webhooks/inbox.go"} {
		if d.excluded(p) {
			out = append(out, fmt.Sprintf(".dockerignore keeps %s out of the build context, and the build needs it", p))
		}
	}
	return out
}

// TestBuildContextSize measures what `docker build -f deploy/Dockerfile .`
// would send from this checkout, through the root .dockerignore (both
// builders read it): of the tracked files (git ls-files; a fresh clone) and
// of the working tree as it is (node_modules, binaries and databases
// included). Every tracked Go file outside bench/ must be sent (the build
// compiles them), and a clone's context must stay under 16 MB.
func TestBuildContextSize(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	d := parseDockerignore(string(b))
	var tree, treeAll, treeFiles, treeAllFiles int64
	err = filepath.WalkDir(repoRoot, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, p)
		rel = filepath.ToSlash(rel)
		info, err := e.Info()
		if err != nil {
			return nil // vanished meanwhile (another process's temporary file)
		}
		if e.IsDir() || !info.Mode().IsRegular() {
			return nil
		}
		treeAll += info.Size()
		treeAllFiles++
		if !d.excluded(rel) {
			tree += info.Size()
			treeFiles++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("working tree: %d files, %.1f MB; sent: %d files, %.1f MB", treeAllFiles, float64(treeAll)/1e6, treeFiles, float64(tree)/1e6)
	ls, err := exec.Command("git", "-C", repoRoot, "ls-files", "-z").Output()
	if err != nil {
		t.Skipf("git ls-files: %v (the tracked files' figure needs a git checkout)", err)
	}
	var sent, all int64
	var nSent, nAll int
	for _, f := range strings.Split(strings.TrimRight(string(ls), "\x00"), "\x00") {
		info, err := os.Stat(filepath.Join(repoRoot, f))
		if err != nil {
			continue // deleted in the working tree, not yet in the index
		}
		all += info.Size()
		nAll++
		if d.excluded(f) {
			if strings.HasSuffix(f, ".go") && !strings.HasSuffix(f, "_test.go") && !strings.HasPrefix(f, "bench/") {
				t.Errorf(".dockerignore keeps %s out of the build context; the build compiles it", f)
			}
			continue
		}
		sent += info.Size()
		nSent++
	}
	t.Logf("tracked files (a fresh clone): %d files, %.2f MB; sent: %d files, %.2f MB", nAll, float64(all)/1e6, nSent, float64(sent)/1e6)
	if sent > 16<<20 {
		t.Errorf("a fresh clone's build context is %.1f MB (over 16 MB): keep large files out with .dockerignore", float64(sent)/1e6)
	}
}
