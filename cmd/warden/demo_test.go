package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestDemoBehaves runs `warden demo` as the README's quick start does.
func TestDemoBehaves(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"demo"}, func(string) string { return "" }, &out, &errb)
	if code != exitOK {
		t.Fatalf("demo exited %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "steps behaved") || strings.Contains(out.String(), "✗") {
		t.Fatalf("demo output:\n%s", out.String())
	}
}
