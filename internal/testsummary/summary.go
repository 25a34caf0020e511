package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json's TestEvent).
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string
}

// skipped is a test that skipped, with its reason.
type skipped struct {
	pkg, test, reason string
}

// summary turns a `go test -json` stream back into go test's usual output
// (a line per package; the full output of each failing test as it fails;
// build errors) and, at the end, lists every skipped test with its reason,
// which go test without -v never shows.
type summary struct {
	out     io.Writer
	pending map[string]*strings.Builder // package + "\x00" + test → output so far
	skips   []skipped
	passed  int
	failed  int
}

func newSummary(out io.Writer) *summary {
	return &summary{out: out, pending: map[string]*strings.Builder{}}
}

// feed takes one line of the stream. A line that is not an event (the go
// command's own words) is printed as it is.
func (s *summary) feed(line []byte) {
	var ev event
	if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &ev) != nil || ev.Action == "" {
		fmt.Fprintf(s.out, "%s\n", line)
		return
	}
	switch ev.Action {
	case "build-output":
		io.WriteString(s.out, ev.Output)
		return
	case "build-fail", "start":
		return
	}
	if ev.Test == "" {
		s.packageEvent(ev)
		return
	}
	key := ev.Package + "\x00" + ev.Test
	switch ev.Action {
	case "output":
		b := s.pending[key]
		if b == nil {
			b = &strings.Builder{}
			s.pending[key] = b
		}
		b.WriteString(ev.Output)
	case "pass":
		s.passed++
		delete(s.pending, key)
	case "skip":
		s.skips = append(s.skips, skipped{ev.Package, ev.Test, skipReason(s.text(key))})
		delete(s.pending, key)
	case "fail":
		s.failed++
		io.WriteString(s.out, withoutProgress(s.text(key)))
		delete(s.pending, key)
	}
}

func (s *summary) text(key string) string {
	if b := s.pending[key]; b != nil {
		return b.String()
	}
	return ""
}

// packageEvent prints a package's own lines as go test does (ok, FAIL,
// "no test files", a panic outside any test). Before a package's FAIL line,
// it prints the output of its tests that never finished (a crash, a
// timeout), as go test would have.
func (s *summary) packageEvent(ev event) {
	switch ev.Action {
	case "output":
		t := strings.TrimSpace(ev.Output)
		if t == "FAIL" || strings.HasPrefix(t, "FAIL\t") {
			s.flush(ev.Package)
		}
		if t == "PASS" || t == "FAIL" {
			return
		}
		io.WriteString(s.out, ev.Output)
	case "fail":
		s.flush(ev.Package)
	}
}

// flush prints the output of pkg's unfinished tests.
func (s *summary) flush(pkg string) {
	prefix := pkg + "\x00"
	var keys []string
	for k := range s.pending {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		io.WriteString(s.out, withoutProgress(s.pending[k].String()))
		delete(s.pending, k)
	}
}

// skipReason is what a skipped test said: its output without the
// framework's own lines (=== RUN, --- SKIP …).
func skipReason(out string) string {
	var said []string
	for _, l := range strings.Split(out, "\n") {
		t := strings.TrimSpace(l)
		switch {
		case t == "", strings.HasPrefix(t, "=== "), strings.HasPrefix(t, "--- SKIP"):
			continue
		}
		said = append(said, t)
	}
	if len(said) == 0 {
		return "(no reason given)"
	}
	return strings.Join(said, " / ")
}

// finish prints the skipped tests and the counts.
func (s *summary) finish() {
	if len(s.skips) > 0 {
		fmt.Fprintf(s.out, "\nskipped tests (%d):\n", len(s.skips))
		sort.SliceStable(s.skips, func(i, j int) bool {
			if s.skips[i].pkg != s.skips[j].pkg {
				return s.skips[i].pkg < s.skips[j].pkg
			}
			return s.skips[i].test < s.skips[j].test
		})
		for _, k := range s.skips {
			fmt.Fprintf(s.out, "  %s %s: %s\n", k.pkg, k.test, k.reason)
		}
	}
	fmt.Fprintf(s.out, "tests: %d passed, %d failed, %d skipped\n", s.passed, s.failed, len(s.skips))
}

// withoutProgress drops the lines -json adds and go test without -v never
// prints (=== RUN, PAUSE, CONT).
func withoutProgress(out string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(out, "\n") {
		if t := strings.TrimSpace(l); strings.HasPrefix(t, "=== RUN") || strings.HasPrefix(t, "=== PAUSE") || strings.HasPrefix(t, "=== CONT") {
			continue
		}
		b.WriteString(l)
	}
	return b.String()
}
