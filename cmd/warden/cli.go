package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/wardenhq/warden/internal/config"
)

// cli is one run of the command line: the commands write its exit status.
type cli struct {
	ctx  context.Context
	e    env
	code int
}

// root builds the command tree afresh (tests run many command lines in one
// process).
func (c *cli) root() *cobra.Command {
	root := &cobra.Command{
		Use:   "warden",
		Short: "warden keeps an agent-operated backlog honest (a GitHub App)",
		Long: `warden is a GitHub App that gates an agent-operated backlog: admission on a
human act, attempts counted from each issue's comment trail, poison items
parked, pull requests checked against the items they deliver, merged work
reconciled against its ledger.

Settings come from WARDEN_* environment variables; each command's help names
the ones it reads, and the flag that overrides each non-secret one.`,
		Version:       versionString(),
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetOut(c.e.stdout)
	root.SetErr(c.e.stderr)
	root.SetVersionTemplate("warden {{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return err })
	root.SetHelpCommand(c.helpCmd())
	root.AddCommand(
		c.serveCmd(),
		c.demoCmd(),
		c.migrateCmd(),
		c.backupCmd(),
		c.restoreCmd(),
		c.deliveriesCmd(),
		c.itemsCmd(),
		c.readyCmd(),
		c.reconcileCmd(),
		c.settingsCmd(),
		c.setupCmd(),
		c.versionCmd(),
	)
	return root
}

// helpCmd is `warden help [CMD…]`: CMD's help on stdout (exit 0), or a
// one-line refusal naming a command that does not exist (exit 2).
func (c *cli) helpCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		Long:  "Prints the help of any command: what it does, its flags, and the settings it reads.",
		ValidArgsFunction: func(cmd *cobra.Command, args []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
			target, _, err := cmd.Root().Find(args)
			if err != nil || target == nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			var out []cobra.Completion
			for _, sub := range target.Commands() {
				if sub.IsAvailableCommand() && strings.HasPrefix(sub.Name(), prefix) {
					out = append(out, cobra.CompletionWithDesc(sub.Name(), sub.Short))
				}
			}
			return out, cobra.ShellCompDirectiveNoFileComp
		},
	}
	documentSettings(cmd)
	cmd.RunE = c.action(func(cmd *cobra.Command, args []string) int {
		target, rest, err := cmd.Root().Find(args)
		if err != nil || target == nil || len(rest) > 0 {
			return c.usageError(cmd, "no command %q (see 'warden help')", strings.Join(args, " "))
		}
		target.InitDefaultHelpFlag()
		target.InitDefaultVersionFlag()
		if err := target.Help(); err != nil {
			return fail(c.e, "help", err)
		}
		return exitOK
	})
	return cmd
}

// action wraps a command's body; its return value is the run's exit status.
func (c *cli) action(f func(cmd *cobra.Command, args []string) int) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		c.code = f(cmd, args)
		return nil
	}
}

// group is a command that only holds subcommands: run alone, or with a
// word that is none of them, it refuses (exit 2) naming them.
func (c *cli) group(cmd *cobra.Command, subs ...*cobra.Command) *cobra.Command {
	cmd.AddCommand(subs...)
	var names []string
	for _, s := range subs {
		names = append(names, s.Name())
	}
	cmd.Args = cobra.ArbitraryArgs
	cmd.RunE = c.action(func(cmd *cobra.Command, args []string) int {
		if len(args) > 0 {
			fmt.Fprintf(c.e.stderr, "%s: unknown subcommand %q: use one of %s (see '%s --help')\n",
				cmd.CommandPath(), args[0], strings.Join(names, ", "), cmd.CommandPath())
		} else {
			fmt.Fprintf(c.e.stderr, "%s: name a subcommand: %s (see '%s --help')\n",
				cmd.CommandPath(), strings.Join(names, ", "), cmd.CommandPath())
		}
		return exitSetting
	})
	return cmd
}

// settingDoc says what each WARDEN_* setting is, for the help texts.
var settingDoc = map[string]string{
	"WARDEN_LISTEN":             "public listener: webhooks, agent API, MCP (default :8080)",
	"WARDEN_ADMIN_LISTEN":       "operators' listener: status page, metrics, profiler (default 127.0.0.1:9090)",
	"WARDEN_DATABASE":           "sqlite:PATH or a postgres:// URL (default sqlite:warden.db)",
	"WARDEN_APP_ID":             "the GitHub App's numeric id",
	"WARDEN_PRIVATE_KEY":        "the App's PEM private key, inline (\\n escapes allowed)",
	"WARDEN_PRIVATE_KEY_FILE":   "the App's PEM private key, as a file",
	"WARDEN_WEBHOOK_SECRET":     "the App's webhook secret; several, comma-separated, are all accepted",
	"WARDEN_GITHUB_API_URL":     "GitHub's REST base URL (default https://api.github.com/)",
	"WARDEN_AGENTS":             "comma-separated logins that are agents",
	"WARDEN_API_TOKENS":         "agent API and MCP tokens: name:token:role[:owner/repo+owner/repo…], comma-separated",
	"WARDEN_REGION":             "the homeRegion served here (default local)",
	"WARDEN_LEASE_DEFAULT":      "lease granted when none is asked for (default 30s)",
	"WARDEN_LEASE_MAX":          "ceiling every lease is clamped to (default 30m)",
	"WARDEN_QUARANTINE":         "how long a lapsed claim stays quarantined (default 1h)",
	"WARDEN_RECONCILE_INTERVAL": "reconcile period per repository (default 10m)",
	"WARDEN_MCP_REPOS":          "repoId=owner/repo pairs for the MCP endpoint",
	"WARDEN_LOG_LEVEL":          "debug, info, warn or error (default info)",
}

// settingFlag is the flag that overrides a setting (config.Flags's names).
var settingFlag = map[string]string{
	"WARDEN_LISTEN":           "listen",
	"WARDEN_ADMIN_LISTEN":     "admin-listen",
	"WARDEN_DATABASE":         "database",
	"WARDEN_APP_ID":           "app-id",
	"WARDEN_PRIVATE_KEY_FILE": "private-key-file",
	"WARDEN_GITHUB_API_URL":   "github-api-url",
	"WARDEN_REGION":           "region",
	"WARDEN_LOG_LEVEL":        "log-level",
}

// The settings each kind of command reads.
var (
	databaseEnv = []string{"WARDEN_DATABASE"}
	// ledgerEnv: commands that judge the ledger as the service does.
	ledgerEnv = []string{"WARDEN_DATABASE", "WARDEN_REGION", "WARDEN_AGENTS", "WARDEN_LEASE_DEFAULT", "WARDEN_LEASE_MAX", "WARDEN_QUARANTINE"}
	// appEnv: commands that build the whole service against GitHub.
	appEnv = []string{"WARDEN_DATABASE", "WARDEN_APP_ID", "WARDEN_PRIVATE_KEY", "WARDEN_PRIVATE_KEY_FILE", "WARDEN_WEBHOOK_SECRET",
		"WARDEN_GITHUB_API_URL", "WARDEN_AGENTS", "WARDEN_REGION", "WARDEN_LEASE_DEFAULT", "WARDEN_LEASE_MAX", "WARDEN_QUARANTINE",
		"WARDEN_LOG_LEVEL"}
	serveEnv = append(append([]string{"WARDEN_LISTEN", "WARDEN_ADMIN_LISTEN"}, appEnv...),
		"WARDEN_API_TOKENS", "WARDEN_MCP_REPOS", "WARDEN_RECONCILE_INTERVAL")
)

// envAnnotation is where a command records the settings it reads (the
// help test checks them against its help text).
const envAnnotation = "warden-env"

// withSettings registers the flags of the settings names on cmd, appends
// the settings to its help, and returns the loader: it reads them (flags
// first, then the environment) once the flags are parsed. Settings without
// a flag (secrets, lists, durations) are read from the environment only.
func (c *cli) withSettings(cmd *cobra.Command, names ...string) func(need ...string) (*config.Settings, error) {
	gfs := flag.NewFlagSet(cmd.Name(), flag.ContinueOnError)
	load := config.Flags(gfs, c.e.getenv)
	for _, n := range names {
		if f := settingFlag[n]; f != "" {
			cmd.Flags().AddGoFlag(gfs.Lookup(f))
		}
	}
	documentSettings(cmd, names...)
	return load
}

// documentSettings appends the settings names to cmd's help.
func documentSettings(cmd *cobra.Command, names ...string) {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[envAnnotation] = strings.Join(names, " ")
	if len(names) == 0 {
		return
	}
	var b strings.Builder
	b.WriteString(strings.TrimRight(cmd.Long, "\n"))
	b.WriteString("\n\nSettings read from the environment (a flag, where named, overrides one):\n")
	width := 0
	for _, n := range names {
		width = max(width, len(n))
	}
	for _, n := range names {
		doc := settingDoc[n]
		if f := settingFlag[n]; f != "" {
			doc += "; --" + f
		}
		fmt.Fprintf(&b, "  %-*s  %s\n", width, n, doc)
	}
	cmd.Long = strings.TrimRight(b.String(), "\n")
}

// usageError prints a usage refusal in one line (exit 2).
func (c *cli) usageError(cmd *cobra.Command, format string, a ...any) int {
	fmt.Fprintf(c.e.stderr, "%s: %s\n", cmd.CommandPath(), fmt.Sprintf(format, a...))
	return exitSetting
}

// noArgs refuses positional arguments, naming the first (cobra.NoArgs
// calls one an unknown command).
func noArgs(_ *cobra.Command, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("unexpected argument %q", args[0])
	}
	return nil
}
