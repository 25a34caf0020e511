package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/wardenhq/warden/internal/config"
	"github.com/wardenhq/warden/internal/db"
	"github.com/wardenhq/warden/internal/service"
)

func (c *cli) serveCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the service: webhooks, agent API, MCP, status page, reconcile loop",
		Long: `Runs warden: POST /webhooks, the agent API (/api/v1), the MCP endpoint (/mcp),
/healthz and /readyz on the public listener; the status page, /metrics and
Go's profiler on the operators' listener (loopback by default). The database
is created or upgraded at start.

A SQLite database serves one warden serve at a time: a second one on the same
file is refused (warden backup and the read commands still work beside it);
PostgreSQL takes several replicas. SIGTERM, SIGINT and SIGHUP stop it
gracefully: the listeners stop accepting, acknowledgements in progress
commit, running handlers get 20 s to finish, and it exits 0.`,
		Args: noArgs,
	}
	load := c.withSettings(cmd, serveEnv...)
	cmd.RunE = c.action(func(cmd *cobra.Command, _ []string) int {
		s, err := load("app", "secret")
		if err != nil {
			return fail(c.e, "serve", err)
		}
		unlock, err := db.LockServe(s.Database)
		if err != nil {
			return fail(c.e, "serve", &config.Error{Msg: "WARDEN_DATABASE: " + err.Error()})
		}
		defer unlock()
		log := service.NewLogger(c.e.stderr, s.LogLevel)
		svc, err := service.Build(c.ctx, s, log, service.Options{})
		if err != nil {
			return fail(c.e, "serve", err)
		}
		defer svc.Close()
		if err := svc.Serve(c.ctx, s.Listen, s.AdminListen, nil); err != nil {
			return fail(c.e, "serve", err)
		}
		return exitOK
	})
	return cmd
}

// openDatabase loads the settings and opens the database of a command that
// works on an existing one: it never creates a database (a missing SQLite
// file is refused, naming what creates it). A non-negative code means the
// command must exit with it.
func openDatabase(ctx context.Context, e env, cmd string, load func(need ...string) (*config.Settings, error)) (*config.Settings, *db.DB, int) {
	s, err := load()
	if err != nil {
		return nil, nil, fail(e, cmd, err)
	}
	d, err := db.OpenExisting(ctx, s.Database)
	if err != nil {
		return nil, nil, fail(e, cmd, &config.Error{Msg: fmt.Sprintf("WARDEN_DATABASE: %v", err)})
	}
	return s, d, -1
}
