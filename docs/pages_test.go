package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/wardenhq/warden/gating"
)

// routeRe is a route registered on the agent API's router.
var routeRe = regexp.MustCompile(`r\.(Get|Post|Patch|Put|Delete)\("([^"]+)"`)

// reasonRe is a reason constant.
var reasonRe = regexp.MustCompile(`(?m)^\s*Reason\w*\s*=\s*"([^"]+)"`)

func TestAgentAPIDocumented(t *testing.T) {
	doc := read(t, "agent-api.md")
	api, err := os.ReadFile(filepath.Join("..", "internal", "agentapi", "api.go"))
	if err != nil {
		t.Fatal(err)
	}
	routes := routeRe.FindAllStringSubmatch(string(api), -1)
	if len(routes) < 10 {
		t.Fatalf("found %d routes in internal/agentapi/api.go: the scan is broken", len(routes))
	}
	for _, m := range routes {
		method, path := strings.ToUpper(m[1]), m[2]
		if r := method + " " + path; !strings.Contains(doc, r) {
			t.Errorf("docs/agent-api.md does not document %s", r)
		}
		// And it shows a curl line for the route: -X METHOD unless GET,
		// the path with {id} filled in, any query after it.
		x := ""
		if method != "GET" {
			x = "-X " + method + " "
		}
		pathRe := strings.ReplaceAll(regexp.QuoteMeta(path), regexp.QuoteMeta("{id}"), `[^/"?]+`)
		curl := regexp.MustCompile(`curl -sS ` + regexp.QuoteMeta(x) + `"[^"]*` + pathRe + `(\?[^"]*)?"`)
		if !curl.MatchString(doc) {
			t.Errorf("docs/agent-api.md has no curl example of %s %s (want a line matching %s)", method, path, curl)
		}
	}
	var reasons []string
	for _, f := range []string{"internal/agentapi/problem.go", "mirror/store/types.go", "mirror/store/ledger.go"} {
		b, err := os.ReadFile(filepath.Join("..", f))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range reasonRe.FindAllStringSubmatch(string(b), -1) {
			reasons = append(reasons, m[1])
		}
	}
	for _, v := range []gating.Verdict{gating.StaleToken, gating.ClaimRequired, gating.ClaimReleased, gating.ForeignRegion, gating.UnissuedToken} {
		reasons = append(reasons, string(v))
	}
	if len(reasons) < 25 {
		t.Fatalf("found %d reasons: the scan is broken", len(reasons))
	}
	for _, r := range reasons {
		if !strings.Contains(doc, "`"+r+"`") {
			t.Errorf("docs/agent-api.md does not name the reason `%s`", r)
		}
	}
}

// fenced returns the lines of doc's fenced code blocks.
func fenced(doc string) []string {
	var out []string
	in := false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(line, "```") {
			in = !in
			continue
		}
		if in {
			out = append(out, line)
		}
	}
	return out
}

func TestMarkersDocumented(t *testing.T) {
	doc := read(t, "markers.md")
	for _, p := range []string{gating.ClaimPrefix, gating.OutcomePrefix, gating.ParkPrefix, gating.ReportPrefix} {
		if !strings.Contains(doc, "`"+p) {
			t.Errorf("docs/markers.md does not show the prefix %q", p)
		}
	}
	kinds := map[gating.MarkerKind]bool{}
	takeover := false
	for _, line := range fenced(doc) {
		if !strings.HasPrefix(line, "<!-- backlog-") {
			continue
		}
		m, st := gating.ParseMarker(line, "")
		if st != gating.MarkerValid {
			t.Errorf("docs/markers.md's example %q is not a valid marker: %s", line, m.Reason)
			continue
		}
		kinds[m.Kind] = true
		takeover = takeover || m.Takeover()
	}
	for _, k := range []gating.MarkerKind{gating.KindClaim, gating.KindOutcome, gating.KindPark, gating.KindReport} {
		if !kinds[k] {
			t.Errorf("docs/markers.md has no valid example of a %s marker", k)
		}
	}
	if !takeover {
		t.Error("docs/markers.md has no valid example of a takeover marker")
	}
}

// linkRe is a Markdown link's target.
var linkRe = regexp.MustCompile(`\]\(([^)\s]+)\)`)

func TestLinks(t *testing.T) {
	files, _ := filepath.Glob("*.md")
	files = append(files, filepath.Join("..", "README.md"))
	if len(files) < 6 {
		t.Fatalf("found %d Markdown files", len(files))
	}
	for _, f := range files {
		text := read(t, f)
		if strings.Contains(text, "../shared") {
			t.Errorf("%s points into ../shared, which a clone does not have", f)
		}
		for _, m := range linkRe.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			full := filepath.Join(filepath.Dir(f), path)
			b, err := os.ReadFile(full)
			if err != nil {
				t.Errorf("%s links to %s, which does not exist", f, target)
				continue
			}
			if anchor != "" && !slices.Contains(anchors(string(b)), anchor) {
				t.Errorf("%s links to %s: %s has no heading with that anchor", f, target, path)
			}
		}
	}
}

// anchors are the GitHub anchors of a Markdown file's headings.
func anchors(doc string) []string {
	var out []string
	for _, line := range strings.Split(doc, "\n") {
		h, ok := strings.CutPrefix(line, "#")
		if !ok {
			continue
		}
		h = strings.TrimLeft(h, "#")
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(h)) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9'):
				b.WriteRune(r)
			}
		}
		out = append(out, b.String())
	}
	return out
}
