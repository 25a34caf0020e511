package mirror

import (
	"errors"
	"testing"

	"github.com/google/go-github/v66/github"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// TestAdoptReadsHistoryBeforeMakingTheItem: an adoption whose history read
// fails leaves no item (the next census adopts it whole, trail included);
// the adoption that succeeds makes the item with its trail read and its
// admission decided (a maintainer's issue, the gate never on it).
func TestAdoptReadsHistoryBeforeMakingTheItem(t *testing.T) {
	e := newEnv(t)
	f := newFakeCalls(e.clock.Now)
	f.roles["maria"] = "maintain"
	m := e.newMirror(f)
	m.Region = testRegion
	is := &github.Issue{Number: github.Int(12), Title: github.String("Left by a backlog that predates warden"),
		User: &github.User{Login: github.String("maria"), Type: github.String("User")}, Labels: []*github.Label{{Name: github.String("backlog")}}}
	set := gating.DefaultSettings()

	f.fail["issueComments"] = errors.New("GitHub is down")
	if _, err := m.adopt(e.ctx, e.repoRow(), set, is); err == nil {
		t.Fatal("an adoption whose history read failed succeeded")
	}
	if _, err := e.l.Get(e.ctx, e.repo, "issue-12"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the failed adoption left an item (err %v): the next census would skip its history", err)
	}

	delete(f.fail, "issueComments")
	out, err := m.adopt(e.ctx, e.repoRow(), set, is)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.l.Get(e.ctx, e.repo, "issue-12"); err != nil {
		t.Fatalf("no item after the adoption %q: %v", out, err)
	}
	if done, err := e.acts.Backfilled(e.ctx, e.repo, 12); err != nil || !done {
		t.Errorf("the adopted item's history is not marked read: %v %v", done, err)
	}
	if adm, err := e.acts.Admission(e.ctx, e.repo, 12); err != nil || adm == nil || adm.By != "maria" {
		t.Errorf("the maintainer's issue is not admitted: %+v %v (%s)", adm, err, out)
	}
}
