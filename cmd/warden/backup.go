package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/wardenhq/warden/internal/config"
	"github.com/wardenhq/warden/internal/db"
	"github.com/wardenhq/warden/internal/service"
)

func (c *cli) backupCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "backup FILE",
		Example: `  WARDEN_DATABASE=sqlite:/var/lib/warden/warden.db warden backup /backups/warden-$(date +%F).db`,
		Short:   "Write a consistent copy of the SQLite database to FILE while serve runs",
		Long: `Writes a consistent copy of the SQLite database to FILE while warden serve
keeps running on it: SQLite's VACUUM INTO, written to a temporary file beside
FILE and checked (integrity_check, warden's schema) before it takes FILE's
name. FILE must not exist. A PostgreSQL database is copied with pg_dump or
pg_basebackup instead.`,
	}
	load := c.withSettings(cmd, databaseEnv...)
	cmd.RunE = c.action(func(cmd *cobra.Command, args []string) int {
		s, file, code := c.fileCommand(cmd, load, args)
		if code >= 0 {
			return code
		}
		return c.backup(s, file)
	})
	return cmd
}

func (c *cli) restoreCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "restore FILE",
		Short: "Put a backup FILE in place of the SQLite database (serve stopped)",
		Long: `Puts the backup FILE in place of the SQLite database. Stop warden serve first:
a database another process has open is refused. FILE is checked
(integrity_check, warden's schema, no migration newer than this binary)
before anything is touched, and is only read; the current database is kept
as <db>.before-restore-<UTC time>. Then start warden serve: its first
reconcile pass re-reads GitHub.`,
	}
	load := c.withSettings(cmd, databaseEnv...)
	cmd.RunE = c.action(func(cmd *cobra.Command, args []string) int {
		s, file, code := c.fileCommand(cmd, load, args)
		if code >= 0 {
			return code
		}
		return c.restore(s, file)
	})
	return cmd
}

// fileCommand checks the one FILE argument of backup and restore and loads
// the settings; a non-negative code means the command must exit with it.
func (c *cli) fileCommand(cmd *cobra.Command, load func(need ...string) (*config.Settings, error), args []string) (*config.Settings, string, int) {
	if len(args) != 1 {
		return nil, "", c.usageError(cmd, "name one FILE (usage: %s)", cmd.UseLine())
	}
	s, err := load()
	if err != nil {
		return nil, "", fail(c.e, cmd.Name(), err)
	}
	return s, args[0], -1
}

// settingError makes a refusal that is about WARDEN_DATABASE (PostgreSQL,
// no such file) a setting error: exit status 2, nothing was started.
func settingError(err error) error {
	if errors.Is(err, db.ErrNoDatabase) || errors.Is(err, db.ErrPostgresCopy) || errors.Is(err, db.ErrUnsupported) {
		return &config.Error{Msg: "WARDEN_DATABASE: " + err.Error()}
	}
	return err
}

func (c *cli) backup(s *config.Settings, file string) int {
	const cmd = "backup"
	ctx, e := c.ctx, c.e
	info, err := db.Backup(ctx, s.Database, file)
	if err != nil {
		return fail(e, cmd, settingError(err))
	}
	fmt.Fprintf(e.stdout, "wrote %s: %s, a copy of %s checked sound; schema %s\n",
		info.Path, size(info.Size), strings.TrimPrefix(s.Database, "sqlite:"), versionList(info.Versions))
	return exitOK
}

func (c *cli) restore(s *config.Settings, file string) int {
	const cmd = "restore"
	ctx, e := c.ctx, c.e
	if _, err := db.SQLiteFile(s.Database, cmd); err != nil {
		return fail(e, cmd, settingError(err))
	}
	// Hold serve's lock meanwhile: a warden serve running on the database
	// is refused here, and none can start while the file is replaced.
	unlock, err := db.LockServe(s.Database)
	if err != nil {
		return fail(e, cmd, fmt.Errorf("%w: %v", db.ErrInUse, err))
	}
	defer unlock()
	known, err := knownSchema(ctx, s)
	if err != nil {
		return fail(e, cmd, err)
	}
	var written string
	if st, err := os.Stat(file); err == nil {
		written = ", written " + st.ModTime().UTC().Format("2006-01-02 15:04 UTC")
	}
	info, err := db.Restore(ctx, s.Database, file, known, time.Now())
	if err != nil {
		return fail(e, cmd, settingError(err))
	}
	fmt.Fprintf(e.stdout, "restored %s from %s%s; schema %s\n", info.Database, file, written, versionList(info.Versions))
	if info.Aside != "" {
		fmt.Fprintf(e.stdout, "the previous database is at %s (remove it once warden runs well on the restored one)\n", info.Aside)
	} else {
		fmt.Fprintf(e.stdout, "there was no database at %s before\n", info.Database)
	}
	if len(info.Older) > 0 {
		fmt.Fprintf(e.stdout, "warden serve upgrades the schema at start: %s\n", strings.Join(info.Older, ", "))
	}
	fmt.Fprintln(e.stdout, "next: start warden serve. Its catch-up asks GitHub again for the deliveries that failed in the last 3 days,")
	fmt.Fprintln(e.stdout, "and its first reconcile pass re-reads every served repository's issues and pull requests and converges")
	fmt.Fprintln(e.stdout, "with them (or run warden reconcile now). README.md, \"Backups\", says what that recovers and what it cannot.")
	return exitOK
}

// knownSchema is the newest migration step of every component this binary
// has, read from a scratch database it migrates the way serve does (the
// steps live with their components; this keeps restore in step with them).
func knownSchema(ctx context.Context, s *config.Settings) (map[string]int, error) {
	dir, err := os.MkdirTemp("", "warden-schema-*")
	if err != nil {
		return nil, fmt.Errorf("read this warden's schema: %w", err)
	}
	defer os.RemoveAll(dir)
	d, err := db.Open(ctx, "sqlite:"+filepath.Join(dir, "schema.db"))
	if err != nil {
		return nil, fmt.Errorf("read this warden's schema: %w", err)
	}
	defer d.Close()
	if err := service.Migrate(ctx, d, s); err != nil {
		return nil, fmt.Errorf("read this warden's schema: %w", err)
	}
	rows, err := d.Read.QueryContext(ctx, `SELECT component, MAX(version) FROM schema_migrations GROUP BY component`)
	if err != nil {
		return nil, fmt.Errorf("read this warden's schema: %w", err)
	}
	defer rows.Close()
	known := map[string]int{}
	for rows.Next() {
		var c string
		var v int
		if err := rows.Scan(&c, &v); err != nil {
			return nil, fmt.Errorf("read this warden's schema: %w", err)
		}
		known[c] = v
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read this warden's schema: %w", err)
	}
	return known, nil
}

func versionList(vs []db.SchemaVersion) string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.String()
	}
	return strings.Join(out, ", ")
}

// size is n bytes for people: "12.3 MiB (12897484 bytes)".
func size(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d bytes", n)
	}
	v, u := float64(n), ""
	for _, name := range []string{"KiB", "MiB", "GiB", "TiB"} {
		v /= unit
		u = name
		if v < unit {
			break
		}
	}
	return fmt.Sprintf("%.1f %s (%d bytes)", v, u, n)
}
