package main

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/wardenhq/warden/webhooks"
)

func (c *cli) deliveriesCmd() *cobra.Command {
	grp := &cobra.Command{
		Use:   "deliveries",
		Short: "List the inbox and its dead letters, or retry dead letters",
		Long:  "The webhook inbox: every delivery warden stored, newest first, and the dead letters a running warden gave up on.",
	}
	documentSettings(grp)
	return c.group(grp, c.deliveriesListCmd(), c.deliveriesRetryCmd())
}

func (c *cli) deliveriesRetryCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use: "retry ID...",
		Example: `  warden deliveries list --failed
  warden deliveries retry 6d1f0c2e-… 9a7b…`,
		Short: "Re-queue dead letters by delivery id",
		Long: `Re-queues dead letters (see 'warden deliveries list --failed'); a running warden
picks them up within a second. All or nothing: an unknown delivery, or one
that is not a dead letter, refuses the whole call.`,
	}
	load := c.withSettings(cmd, databaseEnv...)
	cmd.RunE = c.action(func(cmd *cobra.Command, ids []string) int {
		if len(ids) == 0 {
			return c.usageError(cmd, "name at least one delivery id (see 'warden deliveries list --failed')")
		}
		_, d, code := openDatabase(c.ctx, c.e, "deliveries retry", load)
		if code >= 0 {
			return code
		}
		defer d.Close()
		ib, err := webhooks.OpenInbox(c.ctx, d)
		if err != nil {
			return fail(c.e, "deliveries retry", err)
		}
		defer ib.Close()
		if err := ib.Retry(c.ctx, ids); err != nil {
			return fail(c.e, "deliveries retry", err)
		}
		fmt.Fprintf(c.e.stdout, "re-queued %d dead letter(s); a running warden picks them up within a second\n", len(ids))
		return exitOK
	})
	return cmd
}

func (c *cli) deliveriesListCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the inbox, newest first (--failed: dead letters only)",
		Long:  "Lists the deliveries warden stored, newest first: event, target, state, tries, and the outcome or last error.",
		Args:  noArgs,
	}
	failed := cmd.Flags().Bool("failed", false, "only dead letters")
	limit := cmd.Flags().Int("limit", 50, "how many, newest first (1 to 10000)")
	asJSON := cmd.Flags().Bool("json", false, "print JSON")
	load := c.withSettings(cmd, databaseEnv...)
	cmd.RunE = c.action(func(cmd *cobra.Command, _ []string) int {
		if *limit <= 0 || *limit > 10000 {
			return c.usageError(cmd, "--limit must be between 1 and 10000")
		}
		_, d, code := openDatabase(c.ctx, c.e, "deliveries list", load)
		if code >= 0 {
			return code
		}
		defer d.Close()
		ib, err := webhooks.OpenInbox(c.ctx, d)
		if err != nil {
			return fail(c.e, "deliveries list", err)
		}
		defer ib.Close()
		return c.listDeliveries(ib, *failed, *limit, *asJSON)
	})
	return cmd
}

func (c *cli) listDeliveries(ib *webhooks.Inbox, failed bool, limit int, asJSON bool) int {
	ctx, e := c.ctx, c.e
	recs, err := ib.List(ctx, failed, limit)
	if err != nil {
		return fail(e, "deliveries list", err)
	}
	if asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if recs == nil {
			recs = []webhooks.Record{}
		}
		enc.Encode(recs)
		return exitOK
	}
	if len(recs) == 0 {
		if failed {
			fmt.Fprintln(e.stdout, "no dead letters")
		} else {
			fmt.Fprintln(e.stdout, "the inbox is empty")
		}
		return exitOK
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DELIVERY\tEVENT\tTARGET\tSTATE\tTRIES\tRECEIVED\tOUTCOME / LAST ERROR")
	for _, r := range recs {
		ev := r.Event
		if r.Action != "" {
			ev += "." + r.Action
		}
		target := r.Repo
		if r.Number > 0 {
			target += fmt.Sprintf("#%d", r.Number)
		}
		note := r.Outcome
		if r.LastError != "" {
			note = r.LastError
		}
		if len(note) > 80 {
			note = note[:77] + "..."
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.ID, ev, target, r.State, r.Attempts,
			r.ReceivedAt.Format("2006-01-02 15:04:05Z"), note)
	}
	tw.Flush()
	return exitOK
}
