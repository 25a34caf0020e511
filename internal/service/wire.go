package service

import (
	"context"

	"github.com/wardenhq/warden/app"

	"github.com/wardenhq/warden/mirror"
	"github.com/wardenhq/warden/webhooks"
)

// SubscribedEvents are the webhook events warden processes (app.yml
// subscribes the App to them). Every other event is acknowledged and dropped.
var SubscribedEvents = []string{
	"issues", "issue_comment", "pull_request", "check_suite", "check_run", "push",
	"installation", "installation_repositories", "label", "sub_issues",
}

// mirrorHandler adapts a mirror handler to the dispatcher, counting the
// GitHub requests each delivery's handling makes (calls).
func mirrorHandler(f func(context.Context, mirror.Event) (string, error), calls CallsObserver) webhooks.Handler {
	return webhooks.HandlerFunc(func(ctx context.Context, d *webhooks.Delivery) (webhooks.Result, error) {
		var counter app.CallCounter
		if calls != nil {
			ctx = app.WithCallCounter(ctx, &counter)
			defer func() { calls(d, counter.Counts()) }()
		}
		outcome, err := f(ctx, mirror.Event{Name: d.Event, Action: d.Meta.Action, DeliveryID: d.ID,
			Installation: d.Meta.Installation, Payload: d.Payload, FromSelf: d.FromSelf})
		if err != nil {
			return webhooks.Result{}, err
		}
		return webhooks.Result{Outcome: outcome}, nil
	})
}

// NewRouter wires an event handler for each subscribed event. Events whose
// features are not built yet are recorded ("observed") and acted on by
// nothing.
func NewRouter(m *mirror.Mirror, calls CallsObserver) *webhooks.Router {
	r := webhooks.NewRouter()
	observe := webhooks.HandlerFunc(func(context.Context, *webhooks.Delivery) (webhooks.Result, error) {
		return webhooks.Result{Outcome: "observed"}, nil
	})
	wired := map[string]webhooks.Handler{
		"installation":              mirrorHandler(m.HandleInstallation, calls),
		"installation_repositories": mirrorHandler(m.HandleInstallationRepositories, calls),
		"issues":                    mirrorHandler(m.HandleIssues, calls),
		"issue_comment":             mirrorHandler(m.HandleIssueComment, calls),
		"push":                      mirrorHandler(m.HandlePush, calls),
		"pull_request":              mirrorHandler(m.HandlePullRequest, calls),
		"check_suite":               mirrorHandler(m.HandleCheckSuite, calls),
		"check_run":                 mirrorHandler(m.HandleCheckRun, calls),
	}
	for _, e := range SubscribedEvents {
		if h, ok := wired[e]; ok {
			r.Handle(e, h)
			// warden's own writes still teach the mirror (an issue the API
			// opened, say) but the handlers see FromSelf and act on nothing.
			r.Bookkeep(e, h)
			continue
		}
		r.Handle(e, observe)
	}
	return r
}

// CallsObserver receives the GitHub requests one handling of a delivery made
// (every try is observed, a failed one too).
type CallsObserver func(d *webhooks.Delivery, calls app.CallCounts)
