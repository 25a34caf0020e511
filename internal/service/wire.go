package service

import (
	"context"

	"github.com/wardenhq/warden/mirror"
	"github.com/wardenhq/warden/webhooks"
)

// SubscribedEvents are the webhook events warden processes (app.yml
// subscribes the App to them). Every other event is acknowledged and dropped.
var SubscribedEvents = []string{
	"issues", "issue_comment", "pull_request", "check_suite", "check_run", "push",
	"installation", "installation_repositories", "label", "sub_issues",
}

// mirrorHandler adapts a mirror handler to the dispatcher.
func mirrorHandler(f func(context.Context, mirror.Event) (string, error)) webhooks.Handler {
	return webhooks.HandlerFunc(func(ctx context.Context, d *webhooks.Delivery) (webhooks.Result, error) {
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
func NewRouter(m *mirror.Mirror) *webhooks.Router {
	r := webhooks.NewRouter()
	observe := webhooks.HandlerFunc(func(context.Context, *webhooks.Delivery) (webhooks.Result, error) {
		return webhooks.Result{Outcome: "observed"}, nil
	})
	wired := map[string]webhooks.Handler{
		"installation":              mirrorHandler(m.HandleInstallation),
		"installation_repositories": mirrorHandler(m.HandleInstallationRepositories),
		"issues":                    mirrorHandler(m.HandleIssues),
		"issue_comment":             mirrorHandler(m.HandleIssueComment),
		"push":                      mirrorHandler(m.HandlePush),
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
