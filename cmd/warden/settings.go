package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/wardenhq/warden/mirror"
)

func (c *cli) settingsCmd() *cobra.Command {
	grp := &cobra.Command{
		Use:   "settings",
		Short: "Check a repository settings file (.github/backlog.yml) offline",
		Long:  "The per-repository settings file, .github/backlog.yml, checked without GitHub or a database.",
	}
	documentSettings(grp)
	check := &cobra.Command{
		Use:     "check FILE",
		Example: `  warden settings check .github/backlog.yml`,
		Short:   "Validate a .github/backlog.yml as warden would on a push",
		Long: `Validates FILE with the same checks warden applies to a pushed
.github/backlog.yml (the backlog/settings check run), and prints each problem
as FILE:LINE: message, with a suggestion for a misspelt key. Exit status 0 and
"FILE: ok" when the file is good, 1 when it has problems, 2 when it cannot be
read.`,
	}
	documentSettings(check)
	check.RunE = c.action(func(cmd *cobra.Command, args []string) int {
		if len(args) != 1 {
			return c.usageError(cmd, "name one FILE (usage: %s)", cmd.UseLine())
		}
		return c.settingsCheck(args[0])
	})
	return c.group(grp, check)
}

func (c *cli) settingsCheck(file string) int {
	data, err := os.ReadFile(file)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		fmt.Fprintf(c.e.stderr, "warden settings check: cannot read %s: %v\n", file, err)
		return exitSetting
	}
	problems := mirror.ValidateSettingsFile(data)
	if len(problems) == 0 {
		fmt.Fprintf(c.e.stdout, "%s: ok\n", file)
		return exitOK
	}
	for _, p := range problems {
		fmt.Fprintln(c.e.stdout, settingsProblemLine(file, p))
	}
	return exitFailed
}

// settingsProblemLine is one problem as compilers print theirs:
// FILE:LINE: key: message; did you mean suggestion?
func settingsProblemLine(file string, p mirror.SettingsProblem) string {
	var b strings.Builder
	b.WriteString(file)
	if p.Line > 0 {
		fmt.Fprintf(&b, ":%d", p.Line)
	}
	b.WriteString(": ")
	if p.Key != "" {
		b.WriteString(p.Key + ": ")
	}
	b.WriteString(flatten(p.Message))
	if p.Suggestion != "" {
		b.WriteString("; did you mean " + p.Suggestion + "?")
	}
	return b.String()
}
