package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestSettingsCheck: `warden settings check FILE` prints each problem as
// FILE:LINE: message (a suggestion for a misspelt key), exit 1; "FILE: ok"
// and exit 0 for a good file; exit 2 when the file cannot be read.
func TestSettingsCheck(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bad := write("bad.yml", "labels:\n  item: backlog\npoision_threshold: 2\nrequire_item: yes please\n")
	good := write("good.yml", "labels:\n  item: backlog\npoison_threshold: 2\nrequire_item: true\n")
	empty := write("empty.yml", "")

	code, out, errs := runCLI(nil, "settings", "check", bad)
	if code != exitFailed {
		t.Fatalf("bad file: exit %d, want 1\n%s%s", code, out, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2 {
		t.Fatalf("want a line per problem, got:\n%s", out)
	}
	lineRe := regexp.MustCompile(`^` + regexp.QuoteMeta(bad) + `:(\d+): `)
	byLine := map[string]string{}
	for _, l := range lines {
		m := lineRe.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("%q is not FILE:LINE: message", l)
			continue
		}
		byLine[m[1]] = l
	}
	if l := byLine["3"]; !strings.Contains(l, "poision_threshold") || !strings.Contains(l, "did you mean poison_threshold?") {
		t.Errorf("line 3 (the misspelt key): %q", l)
	}
	if l := byLine["4"]; !strings.Contains(l, "require_item") || strings.Count(l, "require_item") > 1 {
		t.Errorf("line 4 (the bad value), said once: %q", l)
	}
	for _, f := range []string{good, empty} {
		if code, out, errs := runCLI(nil, "settings", "check", f); code != exitOK || out != f+": ok\n" {
			t.Errorf("%s: exit %d, %q %q; want 0 and %q", f, code, out, errs, f+": ok")
		}
	}
	missing := filepath.Join(dir, "missing.yml")
	if code, _, errs := runCLI(nil, "settings", "check", missing); code != exitSetting || !strings.Contains(errs, "cannot read "+missing) ||
		strings.Count(errs, "\n") != 1 {
		t.Errorf("missing file: exit %d, %q; want 2 and one line", code, errs)
	}
}
