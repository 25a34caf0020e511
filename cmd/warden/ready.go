package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/agentapi"
	"github.com/wardenhq/warden/internal/config"
	"github.com/wardenhq/warden/internal/service"
	"github.com/wardenhq/warden/mirror/store"
)

func (c *cli) readyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use: "ready --repo OWNER/REPO",
		Example: `  warden ready --repo acme/app
  warden ready --repo acme/app --json | jq .ready`,
		Short: "Print a repository's ready set and defect report",
		Long: `Prints the repository's ready set (claim order), what is left out and why,
the defect report and the alarms, from the ledger (no GitHub call).`,
		Args: noArgs,
	}
	repoName := cmd.Flags().String("repo", "", "the repository, OWNER/REPO")
	asJSON := cmd.Flags().Bool("json", false, "print JSON (GET /ready's answer, all of the ready set, and the report)")
	load := c.withSettings(cmd, ledgerEnv...)
	cmd.RunE = c.action(func(cmd *cobra.Command, _ []string) int {
		switch {
		case *repoName == "":
			return c.usageError(cmd, "--repo OWNER/REPO is required")
		case !cliRepoRe.MatchString(*repoName):
			return c.usageError(cmd, "--repo %q is not OWNER/REPO", *repoName)
		}
		return c.ready(load, *repoName, *asJSON)
	})
	return cmd
}

func (c *cli) ready(load func(need ...string) (*config.Settings, error), repoName string, asJSON bool) int {
	const cmd = "ready"
	ctx, e := c.ctx, c.e
	s, d, code := openDatabase(ctx, e, cmd, load)
	if code >= 0 {
		return code
	}
	defer d.Close()
	// The records as the service assembles them: the repository's settings
	// in effect and its findings, so the CLI judges and reports as GET /ready.
	rec, err := service.OpenRecords(ctx, d, s, nil, nil, slog.New(slog.NewTextHandler(e.stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		return fail(e, cmd, err)
	}
	l := rec.Store.Ledger
	repo, err := l.Repo(ctx, repoName)
	if errors.Is(err, store.ErrNotFound) {
		return fail(e, cmd, fmt.Errorf("warden does not serve %s (the App is not installed on it, or no delivery recorded it yet)", repoName))
	}
	if err != nil {
		return fail(e, cmd, err)
	}
	rs, err := l.Snapshot(ctx, repo.ID)
	if err != nil {
		return fail(e, cmd, err)
	}
	res := rs.Ready()
	set := agentapi.ReadyOf(rs, res, 0)
	rep, err := l.Report(ctx, rs, res)
	if err != nil {
		fmt.Fprintf(e.stderr, "warden ready: the report goes without its lease-defaulted lines: %v\n", err)
	}
	if asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(struct {
			agentapi.ReadySet
			Report gating.Report `json:"report"`
		}{set, rep}); err != nil {
			return fail(e, cmd, err)
		}
		return exitOK
	}
	printReady(e.stdout, repo, set, rep)
	return exitOK
}

// printReady prints the ready set and the defect report as tables.
func printReady(w io.Writer, repo store.Repo, set agentapi.ReadySet, rep gating.Report) {
	fmt.Fprintf(w, "%s: %d items, %d ready, %d in flight, %d blocked, %d stalled, %d parked, %d awaiting admission, %d complete\n",
		repo.FullName, rep.Summary.Items, rep.Summary.Ready, rep.Summary.InFlight, rep.Summary.Blocked, rep.Summary.Stalled,
		rep.Summary.Parked, rep.Summary.AwaitingAdmission, rep.Summary.Complete)
	for _, a := range set.Alarms {
		fmt.Fprintf(w, "ALARM: %s\n", a)
	}
	fmt.Fprintln(w)
	if len(set.Ready) == 0 {
		fmt.Fprintln(w, "Ready: none")
	} else {
		fmt.Fprintln(w, "Ready (claim order):")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  #\tITEM\tPRIORITY\tPHASE\tATTEMPTS\tOVERLAPS\tTITLE")
		for i, it := range set.Ready {
			s := &gating.Item{Tags: it.Tags}
			overlaps := "-"
			if len(it.Overlaps) > 0 {
				ids := make([]string, len(it.Overlaps))
				for k, o := range it.Overlaps {
					ids[k] = string(o)
				}
				overlaps = strings.Join(ids, ",")
			}
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%d\t%s\t%s\n", i+1, it.Item, dash(it.Priority), tagOr(s, "phase", "-"), it.Attempts, overlaps, oneLine(it.Title, 60))
		}
		tw.Flush()
	}
	if len(rep.InFlight) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "In flight:")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  ITEM\tSTATE\tOWNER\tBRANCH\tLEASE UNTIL")
		for _, f := range rep.InFlight {
			state := string(f.State)
			if f.Maintenance {
				state += " (maintenance)"
			}
			if f.LeaseDefaulted {
				state += " (lease-defaulted)"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", f.Item, state, f.Owner, dash(f.Branch), store.Timestamp(f.LeaseExpiresAtUtc))
		}
		tw.Flush()
	}
	if len(rep.CleanReclaims) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Clean re-claims (a holder lapsed and came back; no attempt counted):")
		for _, c := range rep.CleanReclaims {
			fmt.Fprintf(w, "  %s  %s  fence %d -> %d at %s\n", c.Item, c.Owner, c.PriorFence, c.Fence, store.Timestamp(c.AtUtc))
		}
	}
	if len(rep.Lines) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "Report lines:")
		for _, l := range rep.Lines {
			fmt.Fprintf(w, "  %s  %s  %s\n", l.Code, dash(string(l.Item)), oneLine(l.Detail, 160))
		}
	}
	fmt.Fprintln(w)
	if len(set.Excluded) == 0 {
		fmt.Fprintln(w, "Excluded: none")
	} else {
		fmt.Fprintln(w, "Excluded:")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  ITEM\tREASON\tDETAIL")
		for _, x := range set.Excluded {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", x.Item, x.Reason, oneLine(x.Detail, 160))
		}
		tw.Flush()
	}
	fmt.Fprintln(w)
	if len(set.Defects) == 0 {
		fmt.Fprintln(w, "Defects: none")
		return
	}
	fmt.Fprintln(w, "Defects:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  CODE\tITEM\tDETAIL")
	for _, d := range set.Defects {
		item := string(d.Item)
		if item == "" {
			item = "(repository)"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", d.Code, item, oneLine(d.Detail, 160))
	}
	tw.Flush()
}
