package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/wardenhq/warden/internal/config"
	"github.com/wardenhq/warden/internal/service"
	"github.com/wardenhq/warden/mirror"
	"github.com/wardenhq/warden/mirror/store"
)

func (c *cli) reconcileCmd() *cobra.Command {
	const name = "reconcile"
	cmd := &cobra.Command{
		Use: "reconcile",
		Example: `  warden reconcile --repo acme/app --dry-run
  warden reconcile --budget 200`,
		Short: "Run one reconcile pass now (--dry-run: report, write nothing)",
		Long: `Runs one reconcile pass now over every served repository (or one): reads
GitHub (the open pull requests, the issues changed since the last pass, the
checks of resumable pull requests), reports every divergence, and brings
GitHub in step (report comments, parks, check runs, the dashboard).
--dry-run reads and reports, writes nothing to GitHub, and lists what it would
have written. Needs the App's settings like serve.`,
		Args: noArgs,
	}
	repoName := cmd.Flags().String("repo", "", "only this repository, OWNER/REPO")
	dry := cmd.Flags().Bool("dry-run", false, "read and report; write nothing to GitHub")
	budget := cmd.Flags().Int("budget", 0, "at most this many GitHub requests per repository (0: the default, and a quarter of the remaining rate limit)")
	asJSON := cmd.Flags().Bool("json", false, "print the passes as JSON")
	load := c.withSettings(cmd, appEnv...)
	cmd.RunE = c.action(func(cmd *cobra.Command, _ []string) int {
		if *repoName != "" && !cliRepoRe.MatchString(*repoName) {
			return c.usageError(cmd, "--repo %q is not OWNER/REPO", *repoName)
		}
		if *budget < 0 {
			return c.usageError(cmd, "--budget %d is negative", *budget)
		}
		return c.reconcile(name, load, *repoName, mirror.ReconcileOptions{DryRun: *dry, Budget: *budget}, *asJSON)
	})
	return cmd
}

func (c *cli) reconcile(cmd string, load func(need ...string) (*config.Settings, error), repoName string, o mirror.ReconcileOptions, asJSON bool) int {
	ctx, e := c.ctx, c.e
	s, err := load("app", "secret")
	if err != nil {
		return fail(e, cmd, err)
	}
	svc, err := service.Build(ctx, s, service.NewLogger(e.stderr, s.LogLevel), service.Options{})
	if err != nil {
		return fail(e, cmd, err)
	}
	defer svc.Close()
	var results []mirror.PassResult
	if repoName != "" {
		repo, err := svc.Ledger.Repo(ctx, repoName)
		if errors.Is(err, store.ErrNotFound) {
			return fail(e, cmd, fmt.Errorf("warden does not serve %s (install the App on it first)", repoName))
		} else if err != nil {
			return fail(e, cmd, err)
		}
		res, err := svc.Mirror.Reconcile(ctx, repo, o)
		results = append(results, res)
		if err != nil {
			printPasses(e, results, o.DryRun, asJSON, err)
			return fail(e, cmd, err)
		}
	} else {
		results, err = svc.Mirror.ReconcileAll(ctx, o)
		if err != nil {
			printPasses(e, results, o.DryRun, asJSON, err)
			return fail(e, cmd, err)
		}
	}
	printPasses(e, results, o.DryRun, asJSON, nil)
	return exitOK
}

// printPasses prints each pass. A dry run's writes are 0 by construction;
// what it would have written is counted apart ("would write N"). A pass that
// failed says why, and says nothing of findings it never derived.
func printPasses(e env, results []mirror.PassResult, dry, asJSON bool, passErr error) {
	if asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		enc.Encode(results)
		return
	}
	for _, r := range results {
		failed := !r.Complete && r.Stopped == ""
		state := "complete"
		switch {
		case failed:
			state = "failed: " + passFailure(r.Repo, passErr)
		case !r.Complete:
			state = "stopped: " + r.Stopped
		}
		writes := fmt.Sprintf("%d writes", r.Calls.Writes)
		if dry {
			writes = "0 writes (dry run)"
			if n := plannedWrites(r); n > 0 {
				writes = fmt.Sprintf("0 writes (dry run; would write %d, listed below)", n)
			}
		}
		fmt.Fprintf(e.stdout, "%s: %s; %d reads (%d not modified), %s\n", r.Repo, state, r.Calls.Reads, r.Calls.NotModified, writes)
		if r.Adopted > 0 || r.Unadopted > 0 || r.PullsRead > 0 {
			fmt.Fprintf(e.stdout, "  adoption: %d labelled issues made items in this pass, %d still to adopt; %d pull requests read that warden had not recorded\n",
				r.Adopted, r.Unadopted, r.PullsRead)
		}
		for _, a := range r.Actions {
			verb := "did"
			if rest, ok := strings.CutPrefix(a, "would "); ok {
				verb, a = "would", rest
			}
			fmt.Fprintf(e.stdout, "  %s: %s\n", verb, a)
		}
		if failed && len(r.Findings) == 0 {
			fmt.Fprintln(e.stdout, "  findings not derived: the pass did not finish")
			continue
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

// plannedWrites counts what a dry run would have written to GitHub: its
// "would …" actions.
func plannedWrites(r mirror.PassResult) int {
	n := 0
	for _, a := range r.Actions {
		if strings.HasPrefix(a, "would ") {
			n++
		}
	}
	return n
}

// passFailure is why the pass over repo failed: the error naming repo among
// those a run of passes returned, else all of them.
func passFailure(repo string, err error) string {
	if err == nil {
		return "no reason given"
	}
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	for _, e := range errs {
		if strings.Contains(e.Error(), repo) {
			return flatten(e.Error())
		}
	}
	return flatten(err.Error())
}
