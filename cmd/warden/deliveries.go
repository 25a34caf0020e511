package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"text/tabwriter"

	"github.com/wardenhq/warden/webhooks"
)

func runDeliveries(ctx context.Context, e env, args []string) int {
	if len(args) == 0 || (args[0] != "list" && args[0] != "retry") {
		fmt.Fprintln(e.stderr, "usage: warden deliveries list [--failed] [--limit N] [--json] | warden deliveries retry ID…")
		return exitSetting
	}
	sub := args[0]
	var failed, asJSON *bool
	var limit *int
	_, d, fs, code := openDatabase(ctx, e, "deliveries "+sub, args[1:], func(fs *flag.FlagSet) {
		if sub == "list" {
			failed = fs.Bool("failed", false, "only dead letters")
			limit = fs.Int("limit", 50, "how many, newest first")
			asJSON = fs.Bool("json", false, "print JSON")
		}
	})
	if code >= 0 {
		return code
	}
	defer d.Close()
	ib, err := webhooks.OpenInbox(ctx, d)
	if err != nil {
		return fail(e, "deliveries", err)
	}
	defer ib.Close()
	if sub == "retry" {
		ids := fs.Args()
		if len(ids) == 0 {
			fmt.Fprintln(e.stderr, "warden deliveries retry: name at least one delivery id (see 'warden deliveries list --failed')")
			return exitSetting
		}
		if err := ib.Retry(ctx, ids); err != nil {
			return fail(e, "deliveries retry", err)
		}
		fmt.Fprintf(e.stdout, "re-queued %d dead letter(s); a running warden picks them up within a second\n", len(ids))
		return exitOK
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(e.stderr, "warden deliveries list: unexpected argument %q\n", fs.Arg(0))
		return exitSetting
	}
	if *limit <= 0 || *limit > 10000 {
		fmt.Fprintln(e.stderr, "warden deliveries list: --limit must be between 1 and 10000")
		return exitSetting
	}
	recs, err := ib.List(ctx, *failed, *limit)
	if err != nil {
		return fail(e, "deliveries list", err)
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		if recs == nil {
			recs = []webhooks.Record{}
		}
		enc.Encode(recs)
		return exitOK
	}
	if len(recs) == 0 {
		if *failed {
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
