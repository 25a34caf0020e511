package main

import (
	"context"
	"fmt"
	"runtime/debug"
	"strings"

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

func runVersion(_ context.Context, e env, _ []string) int {
	fmt.Fprintf(e.stdout, "warden %s\n", versionString())
	return exitOK
}

func runMigrate(ctx context.Context, e env, args []string) int {
	s, d, _, code := openDatabase(ctx, e, "migrate", args, nil)
	if code >= 0 {
		return code
	}
	defer d.Close()
	if err := service.Migrate(ctx, d, s); err != nil {
		return fail(e, "migrate", err)
	}
	var versions []string
	rows, err := d.Read.QueryContext(ctx, `SELECT component, MAX(version) FROM schema_migrations GROUP BY component ORDER BY component`)
	if err != nil {
		return fail(e, "migrate", err)
	}
	defer rows.Close()
	for rows.Next() {
		var c string
		var v int
		if err := rows.Scan(&c, &v); err != nil {
			return fail(e, "migrate", err)
		}
		versions = append(versions, fmt.Sprintf("%s v%d", c, v))
	}
	fmt.Fprintf(e.stdout, "schema up to date in %s: %s\n", d.Source, strings.Join(versions, ", "))
	return exitOK
}
