package gating

import (
	"fmt"
	"strings"
)

// CodeParkWithoutQuestion refuses a worker's park that names no question
// for its ruling owner (the protocol's "Parking requires a named route
// out": owner and question both named).
const CodeParkWithoutQuestion = "park-without-question"

// CodeClaimsOnItem refuses a claims edge written on an item: claims lives on
// a short-lived per-run worker record, never on a long-lived one (the
// protocol's relations table).
const CodeClaimsOnItem = "claims-on-item"

// CheckParkNamed judges a write that parks an item (state:parked in after
// and not in before) by a worker: it needs exactly one non-empty
// ruling-owner: and ruling-topic: and a non-empty question, all in the
// write. The refusal names every missing part (Rejected lists them:
// ruling-owner, ruling-topic, question); its reason is park-without-route
// when the route is incomplete, else park-without-question. Other roles'
// parks, and writes that do not park, pass (nil).
func CheckParkNamed(role Role, id ItemID, before, after []string, question string) *Refusal {
	if role != RoleWorker || !contains(after, "state:parked") || contains(before, "state:parked") {
		return nil
	}
	var owners, topics int
	for _, t := range after {
		p, v, ok := SplitTag(t)
		if !ok || v == "" {
			continue
		}
		switch p {
		case "ruling-owner":
			owners++
		case "ruling-topic":
			topics++
		}
	}
	var missing, why []string
	if owners != 1 {
		missing = append(missing, "ruling-owner")
		why = append(why, fmt.Sprintf("exactly one non-empty ruling-owner: tag (has %d)", owners))
	}
	if topics != 1 {
		missing = append(missing, "ruling-topic")
		why = append(why, fmt.Sprintf("exactly one non-empty ruling-topic: tag (has %d)", topics))
	}
	if strings.TrimSpace(question) == "" {
		missing = append(missing, "question")
		why = append(why, "a non-empty question (the PATCH's question field: what the ruling owner must rule on; warden posts it in the park comment)")
	}
	if len(missing) == 0 {
		return nil
	}
	reason := CodeParkWithoutQuestion
	if owners != 1 || topics != 1 {
		reason = "park-without-route"
	}
	r := refuse(reason, "parking %s names no route out: state:parked needs, in the same write, %s; missing: %s",
		id, strings.Join(why, ", "), strings.Join(missing, ", "))
	r.Rejected = missing
	return r
}
