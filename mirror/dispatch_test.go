package mirror

import (
	"context"
	"testing"
	"time"

	"github.com/wardenhq/warden/gating"
	"github.com/wardenhq/warden/mirror/store"
)

// TestDispatchStepIgnoresPeople: an assignment of anyone who is not a
// dispatched agent does nothing (the Mirror here has no ledger: touching it
// would panic), and a payload that is not JSON is a payload error.
func TestDispatchStepIgnoresPeople(t *testing.T) {
	m := &Mirror{Agents: []string{"robo-1"}}
	set := gating.DefaultSettings()
	for _, payload := range []string{
		`{"assignee":{"login":"alice","type":"User"}}`,
		`{"assignee":null}`,
		`{}`,
		`{"assignee":{"login":"","type":"Bot"}}`,
	} {
		for _, action := range []string{"assigned", "unassigned"} {
			out, err := m.dispatchStep(context.Background(), Event{Action: action, Payload: []byte(payload)}, store.Repo{}, set, 3)
			if out != "" || err != nil {
				t.Errorf("%s %s: %q, %v; want nothing done", action, payload, out, err)
			}
		}
	}
	if _, err := m.dispatchStep(context.Background(), Event{Action: "assigned", Payload: []byte(`{"assignee":7}`)}, store.Repo{}, set, 3); err == nil {
		t.Error("a malformed payload was accepted")
	}
}

func TestDispatchLease(t *testing.T) {
	set := gating.DefaultSettings()
	if got := dispatchLease(set); got != (2 * time.Hour).Seconds() {
		t.Errorf("default agent_lease: %v s", got)
	}
	set.AgentLease = 90 * time.Minute
	if got := dispatchLease(set); got != 5400 {
		t.Errorf("agent_lease 90m: %v s", got)
	}
	set.AgentLease = 0 // settings stored before agent_lease existed
	if got := dispatchLease(set); got != (2 * time.Hour).Seconds() {
		t.Errorf("agent_lease unset: %v s", got)
	}
	if a := dispatchActor("copilot-swe-agent[bot]"); a.Role != gating.RoleWorker || a.Name != "copilot" {
		t.Errorf("dispatchActor: %+v", a)
	}
}
