package mirror

import (
	"github.com/wardenhq/warden/gating"
)

// closeOnCompleteField reads close_on_complete (CONTRACT.md §2): true (the
// default) makes warden close an item's open issue as completed when
// state:complete is recorded (transitions.go); false leaves the issue as it
// is, and the reconcile reports complete-issue-open instead. A person who
// reopens an issue warden closed is reported (reopened-after-complete),
// never closed again for that completion, whatever the setting says.
var closeOnCompleteField = boolField(func(s *gating.Settings) *bool { return &s.CloseOnComplete })
