// Command warden is the one binary of warden, the GitHub App that keeps an
// agent-operated backlog honest: it runs the service, the demo, migrations,
// one-off reconcile passes and the operators' inbox tools.
//
// Every command is a cobra command (cli.go): a one-line description, only
// its own flags, the environment settings it reads in its help, --help on
// stdout with exit status 0, `warden help CMD` and shell completion.
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

// stopSignals end every command gracefully. SIGHUP stops like SIGTERM: a
// terminal closed under `warden serve` (or a supervisor's hang-up) shuts it
// down cleanly instead of killing it; warden reloads nothing on it (its
// per-repository settings are re-read from GitHub as they change).
var stopSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), stopSignals...)
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

// run runs the command line args and returns its exit status.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	c := &cli{ctx: ctx, e: env{getenv: getenv, stdout: stdout, stderr: stderr}, code: exitOK}
	root := c.root()
	root.SetArgs(args)
	if len(args) == 0 {
		root.InitDefaultHelpCmd()
		root.InitDefaultCompletionCmd()
		root.SetOut(stderr)
		root.Usage()
		return exitSetting
	}
	cmd, err := root.ExecuteC()
	if err != nil {
		name := "warden"
		if cmd != nil {
			name = cmd.CommandPath()
		}
		fmt.Fprintf(stderr, "%s: %s (see '%s --help')\n", name, oneLine(err.Error(), 400), name)
		return exitSetting
	}
	return c.code
}

// fail prints one line for a setting error (exit 2) or a failure (exit 1).
func fail(e env, cmd string, err error) int {
	fmt.Fprintf(e.stderr, "warden %s: %s\n", cmd, flatten(err.Error()))
	var se *config.Error
	if errors.As(err, &se) {
		return exitSetting
	}
	return exitFailed
}

// flatten makes a message one line: drivers (pgx naming each address it
// tried) and joined errors break theirs over several.
func flatten(msg string) string { return config.OneLine(msg) }
