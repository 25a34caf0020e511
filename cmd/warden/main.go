// Command warden is the one binary of warden, the GitHub App that keeps an
// agent-operated backlog honest: it runs the service, the demo, migrations,
// one-off reconcile passes and the operators' inbox tools.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/wardenhq/warden/internal/config"
)

// Exit statuses.
const (
	exitOK      = 0
	exitFailed  = 1 // the command ran and failed
	exitSetting = 2 // bad usage or settings: nothing was started
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// env bundles what a command reads from its process, so tests can run
// commands in-process.
type env struct {
	getenv func(string) string
	stdout io.Writer
	stderr io.Writer
}

type command struct {
	name    string
	summary string
	run     func(ctx context.Context, e env, args []string) int
}

func commands() []command {
	return []command{
		{"serve", "run the service: webhooks, agent API, status page, reconcile loop", runServe},
		{"demo", "run the whole service against the built-in GitHub simulator and a scripted backlog", runDemo},
		{"migrate", "create or upgrade the database schema", runMigrate},
		{"backup", "write a consistent copy of the SQLite database to FILE while serve runs", runBackup},
		{"restore", "put a backup FILE in place of the SQLite database (serve stopped)", runRestore},
		{"deliveries", "list the inbox and its dead letters, or retry dead letters", runDeliveries},
		{"items", "list, show, claim or release backlog items in the ledger", runItems},
		{"ready", "print a repository's ready set and defect report", runReady},
		{"reconcile", "run one reconcile pass now (--dry-run: report, write nothing)", runReconcile},
		{"setup", "create the GitHub App from app.yml (the manifest flow) and store its credentials", runSetup},
		{"version", "print the version", runVersion},
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	e := env{getenv: getenv, stdout: stdout, stderr: stderr}
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		if len(args) == 0 {
			return exitSetting
		}
		return exitOK
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, e, args[1:])
		}
	}
	fmt.Fprintf(stderr, "warden: unknown command %q (run 'warden help')\n", args[0])
	return exitSetting
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: warden <command> [flags]")
	fmt.Fprintln(w)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-11s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Settings come from WARDEN_* environment variables (see README.md); 'warden <command> -h' lists flags.")
}

// fail prints one line for a setting error (exit 2) or a failure (exit 1).
func fail(e env, cmd string, err error) int {
	fmt.Fprintf(e.stderr, "warden %s: %v\n", cmd, err)
	var se *config.Error
	if errors.As(err, &se) {
		return exitSetting
	}
	return exitFailed
}
