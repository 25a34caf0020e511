package main

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/wardenhq/warden/webhooks"
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
	ib, err := webhooks.OpenInbox(ctx, d)
	if err != nil {
		return fail(e, "migrate", err)
	}
	ib.Close()
	fmt.Fprintf(e.stdout, "schema up to date in %s\n", d.Source)
	_ = s
	return exitOK
}
