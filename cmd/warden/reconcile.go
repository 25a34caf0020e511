package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"text/tabwriter"

	"github.com/wardenhq/warden/internal/config"
	"github.com/wardenhq/warden/internal/service"
	"github.com/wardenhq/warden/mirror"
	"github.com/wardenhq/warden/mirror/store"
)

const reconcileUsage = `usage: warden reconcile [--repo OWNER/REPO] [--dry-run] [--budget N] [--json]
Runs one reconcile pass now over every served repository (or one): reads
GitHub (the open pull requests, the issues changed since the last pass, the
checks of resumable pull requests), reports every divergence, and brings
GitHub in step (report comments, parks, check runs, the dashboard).
--dry-run reads and reports, and writes nothing to GitHub. Needs the App's
settings (WARDEN_APP_ID, its key, WARDEN_WEBHOOK_SECRET) like serve.`

func runReconcile(ctx context.Context, e env, args []string) int {
	const cmd = "reconcile"
	if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
		fmt.Fprintln(e.stdout, reconcileUsage)
		return exitOK
	}
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	load := config.Flags(fs, e.getenv)
	repoName := fs.String("repo", "", "only this repository, OWNER/REPO")
	dry := fs.Bool("dry-run", false, "read and report; write nothing to GitHub")
	budget := fs.Int("budget", 0, "at most this many GitHub requests per repository (0: the default, and a quarter of the remaining rate limit)")
	asJSON := fs.Bool("json", false, "print the passes as JSON")
	if err := fs.Parse(args); err != nil {
		return exitSetting
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(e.stderr, "warden %s: unexpected argument %q\n", cmd, fs.Arg(0))
		return exitSetting
	}
	if *repoName != "" && !cliRepoRe.MatchString(*repoName) {
		fmt.Fprintf(e.stderr, "warden %s: --repo %q is not OWNER/REPO\n", cmd, *repoName)
		return exitSetting
	}
	if *budget < 0 {
		fmt.Fprintf(e.stderr, "warden %s: --budget %d is negative\n", cmd, *budget)
		return exitSetting
	}
	s, err := load("app", "secret")
	if err != nil {
		return fail(e, cmd, err)
	}
	svc, err := service.Build(ctx, s, service.NewLogger(e.stderr, s.LogLevel), service.Options{})
	if err != nil {
		return fail(e, cmd, err)
	}
	defer svc.Close()
	o := mirror.ReconcileOptions{DryRun: *dry, Budget: *budget}
	var results []mirror.PassResult
	if *repoName != "" {
		repo, err := svc.Ledger.Repo(ctx, *repoName)
		if errors.Is(err, store.ErrNotFound) {
			return fail(e, cmd, fmt.Errorf("warden does not serve %s (install the App on it first)", *repoName))
		} else if err != nil {
			return fail(e, cmd, err)
		}
		res, err := svc.Mirror.Reconcile(ctx, repo, o)
		results = append(results, res)
		if err != nil {
			printPasses(e, results, *asJSON)
			return fail(e, cmd, err)
		}
	} else {
		results, err = svc.Mirror.ReconcileAll(ctx, o)
		if err != nil {
			printPasses(e, results, *asJSON)
			return fail(e, cmd, err)
		}
	}
	printPasses(e, results, *asJSON)
	return exitOK
}

func printPasses(e env, results []mirror.PassResult, asJSON bool) {
	if asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		enc.Encode(results)
		return
	}
	for _, r := range results {
		state := "complete"
		if !r.Complete {
			state = "stopped: " + r.Stopped
		}
		fmt.Fprintf(e.stdout, "%s: %s; %d reads (%d not modified), %d writes\n", r.Repo, state, r.Calls.Reads, r.Calls.NotModified, r.Calls.Writes)
		if r.Adopted > 0 || r.Unadopted > 0 || r.PullsRead > 0 {
			fmt.Fprintf(e.stdout, "  adoption: %d labelled issues made items in this pass, %d still to adopt; %d pull requests read that warden had not recorded\n",
				r.Adopted, r.Unadopted, r.PullsRead)
		}
		for _, a := range r.Actions {
			fmt.Fprintf(e.stdout, "  did: %s\n", a)
		}
		if len(r.Findings) == 0 {
			fmt.Fprintln(e.stdout, "  no findings")
			continue
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
		for _, d := range r.Findings {
			item := string(d.Item)
			if item == "" {
				item = "(repository)"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", d.Code, item, d.Detail)
		}
		tw.Flush()
	}
}
