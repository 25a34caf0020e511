package service

import (
	"context"

	"github.com/wardenhq/warden/webhooks"
)

// SubscribedEvents are the webhook events warden processes (app.yml
// subscribes the App to them). Every other event is acknowledged and dropped.
var SubscribedEvents = []string{
	"issues", "issue_comment", "pull_request", "check_suite", "check_run", "push",
	"installation", "installation_repositories", "label", "sub_issues",
}

// NewRouter wires an event handler for each subscribed event. Until the
// features that act on an event are built, its deliveries are recorded
// ("observed") and acted on by nothing.
func NewRouter() *webhooks.Router {
	r := webhooks.NewRouter()
	observe := webhooks.HandlerFunc(func(context.Context, *webhooks.Delivery) (webhooks.Result, error) {
		return webhooks.Result{Outcome: "observed"}, nil
	})
	for _, e := range SubscribedEvents {
		r.Handle(e, observe)
	}
	return r
}
