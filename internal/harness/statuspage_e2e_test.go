package harness

import (
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wardenhq/warden/mirror"
)

// End-to-end test of the status page (CONTRACT.md §3, admin listener GET /)
// as a person sees it: warden serves it, headless Chromium (Debian's
// chromium, installed by .ci/run) loads it, and the test reads the DOM
// Chromium built.

// chromiumDOM loads url in headless Chromium and returns the DOM it built.
func chromiumDOM(t *testing.T, url string) string {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("no chromium on PATH (.ci/run installs Debian's chromium)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu",
		"--disable-dev-shm-usage", "--no-first-run", "--user-data-dir="+t.TempDir(), "--dump-dom", url)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom %s: %v\n%s", url, err, stderr.String())
	}
	return string(out)
}

var (
	domTagRe   = regexp.MustCompile(`<[^>]*>`)
	domSpaceRe = regexp.MustCompile(`\s+`)
)

// domText is the text a person reads in a piece of the DOM (tags dropped,
// entities decoded for the few the page uses, spaces collapsed).
func domText(dom string) string {
	s := domTagRe.ReplaceAllString(dom, " ")
	s = strings.NewReplacer("&lt;", "<", "&gt;", ">", "&quot;", `"`, "&#39;", "'", "&amp;", "&").Replace(s)
	return strings.TrimSpace(domSpaceRe.ReplaceAllString(s, " "))
}

// domSection is the DOM of a repository's section whose heading begins
// with head, up to the next heading.
func domSection(t *testing.T, repo, head string) string {
	t.Helper()
	j := strings.Index(repo, "<h3>"+head)
	if j < 0 {
		t.Fatalf("no section %q in the repository's part of the page:\n%s", head, domText(repo))
	}
	rest := repo[j+len("<h3>"):]
	if k := strings.Index(rest, "<h3>"); k >= 0 {
		rest = rest[:k]
	}
	return rest
}

// chromiumScreenshot renders url in headless Chromium at width×height and
// returns the PNG it wrote.
func chromiumScreenshot(t *testing.T, url string, width, height int) image.Image {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("no chromium on PATH (.ci/run installs Debian's chromium)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	dir := t.TempDir()
	out := filepath.Join(dir, "status.png")
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--hide-scrollbars", "--user-data-dir="+filepath.Join(dir, "profile"),
		fmt.Sprintf("--window-size=%d,%d", width, height), "--screenshot="+out, url)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chromium --screenshot %s: %v\n%s", url, err, b)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("the screenshot is not a PNG: %v", err)
	}
	return img
}

var domH3Re = regexp.MustCompile(`<h3[^>]*>([^<]*)</h3>`)

// domHeadings are the h3 headings of a piece of the DOM, without their
// counts ("In flight (1)" reads "In flight").
func domHeadings(dom string) []string {
	var out []string
	for _, m := range domH3Re.FindAllStringSubmatch(dom, -1) {
		h := strings.TrimSpace(m[1])
		if i := strings.LastIndex(h, " ("); i > 0 && strings.HasSuffix(h, ")") {
			h = h[:i]
		}
		out = append(out, h)
	}
	return out
}

// domTableRows are the data rows (those without th) of the first table
// after the heading whose id is id.
func domTableRows(t *testing.T, dom, id string) []string {
	t.Helper()
	i := strings.Index(dom, `id="`+id+`"`)
	if i < 0 {
		t.Fatalf("no element with id %q:\n%s", id, domText(dom))
	}
	rest := dom[i:]
	start := strings.Index(rest, "<table")
	end := strings.Index(rest, "</table>")
	if start < 0 || end < start {
		t.Fatalf("no table after #%s", id)
	}
	return dataRows(rest[start:end])
}

// dataRows are the rows of a piece of the DOM that hold no th, each from
// just after its "<tr".
func dataRows(dom string) []string {
	var rows []string
	for _, r := range strings.Split(dom, "<tr")[1:] {
		if !strings.Contains(r, "<th") {
			rows = append(rows, r)
		}
	}
	return rows
}

// TestStatusPageInChromium: items in different states through the agent
// API (ready, in flight, blocked, parked, stalled behind the parked one,
// awaiting admission, and one completed under its claim, never released),
// then the status page in headless Chromium: its structure (the headings in
// order, empty sections left out, each section's rows and links) rather
// than its pixels. Each item links to its issue on GitHub, with its
// attempts and pull requests; the completed item is not in flight; the page
// says when it was made, refreshes itself unless ?refresh=0, lists the
// recent deliveries, the rate-limit budget of the installation and the
// repository's settings with their origin; a hostile title shows as text
// and runs nothing.
func TestStatusPageInChromium(t *testing.T) {
	if _, err := exec.LookPath("chromium"); err != nil {
		t.Skip("no chromium on PATH (.ci/run installs Debian's chromium)")
	}
	e := newE2E(t)

	ready := e.create(t, HumanToken, `Shard <script>document.title="pwned"</script> the table`, []string{"priority:P1"})
	held := e.create(t, HumanToken, "Rotate the signing keys", []string{"priority:P0"})
	blocked := e.create(t, HumanToken, "Use the batched WAL", []string{"priority:P2"}, map[string]string{"rel": "blockedBy", "target": held})
	parked := e.create(t, HumanToken, "Replace the job queue", []string{"priority:P1"})
	stalled := e.create(t, HumanToken, "Move workers to the new queue", []string{"priority:P2"}, map[string]string{"rel": "blockedBy", "target": parked})
	awaiting := e.create(t, PMToken, "Drop the legacy endpoint", []string{"priority:P3"})
	done := e.create(t, HumanToken, "Publish the changelog", []string{"priority:P2"})
	e.MustSettle(t)

	granted(t, e.claim(t, WorkerToken, held, map[string]any{"owner": "worker-7/keys", "leaseSeconds": 600, "branch": "feat/rotate-keys"}))
	var out map[string]any
	code, err := e.API(context.Background(), PMToken, http.MethodPatch, "/items/"+parked,
		map[string]any{"addTags": []string{"state:parked", "ruling-owner:pm", "ruling-topic:queue-choice"}}, &out)
	if err != nil || code != http.StatusOK {
		t.Fatalf("pm park of %s: %d %v %v", parked, code, err, out)
	}
	// Completed under its claim, which the worker never releases.
	f, pr := e.deliver(t, done, "worker-7/docs", "feat/changelog", "", "main", fmt.Sprintf("Closes #%d", num(t, done)))
	e.mustComplete(t, WorkerToken, done, f, fmt.Sprintf("pr:%d", pr.N))
	e.MustSettle(t)

	dom := chromiumDOM(t, e.AdminURL+"/")
	if !strings.Contains(dom, "<title>warden status</title>") {
		t.Errorf("the page's title changed: a hostile title ran as a script")
	}
	if strings.Contains(dom, "<script") {
		t.Errorf("the page's DOM holds a script element: a title was not escaped")
	}
	if !strings.Contains(dom, `<meta http-equiv="refresh" content="30">`) {
		t.Errorf("the page does not refresh itself every 30 s")
	}
	if !regexp.MustCompile(`id="generated">Generated at <time datetime="\d{4}-\d\d-\d\dT`).MatchString(dom) {
		t.Errorf("the page does not say when it was generated: %s", domText(dom))
	}
	if strings.Contains(domText(dom), "None.") {
		t.Errorf("the page still renders an empty section as None.")
	}

	name := e.Repo.FullName
	i := strings.Index(dom, "<h2>"+name+"</h2>")
	if i < 0 {
		t.Fatalf("no heading for %s on the page:\n%s", name, domText(dom))
	}
	repo := dom[i:]
	if k := strings.Index(repo, "</section>"); k >= 0 {
		repo = repo[:k]
	}

	// The structure: the sections with something in them, in order;
	// defects may or may not be found, and nothing is lapsed or dead.
	heads := domHeadings(repo)
	want := []string{"In flight", "Complete, claim not released", "Ready now", "Blocked", "Stalled", "Parked", "Awaiting admission"}
	if len(heads) > len(want) && heads[len(want)] == "Defects" {
		want = append(want, "Defects")
	}
	if !slices.Equal(heads, want) {
		t.Errorf("the repository's sections are %q, want %q", heads, want)
	}

	link := func(id string) string {
		n := num(t, id)
		return `/` + name + `/issues/` + strconv.Itoa(n) + `">#` + strconv.Itoa(n) + `</a>`
	}
	prLink := `/` + name + `/pull/` + strconv.Itoa(pr.N) + `">#` + strconv.Itoa(pr.N) + `</a>`
	for _, c := range []struct {
		head    string
		rows    int      // data rows
		items   []string // linked in this section
		text    []string // read in this section
		without []string // items that must not show here
	}{
		{"In flight (1)", 1, []string{held}, []string{"worker-7/keys", "feat/rotate-keys", "held", "Rotate the signing keys"}, []string{ready, done}},
		{"Complete, claim not released (1)", 1, []string{done}, []string{"worker-7/docs", "Publish the changelog"}, []string{held}},
		{"Ready now (1)", 1, []string{ready}, []string{"P1", `Shard <script>document.title="pwned"</script> the table`}, []string{held, blocked, parked, stalled, awaiting, done}},
		{"Blocked (", 1, []string{blocked, held}, []string{"Use the batched WAL"}, []string{ready}},
		{"Stalled (1)", 1, []string{stalled, parked}, []string{"pm: queue-choice"}, []string{ready}},
		{"Parked (1)", 1, []string{parked}, []string{"Replace the job queue", "pm: queue-choice", "removes the parked label"}, []string{stalled}},
		{"Awaiting admission (1)", 1, []string{awaiting}, []string{"Drop the legacy endpoint"}, []string{ready}},
	} {
		sec := domSection(t, repo, c.head)
		txt := domText(sec)
		if n := len(dataRows(sec)); n != c.rows {
			t.Errorf("section %q has %d rows, want %d: %s", c.head, n, c.rows, txt)
		}
		for _, id := range c.items {
			if !strings.Contains(sec, link(id)) {
				t.Errorf("section %q lacks %s linked to its issue:\n%s", c.head, id, sec)
			}
		}
		for _, w := range c.text {
			if !strings.Contains(txt, w) {
				t.Errorf("section %q does not read %q: %s", c.head, w, txt)
			}
		}
		for _, id := range c.without {
			if strings.Contains(sec, link(id)) {
				t.Errorf("section %q shows %s: %s", c.head, id, txt)
			}
		}
	}
	if sec := domSection(t, repo, "Complete, claim not released"); !strings.Contains(sec, prLink) {
		t.Errorf("the completed item's pull request #%d is not linked:\n%s", pr.N, sec)
	}
	if sec := domSection(t, repo, "In flight"); !strings.Contains(sec, "<th>attempts</th>") || !strings.Contains(sec, "<td>1</td>") {
		t.Errorf("the in-flight item does not show its one attempt:\n%s", sec)
	}

	// The settings in effect: every key, its value, where it came from.
	settings := repo[strings.Index(repo, `<details class="settings">`):]
	for _, w := range []string{"Settings in effect", "poison_threshold", "labels.item", "default"} {
		if !strings.Contains(domText(settings), w) {
			t.Errorf("the settings in effect lack %q: %s", w, domText(settings))
		}
	}

	// The recent deliveries (the creations, labels, comments above) and the
	// rate-limit budget of the repository's installation.
	if rows := domTableRows(t, dom, "deliveries"); len(rows) < 5 || len(rows) > 20 {
		t.Errorf("recent deliveries: %d rows, want between 5 and 20", len(rows))
	} else if !strings.Contains(domText(rows[0]), "ago") || !strings.Contains(domText(strings.Join(rows, "")), "issues.opened") {
		t.Errorf("recent deliveries do not show event and age: %s", domText(rows[0]))
	}
	budget := domTableRows(t, dom, "budget")
	inst := strconv.FormatInt(e.Inst.ID, 10)
	if !slices.ContainsFunc(budget, func(r string) bool {
		return strings.HasPrefix(domText("<tr"+r), inst+" ") && strings.Contains(r, "core")
	}) {
		t.Errorf("the rate-limit budget has no core row for installation %s: %s", inst, domText(strings.Join(budget, "")))
	}

	if !strings.Contains(dom, `href="`+"http") {
		t.Errorf("item links are not absolute GitHub addresses")
	}
	if !strings.Contains(domText(dom), "Inbox:") {
		t.Errorf("the inbox summary is missing: %s", domText(dom))
	}

	// A screenshot, checked for what it is rather than compared pixel by
	// pixel: the page renders at the size asked, with more than a blank
	// background (text in several colours: links, errors, headings).
	shot := chromiumScreenshot(t, e.AdminURL+"/?refresh=0", 1280, 1600)
	if b := shot.Bounds(); b.Dx() != 1280 || b.Dy() != 1600 {
		t.Errorf("the screenshot is %v, want 1280×1600", b)
	}
	colours := map[color.RGBA]bool{}
	for y := shot.Bounds().Min.Y; y < shot.Bounds().Max.Y; y += 4 {
		for x := shot.Bounds().Min.X; x < shot.Bounds().Max.X; x += 4 {
			r, g, b, _ := shot.At(x, y).RGBA()
			colours[color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8), 255}] = true
		}
	}
	if len(colours) < 8 {
		t.Errorf("the screenshot holds %d colours: the page did not render", len(colours))
	}

	off := chromiumDOM(t, e.AdminURL+"/?refresh=0")
	if strings.Contains(off, `http-equiv="refresh"`) || !strings.Contains(domText(off), "Auto-refresh is off") {
		t.Errorf("?refresh=0 still refreshes the page, or does not say it is off")
	}
}

// TestStatusMetricsE2E: /metrics on the operators' listener carries the
// rate-limit budget of the repository's installation (remaining and its
// limit companion) and, once a reconcile pass completed, the time it did,
// per repository.
func TestStatusMetricsE2E(t *testing.T) {
	e := newE2E(t)
	e.create(t, HumanToken, "Rotate the signing keys", []string{"priority:P0"})
	e.MustSettle(t)
	scrape := func() string {
		t.Helper()
		resp, err := http.Get(e.AdminURL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
		}
		return string(b)
	}
	done := fmt.Sprintf(`warden_reconcile_last_complete_timestamp_seconds{repository=%q}`, e.Repo.FullName)
	if m := scrape(); strings.Contains(m, done) {
		t.Errorf("a last complete reconcile is exported before any pass ran")
	}
	before := e.clk.Now()
	if r := e.pass(t, mirror.ReconcileOptions{}); !r.Complete {
		t.Fatalf("the pass did not complete: %s", r.Stopped)
	}
	m := scrape()
	inst := strconv.FormatInt(e.Inst.ID, 10)
	for _, name := range []string{"warden_github_ratelimit_remaining", "warden_github_ratelimit_limit", "warden_github_ratelimit_reset_timestamp_seconds"} {
		if !strings.Contains(m, name+`{installation="`+inst+`",resource="core"} `) {
			t.Errorf("/metrics lacks %s for installation %s", name, inst)
		}
	}
	i := strings.Index(m, done)
	if i < 0 {
		t.Fatalf("/metrics lacks %s after a complete pass", done)
	}
	line := m[i+len(done)+1:]
	line = line[:strings.IndexByte(line, '\n')]
	v, err := strconv.ParseFloat(line, 64)
	if err != nil || v < float64(before.Unix())-1 || v > float64(e.clk.Now().Unix())+1 {
		t.Errorf("%s %s: want the pass's finish, between %d and %d", done, line, before.Unix(), e.clk.Now().Unix())
	}
}
