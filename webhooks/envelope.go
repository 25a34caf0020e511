package webhooks

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
)

// Meta is what warden reads from every delivery's payload before routing it:
// who and what it is about. It is parsed once, after the signature check, as
// the inbox accepts the delivery (by the caller's goroutine, beside the
// compression), and stored in the inbox's columns; the dispatcher reads it
// from there and never parses a payload to decide what may start.
type Meta struct {
	Action       string
	Installation int64
	RepoID       int64
	Repo         string // owner/name
	// Number is the issue or pull request number the delivery is about, or 0.
	Number     int
	Sender     string
	SenderType string // "User", "Bot" or "Organization"
	// OrderKey groups deliveries that must be processed one at a time.
	OrderKey string
}

// envelope holds the fields common to GitHub's webhook payloads that warden
// needs for routing. Unknown fields are ignored; every value is hostile data.
type envelope struct {
	Action       string `json:"action"`
	Number       int    `json:"number"`
	Ref          string `json:"ref"`
	Installation *struct {
		ID int64 `json:"id"`
	} `json:"installation"`
	Repository *struct {
		ID       int64  `json:"id"`
		FullName string `json:"full_name"`
	} `json:"repository"`
	Sender *struct {
		Login string `json:"login"`
		Type  string `json:"type"`
	} `json:"sender"`
	Issue *struct {
		Number int `json:"number"`
	} `json:"issue"`
	PullRequest *struct {
		Number int `json:"number"`
	} `json:"pull_request"`
	CheckSuite *checkRef `json:"check_suite"`
	CheckRun   *struct {
		HeadSHA      string      `json:"head_sha"`
		PullRequests []numberRef `json:"pull_requests"`
		CheckSuite   *checkRef   `json:"check_suite"`
	} `json:"check_run"`
}

type numberRef struct {
	Number int `json:"number"`
}

type checkRef struct {
	HeadSHA      string      `json:"head_sha"`
	PullRequests []numberRef `json:"pull_requests"`
}

// ParseMeta reads the routing fields of a delivery of the given event. It
// fails when the payload is not JSON or a routing field has the wrong type
// (a "number" that is a string, say): such a delivery cannot be routed safely
// and becomes a dead letter.
func ParseMeta(event string, payload []byte) (Meta, error) {
	e, ok := scanEnvelope(payload)
	if !ok {
		// encoding/json is the reference: its error names what is wrong.
		if err := json.Unmarshal(payload, &e); err != nil {
			return Meta{}, fmt.Errorf("parse %s payload: %w", event, err)
		}
	}
	return metaOf(event, &e), nil
}

// metaOf is the Meta of a decoded envelope.
func metaOf(event string, e *envelope) Meta {
	m := Meta{Action: e.Action}
	if e.Installation != nil {
		m.Installation = e.Installation.ID
	}
	if e.Repository != nil {
		m.RepoID = e.Repository.ID
		m.Repo = e.Repository.FullName
	}
	if e.Sender != nil {
		m.Sender = e.Sender.Login
		m.SenderType = e.Sender.Type
	}
	switch {
	case e.Issue != nil && e.Issue.Number > 0:
		m.Number = e.Issue.Number
	case e.PullRequest != nil && e.PullRequest.Number > 0:
		m.Number = e.PullRequest.Number
	case e.Number > 0 && (event == "pull_request" || event == "issues"):
		m.Number = e.Number
	}
	m.OrderKey = orderKey(event, e, m)
	return m
}

// orderKey names the serialisation domain of a delivery. Deliveries about the
// same issue or pull request share one key (issues and pull requests share a
// number space in a repository); check events go to the lowest pull request
// they name, or their head commit; pushes to their ref; installation events to
// the installation.
func orderKey(event string, e *envelope, m Meta) string {
	repo := "r" + strconv.FormatInt(m.RepoID, 10)
	if m.RepoID == 0 && m.Repo != "" {
		repo = "r:" + m.Repo
	}
	switch event {
	case "installation", "installation_repositories", "github_app_authorization":
		return "i" + strconv.FormatInt(m.Installation, 10)
	case "check_suite", "check_run":
		var sha string
		var prs []numberRef
		if e.CheckSuite != nil {
			sha, prs = e.CheckSuite.HeadSHA, e.CheckSuite.PullRequests
		}
		if e.CheckRun != nil {
			sha, prs = e.CheckRun.HeadSHA, e.CheckRun.PullRequests
			if len(prs) == 0 && e.CheckRun.CheckSuite != nil {
				prs = e.CheckRun.CheckSuite.PullRequests
			}
		}
		if n := lowestNumber(prs); n > 0 {
			return repo + "#" + strconv.Itoa(n)
		}
		return repo + "@" + sha
	case "push":
		return repo + ":" + e.Ref
	}
	if m.Number > 0 {
		return repo + "#" + strconv.Itoa(m.Number)
	}
	return repo
}

func lowestNumber(prs []numberRef) int {
	ns := make([]int, 0, len(prs))
	for _, p := range prs {
		if p.Number > 0 {
			ns = append(ns, p.Number)
		}
	}
	if len(ns) == 0 {
		return 0
	}
	sort.Ints(ns)
	return ns[0]
}
