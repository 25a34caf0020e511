package service

import (
	"context"
	"fmt"

	"github.com/wardenhq/warden/app"

	"github.com/wardenhq/warden/mirror"
	"github.com/wardenhq/warden/webhooks"
)

// SubscribedEvents are the webhook events warden processes (app.yml
// subscribes the App to them). Every other event is acknowledged and dropped.
var SubscribedEvents = []string{
	"issues", "issue_comment", "pull_request", "pull_request_review_comment", "check_suite", "check_run", "push",
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
		if d.Meta.Installation <= 0 {
			// GitHub sends an App's deliveries with the installation they
			// concern; without one there is no one to act as, ever.
			return webhooks.Result{}, webhooks.Permanent(fmt.Errorf("%s delivery names no installation (installation.id %d): warden acts only as an installation",
				d.Event, d.Meta.Installation))
		}
		outcome, err := f(ctx, mirror.Event{Name: d.Event, Action: d.Meta.Action, DeliveryID: d.ID,
			Installation: d.Meta.Installation, Payload: d.Payload, FromSelf: d.FromSelf})
		if err != nil {
			return webhooks.Result{}, classify(err, d.Meta.Installation)
		}
		return webhooks.Result{Outcome: outcome}, nil
	})
}

// classify tells the dispatcher what a handler's failure means: a GitHub
// rate limit waits for its reset without spending a try (the App's own
// budget holds every installation), as does a request the access layer did
// not send because the installation's requests are failing (its probe
// spends the tries); a payload no retry can cure is a dead letter at once;
// anything else is retried.
func classify(err error, installation int64) error {
	if rl, ok := app.IsRateLimited(err); ok {
		if rl.Installation == app.AppInstallation {
			installation = 0
		}
		return webhooks.Throttled(err, installation, rl.Reset)
	}
	if u, ok := app.IsUnavailable(err); ok {
		// Not sent: the installation's requests are failing and the
		// access layer probes one at a time. Waiting spends no try.
		if u.Installation == app.AppInstallation {
			installation = 0
		}
		return webhooks.Throttled(err, installation, u.Until)
	}
	if mirror.IsPayloadError(err) {
		return webhooks.Permanent(err)
	}
	return err
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
		"installation":                mirrorHandler(m.HandleInstallation, calls),
		"installation_repositories":   mirrorHandler(m.HandleInstallationRepositories, calls),
		"issues":                      mirrorHandler(m.HandleIssues, calls),
		"issue_comment":               mirrorHandler(m.HandleIssueComment, calls),
		"push":                        mirrorHandler(m.HandlePush, calls),
		"pull_request":                mirrorHandler(m.HandlePullRequest, calls),
		"pull_request_review_comment": mirrorHandler(m.HandleReviewComment, calls),
		"check_suite":                 mirrorHandler(m.HandleCheckSuite, calls),
		"check_run":                   mirrorHandler(m.HandleCheckRun, calls),
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
