package harness

import (
	"context"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
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

// TestStatusPageInChromium: items in different states through the agent
// API (ready, in flight, blocked, parked, stalled behind the parked one,
// awaiting admission), then the status page in headless Chromium shows the
// repository's heading and each section with its items, each linked to its
// issue on GitHub; a hostile title shows as text and runs nothing.
func TestStatusPageInChromium(t *testing.T) {
	if _, err := exec.LookPath("chromium"); err != nil {
		t.Skip("no chromium on PATH (.ci/run installs Debian's chromium)")
	}
	e := New(t, Options{})

	ready := e.create(t, HumanToken, `Shard <script>document.title="pwned"</script> the table`, []string{"priority:P1"})
	held := e.create(t, HumanToken, "Rotate the signing keys", []string{"priority:P0"})
	blocked := e.create(t, HumanToken, "Use the batched WAL", []string{"priority:P2"}, map[string]string{"rel": "blockedBy", "target": held})
	parked := e.create(t, HumanToken, "Replace the job queue", []string{"priority:P1"})
	stalled := e.create(t, HumanToken, "Move workers to the new queue", []string{"priority:P2"}, map[string]string{"rel": "blockedBy", "target": parked})
	awaiting := e.create(t, PMToken, "Drop the legacy endpoint", []string{"priority:P3"})
	e.MustSettle(t)

	granted(t, e.claim(t, WorkerToken, held, map[string]any{"owner": "worker-7/keys", "leaseSeconds": 600, "branch": "feat/rotate-keys"}))
	var out map[string]any
	code, err := e.API(context.Background(), PMToken, http.MethodPatch, "/items/"+parked,
		map[string]any{"addTags": []string{"state:parked", "ruling-owner:pm", "ruling-topic:queue-choice"}}, &out)
	if err != nil || code != http.StatusOK {
		t.Fatalf("pm park of %s: %d %v %v", parked, code, err, out)
	}
	e.MustSettle(t)

	dom := chromiumDOM(t, e.AdminURL+"/")
	if !strings.Contains(dom, "<title>warden status</title>") {
		t.Errorf("the page's title changed: a hostile title ran as a script")
	}
	if strings.Contains(dom, "<script") {
		t.Errorf("the page's DOM holds a script element: a title was not escaped")
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

	link := func(id string) string {
		n := num(t, id)
		return `/` + name + `/issues/` + strconv.Itoa(n) + `">#` + strconv.Itoa(n) + `</a>`
	}
	for _, c := range []struct {
		head    string
		items   []string // linked in this section
		text    []string // read in this section
		without []string // items that must not show here
	}{
		{"In flight (1)", []string{held}, []string{"worker-7/keys", "feat/rotate-keys", "held", "Rotate the signing keys"}, []string{ready}},
		{"Ready now (1)", []string{ready}, []string{"P1", `Shard <script>document.title="pwned"</script> the table`}, []string{held, blocked, parked, stalled, awaiting}},
		{"Blocked (", []string{blocked, held}, []string{"Use the batched WAL"}, []string{ready}},
		{"Stalled (1)", []string{stalled, parked}, []string{"pm: queue-choice"}, []string{ready}},
		{"Parked (1)", []string{parked}, []string{"Replace the job queue", "pm: queue-choice", "removes the parked label"}, []string{stalled}},
		{"Awaiting admission (1)", []string{awaiting}, []string{"Drop the legacy endpoint"}, []string{ready}},
		{"Lapsed (0)", nil, []string{"None."}, nil},
		{"Defects (", nil, nil, nil},
		{"Dead letters (0)", nil, []string{"None."}, nil},
	} {
		sec := domSection(t, repo, c.head)
		txt := domText(sec)
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
	if !strings.Contains(dom, `href="`+"http") {
		t.Errorf("item links are not absolute GitHub addresses")
	}
	if !strings.Contains(domText(dom), "Inbox:") {
		t.Errorf("the inbox summary is missing: %s", domText(dom))
	}
}
