package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/wardenhq/warden/internal/service"
)

// helpCases are every command with the flags and the settings its help
// must list, written out here (not read from the commands) so that a flag
// or a setting that moves shows up.
var helpCases = []struct {
	path  string
	flags []string
	env   []string
}{
	{"serve", []string{"listen", "admin-listen", "database", "app-id", "private-key-file", "github-api-url", "region", "log-level"},
		[]string{"WARDEN_WEBHOOK_SECRET", "WARDEN_API_TOKENS", "WARDEN_PRIVATE_KEY", "WARDEN_AGENTS", "WARDEN_MCP_REPOS", "WARDEN_RECONCILE_INTERVAL",
			"WARDEN_LEASE_DEFAULT", "WARDEN_LEASE_MAX", "WARDEN_QUARANTINE", "WARDEN_LISTEN", "WARDEN_DATABASE"}},
	{"demo", []string{"verbose", "serve"}, nil},
	{"migrate", []string{"database"}, []string{"WARDEN_DATABASE"}},
	{"backup", []string{"database"}, []string{"WARDEN_DATABASE"}},
	{"restore", []string{"database"}, []string{"WARDEN_DATABASE"}},
	{"deliveries", nil, nil},
	{"deliveries list", []string{"failed", "limit", "json", "database"}, []string{"WARDEN_DATABASE"}},
	{"deliveries retry", []string{"database"}, []string{"WARDEN_DATABASE"}},
	{"items", nil, nil},
	{"items list", []string{"repo", "json", "database", "region"}, []string{"WARDEN_DATABASE", "WARDEN_AGENTS", "WARDEN_LEASE_DEFAULT"}},
	{"items show", []string{"repo", "json", "database", "region"}, []string{"WARDEN_DATABASE", "WARDEN_AGENTS"}},
	{"items claim", []string{"repo", "json", "owner", "lease", "wait", "branch", "maintenance", "database", "region"},
		[]string{"WARDEN_DATABASE", "WARDEN_LEASE_DEFAULT", "WARDEN_LEASE_MAX"}},
	{"items release", []string{"repo", "json", "token", "database", "region"}, []string{"WARDEN_DATABASE"}},
	{"ready", []string{"repo", "json", "database", "region"}, []string{"WARDEN_DATABASE", "WARDEN_AGENTS", "WARDEN_QUARANTINE"}},
	{"reconcile", []string{"repo", "dry-run", "budget", "json", "database", "app-id", "private-key-file", "github-api-url", "region", "log-level"},
		[]string{"WARDEN_WEBHOOK_SECRET", "WARDEN_PRIVATE_KEY", "WARDEN_APP_ID", "WARDEN_AGENTS"}},
	{"settings", nil, nil},
	{"settings check", nil, nil},
	{"setup", []string{"org", "github", "github-api-url", "out", "listen", "webhook-url", "manifest", "timeout"}, []string{"WARDEN_GITHUB_API_URL"}},
	{"version", nil, nil},
	{"help", nil, nil},
	{"completion bash", []string{"no-descriptions"}, nil},
}

var helpFlagRe = regexp.MustCompile(`(?m)^[ \t]+(?:-\w, )?--([a-z][a-z0-9-]*)`)

// TestEveryCommandsHelp: `--help` and `help CMD` print on stdout and exit
// 0; the help has a one-line description, names each setting the command
// reads, and lists its own flags and no others.
func TestEveryCommandsHelp(t *testing.T) {
	for _, c := range helpCases {
		t.Run(c.path, func(t *testing.T) {
			args := strings.Fields(c.path)
			for _, form := range [][]string{append(slices.Clone(args), "--help"), append([]string{"help"}, args...)} {
				var out, errb bytes.Buffer
				code := run(context.Background(), form, func(string) string { return "" }, &out, &errb)
				if code != exitOK || errb.Len() > 0 || out.Len() == 0 {
					t.Fatalf("%v: exit %d, stdout %d bytes, stderr %q; want 0, help on stdout, nothing on stderr", form, code, out.Len(), errb.String())
				}
				help := out.String()
				if !strings.Contains(help, "warden "+c.path) {
					t.Errorf("%v: the help has no usage line for %q:\n%s", form, c.path, help)
				}
				var got []string
				for _, m := range helpFlagRe.FindAllStringSubmatch(help, -1) {
					if m[1] != "help" {
						got = append(got, m[1])
					}
				}
				slices.Sort(got)
				want := slices.Clone(c.flags)
				slices.Sort(want)
				if !slices.Equal(got, want) {
					t.Errorf("%v: flags %v, want %v", form, got, want)
				}
				for _, env := range c.env {
					if !strings.Contains(help, env) {
						t.Errorf("%v: the help does not name %s", form, env)
					}
				}
			}
		})
	}
}

// TestEveryCommandIsCoveredAndDescribed walks the command tree: each
// command has a one-line description and a help case above, and records
// settings that are all documented.
func TestEveryCommandIsCoveredAndDescribed(t *testing.T) {
	c := &cli{ctx: context.Background(), e: env{getenv: func(string) string { return "" }, stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}}
	root := c.root()
	covered := map[string]bool{}
	for _, h := range helpCases {
		covered[h.path] = true
	}
	var walk func(cmd *cobra.Command)
	n := 0
	walk = func(cmd *cobra.Command) {
		for _, sub := range cmd.Commands() {
			path := strings.TrimPrefix(sub.CommandPath(), "warden ")
			n++
			if sub.Short == "" || strings.Contains(sub.Short, "\n") {
				t.Errorf("%s: the description %q is not one line", path, sub.Short)
			}
			if !covered[path] {
				t.Errorf("%s has no case in helpCases", path)
			}
			for _, env := range strings.Fields(sub.Annotations[envAnnotation]) {
				if settingDoc[env] == "" {
					t.Errorf("%s reads %s, which settingDoc does not describe", path, env)
				}
			}
			walk(sub)
		}
	}
	walk(root)
	if n < 18 {
		t.Fatalf("walked %d commands; the tree is not built", n)
	}
}

// TestCompletionScripts: `warden completion SHELL` prints a script for each
// shell, naming the commands.
func TestCompletionScripts(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish"} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), []string{"completion", shell}, func(string) string { return "" }, &out, &errb); code != exitOK {
			t.Fatalf("completion %s: exit %d %s", shell, code, errb.String())
		}
		if !strings.Contains(out.String(), "warden") || out.Len() < 500 {
			t.Errorf("completion %s: %d bytes, no script", shell, out.Len())
		}
	}
	// Completion of the command names, as the shells ask for it.
	var out bytes.Buffer
	run(context.Background(), []string{"__complete", "re"}, func(string) string { return "" }, &out, &bytes.Buffer{})
	for _, want := range []string{"ready", "reconcile", "restore"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("completing %q offers %q, want %s in it", "re", out.String(), want)
		}
	}
}

// TestUsageErrors: usage mistakes exit 2 with one line on stderr naming
// the mistake.
func TestUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{nil, "Available Commands"},
		{[]string{"nosuch"}, `unknown command "nosuch"`},
		{[]string{"serve", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"migrate", "--listen", ":1"}, "unknown flag: --listen"},
		{[]string{"serve", "extra"}, `unexpected argument "extra"`},
		{[]string{"deliveries"}, "name a subcommand"},
		{[]string{"settings", "check"}, "name one FILE"},
		{[]string{"help", "nosuch"}, `no command "nosuch"`},
		{[]string{"help", "items", "nope"}, `no command "items nope"`},
	}
	for _, c := range cases {
		var out, errb bytes.Buffer
		code := run(context.Background(), c.args, func(string) string { return "" }, &out, &errb)
		if code != exitSetting || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errb.String(), c.want)
		}
		if len(c.args) > 0 && strings.Count(errb.String(), "\n") != 1 {
			t.Errorf("%v: %q is not one line", c.args, errb.String())
		}
	}
}

// TestLogDurationsAreSeconds: warden's logger writes a duration as float
// seconds.
func TestLogDurationsAreSeconds(t *testing.T) {
	var b bytes.Buffer
	log := service.NewLogger(&b, "info")
	log.Info("waited", "wait", 269076773*time.Nanosecond, slog.Group("g", "took", 1500*time.Millisecond), "n", 3)
	var got map[string]any
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, b.String())
	}
	if got["wait"] != 0.269076773 {
		t.Errorf("wait logged as %v, want 0.269076773 (seconds): %s", got["wait"], b.String())
	}
	if g, _ := got["g"].(map[string]any); g["took"] != 1.5 {
		t.Errorf("a grouped duration logged as %v, want 1.5: %s", got["g"], b.String())
	}
	if got["n"] != 3.0 {
		t.Errorf("a number that is no duration changed: %v", got["n"])
	}
}
