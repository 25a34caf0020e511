package main

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/wardenhq/warden/internal/config"
	"github.com/wardenhq/warden/internal/db"
	"github.com/wardenhq/warden/internal/service"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = ""

func versionString() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		rev, dirty := "", false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if rev != "" {
			if len(rev) > 12 {
				rev = rev[:12]
			}
			if dirty {
				rev += "-dirty"
			}
			return "dev+" + rev
		}
		if bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			return bi.Main.Version
		}
	}
	return "dev"
}

func (c *cli) versionCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print warden's version",
		Long:  "Prints warden's version: the release it was built as, or dev+COMMIT for a build from a checkout.",
		Args:  noArgs,
	}
	documentSettings(cmd)
	cmd.RunE = c.action(func(*cobra.Command, []string) int {
		fmt.Fprintf(c.e.stdout, "warden %s\n", versionString())
		return exitOK
	})
	return cmd
}

func (c *cli) migrateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Create or upgrade the database schema",
		Long: `Creates the database if there is none, or upgrades its schema to this
binary's, and prints each component's schema version. warden serve does the
same at start; run migrate to upgrade ahead of a deployment.`,
		Args: noArgs,
	}
	load := c.withSettings(cmd, databaseEnv...)
	cmd.RunE = c.action(func(*cobra.Command, []string) int {
		s, err := load()
		if err != nil {
			return fail(c.e, "migrate", err)
		}
		d, err := db.Open(c.ctx, s.Database)
		if err != nil {
			return fail(c.e, "migrate", &config.Error{Msg: fmt.Sprintf("WARDEN_DATABASE: %v", err)})
		}
		defer d.Close()
		if err := service.Migrate(c.ctx, d, s); err != nil {
			return fail(c.e, "migrate", err)
		}
		var versions []string
		rows, err := d.Read.QueryContext(c.ctx, `SELECT component, MAX(version) FROM schema_migrations GROUP BY component ORDER BY component`)
		if err != nil {
			return fail(c.e, "migrate", err)
		}
		defer rows.Close()
		for rows.Next() {
			var comp string
			var v int
			if err := rows.Scan(&comp, &v); err != nil {
				return fail(c.e, "migrate", err)
			}
			versions = append(versions, fmt.Sprintf("%s v%d", comp, v))
		}
		if err := rows.Err(); err != nil {
			return fail(c.e, "migrate", err)
		}
		fmt.Fprintf(c.e.stdout, "schema up to date in %s: %s\n", d.Source, strings.Join(versions, ", "))
		return exitOK
	})
	return cmd
}
