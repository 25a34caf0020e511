package mirror

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/google/go-github/v66/github"

	"github.com/wardenhq/warden/mirror/store"
)

// maxAnnotationsPerRequest is GitHub's limit of annotations in one create
// or update of a check run; more are sent in further updates, which GitHub
// appends to the run's annotations.
const maxAnnotationsPerRequest = 50

// checkRunWrite is one of warden's check runs as it should read on a head
// commit: the `backlog` run (writeCheckRun) or the `backlog/settings` run
// (writeSettingsCheck).
type checkRunWrite struct {
	name string // the run's name
	// key is the run's record in check_runs: the head SHA for `backlog`,
	// settingsRunKey(sha) for `backlog/settings`.
	key                        string
	sha                        string
	conclusion, title, summary string
	annotations                []*github.CheckRunAnnotation
}

// hash is what the run's record keeps of what was written: the digest of
// its conclusion, title and summary (as findCheckRun computes it from a
// run on GitHub), and, when it has annotations, theirs after a "+".
func (w checkRunWrite) hash() string {
	h := checkRunHash(w.conclusion, w.title, w.summary)
	if len(w.annotations) == 0 {
		return h
	}
	return h + "+" + annotationsHash(w.annotations)
}

// annotationsHash digests the annotations in order.
func annotationsHash(as []*github.CheckRunAnnotation) string {
	d := sha256.New()
	for _, a := range as {
		fmt.Fprintf(d, "%s\x00%d\x00%d\x00%s\x00%s\x00%s\x01", a.GetPath(), a.GetStartLine(), a.GetEndLine(),
			a.GetAnnotationLevel(), a.GetTitle(), a.GetMessage())
	}
	return hex.EncodeToString(d.Sum(nil)[:16])
}

// splitWritten reads a record's written hash: the hash, and how many pages
// of its annotations are on GitHub when not all are yet (0: all, or the
// run has none). A create under way is ("creating", 0).
func splitWritten(written string) (hash string, pages int) {
	h, p, ok := strings.Cut(written, "/")
	if !ok {
		return written, 0
	}
	n, err := strconv.Atoi(p)
	if err != nil || n <= 0 {
		return written, 0
	}
	return h, n
}

// annotationsWritten is how many of w's annotations a run whose record
// says written already carries: all of them, or the pages recorded, when
// the record is of the same annotations; none otherwise.
func (w checkRunWrite) annotationsWritten(written string) int {
	h, pages := splitWritten(written)
	_, ann, ok := strings.Cut(h, "+")
	_, wantAnn, _ := strings.Cut(w.hash(), "+")
	if !ok || ann != wantAnn {
		return 0
	}
	if pages == 0 {
		return len(w.annotations)
	}
	return min(pages*maxAnnotationsPerRequest, len(w.annotations))
}

// page returns the annotations from i, at most one request's.
func (w checkRunWrite) page(i int) []*github.CheckRunAnnotation {
	if i >= len(w.annotations) {
		return nil
	}
	return w.annotations[i:min(i+maxAnnotationsPerRequest, len(w.annotations))]
}

// progress is the written hash that records the annotations before i as
// sent: the hash itself once all are.
func (w checkRunWrite) progress(i int) string {
	if i >= len(w.annotations) {
		return w.hash()
	}
	return fmt.Sprintf("%s/%d", w.hash(), i/maxAnnotationsPerRequest)
}

func (w checkRunWrite) label() string {
	if w.name == CheckRunName {
		return "check run"
	}
	return w.name + " check run"
}

// writeRun brings one check run in step: created once per head (its
// intent recorded first, so a writer that stops between the create and
// its record leaves a trace the next one adopts), then edited only when
// what it says changed; annotations past GitHub's 50 a request go in
// further edits, the progress recorded after each, so a retry sends only
// the rest. A head no delivery just brought is looked for on GitHub before
// a create (the run may be there from a database warden lost). Nothing is
// written under dry run.
func (m *Mirror) writeRun(ctx context.Context, repo store.Repo, dryRun bool, w checkRunWrite) (string, error) {
	want := w.hash()
	sha := shortSHA(w.sha)
	old, err := m.Ledger.CheckRun(ctx, repo.ID, w.key)
	if err != nil {
		return "", err
	}
	if old == nil && newHead(ctx) != w.sha && !dryRun {
		c, err := m.callsFor(repo)
		if err != nil {
			return "", err
		}
		id, written, err := m.findCheckRun(ctx, c, w.sha, w.name)
		if err != nil {
			return "", err
		}
		if id != 0 {
			if err := m.Ledger.PutCheckRun(ctx, repo.ID, w.key, store.CheckRunRecord{ID: id, WrittenHash: written}); err != nil {
				return "", err
			}
			return m.writeRun(ctx, repo, dryRun, w)
		}
	}
	if old != nil && old.WrittenHash == want {
		return "", nil
	}
	if dryRun {
		// No record either: the run is not on GitHub.
		m.heldWrite(repo, w.label(), "sha", w.sha, "conclusion", w.conclusion, "title", w.title, "annotations", len(w.annotations))
		return fmt.Sprintf("%s on %s would be %s (dry run)", w.label(), sha, w.conclusion), nil
	}
	c, err := m.callsFor(repo)
	if err != nil {
		return "", err
	}
	if old != nil && old.ID != 0 {
		from := w.annotationsWritten(old.WrittenHash)
		err := m.editRun(ctx, repo, c, old.ID, w, from)
		if err == nil {
			return fmt.Sprintf("%s on %s: %s", w.label(), sha, w.conclusion), nil
		}
		if !errors.Is(err, errNotFound) {
			return "", fmt.Errorf("update the %s on %s: %w", w.label(), sha, err)
		}
		// Gone (the head was force-pushed away and collected): create anew.
	}
	if old != nil && old.ID == 0 {
		// A create was under way when its writer stopped (a crash, a
		// replica killed): the run may exist. Adopt it rather than make a
		// second one.
		id, _, err := m.findCheckRun(ctx, c, w.sha, w.name)
		if err != nil {
			return "", err
		}
		if id != 0 {
			if err := m.Ledger.PutCheckRun(ctx, repo.ID, w.key, store.CheckRunRecord{ID: id, WrittenHash: checkRunCreating}); err != nil {
				return "", err
			}
			return m.writeRun(ctx, repo, dryRun, w)
		}
	}
	if err := m.Ledger.PutCheckRun(ctx, repo.ID, w.key, store.CheckRunRecord{WrittenHash: checkRunCreating}); err != nil {
		return "", err
	}
	now := github.Timestamp{Time: m.now()}
	first := w.page(0)
	id, err := c.createCheckRun(ctx, github.CreateCheckRunOptions{Name: w.name, HeadSHA: w.sha,
		Status: github.String("completed"), Conclusion: github.String(w.conclusion), CompletedAt: &now, Output: w.output(first)})
	if err != nil {
		if errors.Is(err, errUnprocessable) {
			// An unknown commit (force-pushed away): nothing to check.
			return fmt.Sprintf("%s on %s: commit unknown to GitHub", w.label(), sha), nil
		}
		return "", fmt.Errorf("create the %s on %s: %w", w.label(), sha, err)
	}
	if err := m.Ledger.PutCheckRun(ctx, repo.ID, w.key, store.CheckRunRecord{ID: id, Conclusion: w.conclusion, WrittenHash: w.progress(len(first))}); err != nil {
		return "", err
	}
	if len(first) < len(w.annotations) {
		if err := m.annotateRun(ctx, repo, c, id, w, len(first)); err != nil {
			return "", fmt.Errorf("annotate the %s on %s: %w", w.label(), sha, err)
		}
	}
	return fmt.Sprintf("%s on %s created: %s", w.label(), sha, w.conclusion), nil
}

// editRun rewrites run id to say what w says, sending the annotations from
// from (those before it are on the run already) a page at a time.
func (m *Mirror) editRun(ctx context.Context, repo store.Repo, c checkCalls, id int64, w checkRunWrite, from int) error {
	now := github.Timestamp{Time: m.now()}
	p := w.page(from)
	if err := c.updateCheckRun(ctx, id, github.UpdateCheckRunOptions{Name: w.name, Status: github.String("completed"),
		Conclusion: github.String(w.conclusion), CompletedAt: &now, Output: w.output(p)}); err != nil {
		return err
	}
	if err := m.Ledger.PutCheckRun(ctx, repo.ID, w.key, store.CheckRunRecord{ID: id, Conclusion: w.conclusion, WrittenHash: w.progress(from + len(p))}); err != nil {
		return err
	}
	if from+len(p) < len(w.annotations) {
		return m.annotateRun(ctx, repo, c, id, w, from+len(p))
	}
	return nil
}

// annotateRun sends w's annotations from i onward to run id, one update
// per page, recording the progress after each.
func (m *Mirror) annotateRun(ctx context.Context, repo store.Repo, c checkCalls, id int64, w checkRunWrite, i int) error {
	for i < len(w.annotations) {
		p := w.page(i)
		if err := c.updateCheckRun(ctx, id, github.UpdateCheckRunOptions{Name: w.name, Output: w.output(p)}); err != nil {
			return err
		}
		i += len(p)
		if err := m.Ledger.PutCheckRun(ctx, repo.ID, w.key, store.CheckRunRecord{ID: id, Conclusion: w.conclusion, WrittenHash: w.progress(i)}); err != nil {
			return err
		}
	}
	return nil
}

// output is the run's output with one page of annotations.
func (w checkRunWrite) output(annotations []*github.CheckRunAnnotation) *github.CheckRunOutput {
	return &github.CheckRunOutput{Title: github.String(w.title), Summary: github.String(w.summary), Annotations: annotations}
}
