package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestMigrateCreatesEverySchema runs `warden migrate` on a new database
// twice: every component's schema is created, and a second run changes
// nothing.
func TestMigrateCreatesEverySchema(t *testing.T) {
	env := map[string]string{"WARDEN_DATABASE": "sqlite:" + filepath.Join(t.TempDir(), "w.db")}
	for i := 0; i < 2; i++ {
		var out, errb bytes.Buffer
		if code := run(context.Background(), []string{"migrate"}, mapEnv(env), &out, &errb); code != exitOK {
			t.Fatalf("migrate exited %d: %s", code, errb.String())
		}
		for _, c := range []string{"inbox v", "ledger v", "acts v", "issue_state v"} {
			if !strings.Contains(out.String(), c) {
				t.Errorf("run %d: %q lacks %s", i+1, out.String(), c)
			}
		}
	}
}
