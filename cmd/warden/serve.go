package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/wardenhq/warden/internal/config"
	"github.com/wardenhq/warden/internal/db"
	"github.com/wardenhq/warden/internal/service"
)

func runServe(ctx context.Context, e env, args []string) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	load := config.Flags(fs, e.getenv)
	if err := fs.Parse(args); err != nil {
		return exitSetting
	}
	s, err := load("app", "secret")
	if err != nil {
		return fail(e, "serve", err)
	}
	log := service.NewLogger(e.stderr, s.LogLevel)
	svc, err := service.Build(ctx, s, log, service.Options{})
	if err != nil {
		return fail(e, "serve", err)
	}
	defer svc.Close()
	if err := svc.Serve(ctx, s.Listen, s.AdminListen, nil); err != nil {
		return fail(e, "serve", err)
	}
	return exitOK
}

// openDatabase parses a database-only command's flags and opens the
// database; a non-negative code means the command must exit with it.
func openDatabase(ctx context.Context, e env, cmd string, args []string, extra func(fs *flag.FlagSet)) (*config.Settings, *db.DB, *flag.FlagSet, int) {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	load := config.Flags(fs, e.getenv)
	if extra != nil {
		extra(fs)
	}
	if err := fs.Parse(args); err != nil {
		return nil, nil, nil, exitSetting
	}
	s, err := load()
	if err != nil {
		return nil, nil, nil, fail(e, cmd, err)
	}
	d, err := db.Open(ctx, s.Database)
	if err != nil {
		return nil, nil, nil, fail(e, cmd, &config.Error{Msg: fmt.Sprintf("WARDEN_DATABASE: %v", err)})
	}
	return s, d, fs, -1
}
