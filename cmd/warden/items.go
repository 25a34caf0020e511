package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/internal/agentapi"
	"github.com/wardenhq/warden/internal/config"
	"github.com/wardenhq/warden/internal/service"
	"github.com/wardenhq/warden/mirror/store"
)

// itemsOpts are the flags of `warden items`.
type itemsOpts struct {
	repo        string
	asJSON      bool
	owner       string
	lease       time.Duration
	wait        time.Duration
	branch      string
	maintenance bool
	token       int64
}

var cliRepoRe = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}$`)

// cliActor is who the CLI acts as: a person at a maintainer's terminal.
var cliActor = store.Actor{Role: gating.RoleHuman, Name: "cli"}

func (c *cli) itemsCmd() *cobra.Command {
	grp := &cobra.Command{
		Use:   "items",
		Short: "List, show, claim or release backlog items in the ledger",
		Long: `The ledger from the command line. ID is issue-N (or N). The CLI acts on the
ledger directly, as a human named "cli", and makes no GitHub call.`,
	}
	documentSettings(grp)
	return c.group(grp,
		c.itemsSub("list", "list --repo OWNER/REPO", "List a repository's items: priority, phase, state, claim, title", noArgs),
		c.itemsSub("show", "show --repo OWNER/REPO ID", "Show one item: tags, links, attempts, claim, grant log, body", cobra.ArbitraryArgs),
		c.itemsSub("claim", "claim --repo OWNER/REPO ID --owner OWNER", "Claim an item (a fenced, leased claim)", cobra.ArbitraryArgs),
		c.itemsSub("release", "release --repo OWNER/REPO ID --token N", "Release a claim by its fencing token", cobra.ArbitraryArgs),
	)
}

// itemsSub is one `warden items` subcommand with its own flags.
func (c *cli) itemsSub(sub, use, short string, args cobra.PositionalArgs) *cobra.Command {
	cmd := &cobra.Command{Use: use, Short: short, Long: short + ".", Args: args}
	var o itemsOpts
	fs := cmd.Flags()
	fs.StringVar(&o.repo, "repo", "", "the repository, OWNER/REPO")
	fs.BoolVar(&o.asJSON, "json", false, "print JSON")
	switch sub {
	case "claim":
		fs.StringVar(&o.owner, "owner", "", "who holds the claim, e.g. alice/cli")
		fs.DurationVar(&o.lease, "lease", 0, "lease length (default WARDEN_LEASE_DEFAULT; clamped to WARDEN_LEASE_MAX)")
		fs.DurationVar(&o.wait, "wait", 0, "wait up to this long (at most 60s) for a held claim to be released")
		fs.StringVar(&o.branch, "branch", "", "the working branch of the claim")
		fs.BoolVar(&o.maintenance, "maintenance", false, "a maintenance claim: skips readiness, counts as no attempt")
	case "release":
		fs.Int64Var(&o.token, "token", 0, "the fencing token of the claim to release")
	}
	load := c.withSettings(cmd, ledgerEnv...)
	cmd.RunE = c.action(func(cmd *cobra.Command, pos []string) int {
		return c.runItems(cmd, sub, o, pos, load)
	})
	return cmd
}

func (c *cli) runItems(cobraCmd *cobra.Command, sub string, o itemsOpts, pos []string, load func(need ...string) (*config.Settings, error)) int {
	ctx, e, cmd := c.ctx, c.e, "items "+sub
	usage := func(format string, a ...any) int { return c.usageError(cobraCmd, format, a...) }
	if o.repo == "" {
		return usage("--repo OWNER/REPO is required")
	}
	if !cliRepoRe.MatchString(o.repo) {
		return usage("--repo %q is not OWNER/REPO", o.repo)
	}
	var id gating.ItemID
	switch {
	case sub == "list" && len(pos) > 0:
		return usage("unexpected argument %q", pos[0])
	case sub != "list" && len(pos) != 1:
		return usage("name one item, as issue-N")
	case sub != "list":
		n, err := parseItemArg(pos[0])
		if err != nil {
			return usage("%v", err)
		}
		id = gating.IDFor(n)
	}
	switch sub {
	case "claim":
		if o.owner == "" {
			return usage("--owner is required (who holds the claim, e.g. alice/cli)")
		}
		if o.lease < 0 {
			return usage("--lease must be positive")
		}
		if o.wait < 0 || o.wait > gating.MaxWait {
			return usage("--wait must be from 0s to %s", gating.MaxWait)
		}
	case "release":
		if o.token <= 0 {
			return usage("--token N is required (the fencing token the claim returned)")
		}
	}

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
	repo, err := l.Repo(ctx, o.repo)
	if errors.Is(err, store.ErrNotFound) {
		return fail(e, cmd, fmt.Errorf("warden does not serve %s (the App is not installed on it, or no delivery recorded it yet)", o.repo))
	}
	if err != nil {
		return fail(e, cmd, err)
	}
	ic := itemsCmd{e: e, cmd: cmd, l: l, repo: repo, o: o}
	switch sub {
	case "list":
		return ic.list(ctx)
	case "show":
		return ic.show(ctx, id)
	case "claim":
		return ic.claim(ctx, id)
	default:
		return ic.release(ctx, id)
	}
}

// parseItemArg reads issue-N, #N or N.
func parseItemArg(s string) (int, error) {
	if v, ok := strings.CutPrefix(s, "#"); ok {
		s = v
	}
	if _, err := strconv.Atoi(s); err == nil {
		s = "issue-" + s
	}
	n, err := gating.ParseID(s)
	if err != nil {
		return 0, err
	}
	return n, nil
}

type itemsCmd struct {
	e    env
	cmd  string
	l    *store.Ledger
	repo store.Repo
	o    itemsOpts
}

// refused prints a refusal from the ledger in one line (exit 1).
func (c itemsCmd) refused(err error) int {
	var ref *gating.Refusal
	var fe *store.FenceError
	switch {
	case errors.As(err, &ref):
		err = fmt.Errorf("refused (%s): %s", ref.Reason, ref.Detail)
	case errors.As(err, &fe):
		err = fmt.Errorf("refused (%s): %v", fe.Verdict, fe)
	case errors.Is(err, store.ErrNotFound):
		err = fmt.Errorf("no such item in %s", c.repo.FullName)
	}
	return fail(c.e, c.cmd, err)
}

func (c itemsCmd) printJSON(v any) {
	enc := json.NewEncoder(c.e.stdout)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

func (c itemsCmd) list(ctx context.Context) int {
	var items []store.Item
	for after := 0; ; {
		page, err := c.l.List(ctx, c.repo.ID, after, 1000)
		if err != nil {
			return c.refused(err)
		}
		if len(page) == 0 {
			break
		}
		items = append(items, page...)
		after = page[len(page)-1].ID.Number()
	}
	if c.o.asJSON {
		out := make([]agentapi.ItemView, 0, len(items))
		for _, it := range items {
			out = append(out, agentapi.ViewOf(it))
		}
		c.printJSON(out)
		return exitOK
	}
	if len(items) == 0 {
		fmt.Fprintf(c.e.stdout, "%s has no backlog items\n", c.repo.FullName)
		return exitOK
	}
	tw := tabwriter.NewWriter(c.e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ITEM\tPRIORITY\tPHASE\tSTATE\tCLAIM\tTITLE")
	now := time.Now()
	for _, it := range items {
		s := it.Snapshot()
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", it.ID, tagOr(s, "priority", "-"), tagOr(s, "phase", "-"), tagOr(s, "state", "live"),
			claimSummary(it, now), oneLine(it.Title, 60))
	}
	tw.Flush()
	return exitOK
}

func tagOr(s *gating.Item, prefix, def string) string {
	if v, ok := s.Tag(prefix); ok {
		return v
	}
	return def
}

func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > max {
		return string(r[:max-1]) + "…"
	}
	return s
}

// claimSummary is the claim column: the holder and whether the lease is
// live, or "-".
func claimSummary(it store.Item, now time.Time) string {
	if !it.Fence.Claimed() || it.Grant == nil {
		return "-"
	}
	state := "held"
	if !it.Grant.LeaseExpiresAt.After(now) {
		state = "lapsed"
	}
	return fmt.Sprintf("%s by %s (fence %d)", state, it.Grant.Owner, it.Fence.Token)
}

func (c itemsCmd) show(ctx context.Context, id gating.ItemID) int {
	it, err := c.l.Get(ctx, c.repo.ID, id)
	if err != nil {
		return c.refused(err)
	}
	d, err := agentapi.Describe(ctx, c.l, c.repo.ID, it)
	if err != nil {
		return c.refused(err)
	}
	grants, err := c.l.Grants(ctx, c.repo.ID, id)
	if err != nil {
		return c.refused(err)
	}
	if c.o.asJSON {
		c.printJSON(struct {
			agentapi.ItemDetail
			Grants []store.Grant `json:"grants"`
		}{d, grants})
		return exitOK
	}
	w := c.e.stdout
	fmt.Fprintf(w, "%s  %s\n", it.ID, it.Title)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(w, "  %-12s %s\n", k+":", v)
		}
	}
	row("author", it.Author)
	row("provenance", it.Provenance)
	row("created", d.CreatedAt)
	row("updated", d.UpdatedAt)
	row("tags", strings.Join(it.Tags, " "))
	var links []string
	for _, l := range it.Links {
		links = append(links, string(l.Rel)+" "+l.Target)
	}
	row("links", strings.Join(links, ", "))
	var dangling []string
	for _, l := range d.DanglingLinks {
		dangling = append(dangling, string(l.Rel)+" "+l.Target)
	}
	row("dangling", strings.Join(dangling, ", "))
	row("attempts", strconv.Itoa(d.Attempts))
	row("claim", statusLine(d.Claim))
	if len(grants) > 0 {
		fmt.Fprintln(w, "  grants:")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "    FENCE\tOWNER\tPURPOSE\tBRANCH\tGRANTED\tLEASE UNTIL\tRELEASED")
		for _, g := range grants {
			rel := "-"
			if g.ReleasedAt != nil {
				rel = store.Timestamp(*g.ReleasedAt)
			}
			fmt.Fprintf(tw, "    %d\t%s\t%s\t%s\t%s\t%s\t%s\n", g.Fence, g.Owner, dash(g.Purpose), dash(g.Branch),
				store.Timestamp(g.GrantedAt), store.Timestamp(g.LeaseExpiresAt), rel)
		}
		tw.Flush()
	}
	if it.Body != "" {
		fmt.Fprintln(w, "  body:")
		for _, line := range strings.Split(it.Body, "\n") {
			fmt.Fprintf(w, "    %s\n", line)
		}
	}
	return exitOK
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func statusLine(st store.ClaimStatus) string {
	if st.FencingToken == nil {
		return "never claimed"
	}
	owner, region, until := "", "", ""
	if st.Owner != nil {
		owner = *st.Owner
	}
	if st.Region != nil {
		region = *st.Region
	}
	if st.LeaseExpiresAtUtc != nil {
		until = ", lease until " + *st.LeaseExpiresAtUtc
	}
	return fmt.Sprintf("%s, %s (fence %d, region %s%s)", st.State, owner, *st.FencingToken, region, until)
}

func (c itemsCmd) claim(ctx context.Context, id gating.ItemID) int {
	req := store.ClaimRequest{Owner: c.o.owner, Branch: c.o.branch}
	if c.o.lease > 0 {
		secs := c.o.lease.Seconds()
		req.LeaseSeconds = &secs
	}
	if c.o.wait > 0 {
		secs := c.o.wait.Seconds()
		req.MaxWaitSeconds = &secs
	}
	if c.o.maintenance {
		req.Purpose = "maintenance"
	}
	res, err := c.l.Claim(ctx, c.repo.ID, id, req, cliActor)
	if err != nil {
		return c.refused(err)
	}
	if c.o.asJSON {
		c.printJSON(res)
	}
	if !res.Granted {
		reason := "refused"
		if res.Reason != nil {
			reason = *res.Reason
		}
		if res.Exclusion != nil {
			reason += " (" + *res.Exclusion + ")"
		}
		return fail(c.e, c.cmd, fmt.Errorf("%s was not granted: %s", id, reason))
	}
	if !c.o.asJSON {
		fmt.Fprintf(c.e.stdout, "granted %s to %s: fencing token %d, lease %gs until %s (region %s)\n", id, *res.Owner,
			*res.FencingToken, *res.LeaseSeconds, *res.LeaseExpiresAtUtc, *res.Region)
	}
	return exitOK
}

func (c itemsCmd) release(ctx context.Context, id gating.ItemID) int {
	res, err := c.l.Release(ctx, c.repo.ID, id, c.o.token, cliActor)
	if err != nil {
		return c.refused(err)
	}
	if c.o.asJSON {
		c.printJSON(res)
	}
	if !res.Released {
		reason := "refused"
		if res.Reason != nil {
			reason = *res.Reason
		}
		return fail(c.e, c.cmd, fmt.Errorf("%s was not released: %s (fencing token %d)", id, reason, c.o.token))
	}
	if !c.o.asJSON {
		fmt.Fprintf(c.e.stdout, "released %s (fencing token %d)\n", id, res.FencingToken)
	}
	return exitOK
}
