package webhooks

import (
	"testing"
)

// envelopeCases are small hand-written payloads in GitHub's shapes; the fuzz
// tests reuse them as seeds.
var envelopeCases = []struct {
	name    string
	event   string
	payload string
	want    Meta
}{
	{
		name:  "issues opened",
		event: "issues",
		payload: `{"action":"opened","issue":{"number":5,"title":"t","labels":[]},
			"repository":{"id":10,"full_name":"octo/repo","private":true},
			"sender":{"login":"alice","type":"User","id":1},"installation":{"id":3,"node_id":"x"}}`,
		want: Meta{Action: "opened", Installation: 3, RepoID: 10, Repo: "octo/repo", Number: 5,
			Sender: "alice", SenderType: "User", OrderKey: "r10#5"},
	},
	{
		name:  "issue_comment on an issue",
		event: "issue_comment",
		payload: `{"action":"created","issue":{"number":6},"comment":{"id":99,"body":"/backlog status"},
			"repository":{"id":10,"full_name":"octo/repo"},"sender":{"login":"bob","type":"User"}}`,
		want: Meta{Action: "created", RepoID: 10, Repo: "octo/repo", Number: 6, Sender: "bob", SenderType: "User",
			OrderKey: "r10#6"},
	},
	{
		name:  "issue_comment on a pull request shares the PR's key",
		event: "issue_comment",
		payload: `{"action":"created","issue":{"number":7,"pull_request":{"url":"u"}},
			"repository":{"id":10,"full_name":"octo/repo"},"sender":{"login":"bob","type":"User"}}`,
		want: Meta{Action: "created", RepoID: 10, Repo: "octo/repo", Number: 7, Sender: "bob", SenderType: "User",
			OrderKey: "r10#7"},
	},
	{
		name:  "pull_request",
		event: "pull_request",
		payload: `{"action":"synchronize","number":7,"pull_request":{"number":7,"head":{"sha":"abc"}},
			"repository":{"id":10,"full_name":"octo/repo"},"sender":{"login":"w1[bot]","type":"Bot"},
			"installation":{"id":3}}`,
		want: Meta{Action: "synchronize", Installation: 3, RepoID: 10, Repo: "octo/repo", Number: 7,
			Sender: "w1[bot]", SenderType: "Bot", OrderKey: "r10#7"},
	},
	{
		name:    "pull_request with only the top-level number",
		event:   "pull_request",
		payload: `{"action":"closed","number":8,"repository":{"id":10,"full_name":"octo/repo"}}`,
		want:    Meta{Action: "closed", RepoID: 10, Repo: "octo/repo", Number: 8, OrderKey: "r10#8"},
	},
	{
		name:  "check_suite with pull requests goes to the lowest",
		event: "check_suite",
		payload: `{"action":"requested","check_suite":{"head_sha":"deadbeef","pull_requests":[{"number":12},{"number":4},{"number":9}]},
			"repository":{"id":10,"full_name":"octo/repo"},"installation":{"id":3}}`,
		want: Meta{Action: "requested", Installation: 3, RepoID: 10, Repo: "octo/repo", OrderKey: "r10#4"},
	},
	{
		name:  "check_suite from a fork carries no pull requests",
		event: "check_suite",
		payload: `{"action":"rerequested","check_suite":{"head_sha":"deadbeef","pull_requests":[]},
			"repository":{"id":10,"full_name":"octo/repo"}}`,
		want: Meta{Action: "rerequested", RepoID: 10, Repo: "octo/repo", OrderKey: "r10@deadbeef"},
	},
	{
		name:  "check_suite whose pull requests have no number",
		event: "check_suite",
		payload: `{"action":"requested","check_suite":{"head_sha":"cafe","pull_requests":[{"number":0},{"id":5}]},
			"repository":{"id":10,"full_name":"octo/repo"}}`,
		want: Meta{Action: "requested", RepoID: 10, Repo: "octo/repo", OrderKey: "r10@cafe"},
	},
	{
		name:  "check_run with pull requests",
		event: "check_run",
		payload: `{"action":"rerequested","check_run":{"head_sha":"f00d","pull_requests":[{"number":31},{"number":30}],
			"check_suite":{"head_sha":"f00d","pull_requests":[{"number":2}]}},"repository":{"id":10,"full_name":"octo/repo"}}`,
		want: Meta{Action: "rerequested", RepoID: 10, Repo: "octo/repo", OrderKey: "r10#30"},
	},
	{
		name:  "check_run falls back to its suite's pull requests",
		event: "check_run",
		payload: `{"action":"rerequested","check_run":{"head_sha":"f00d","pull_requests":[],
			"check_suite":{"head_sha":"f00d","pull_requests":[{"number":21}]}},"repository":{"id":10,"full_name":"octo/repo"}}`,
		want: Meta{Action: "rerequested", RepoID: 10, Repo: "octo/repo", OrderKey: "r10#21"},
	},
	{
		name:  "check_run without pull requests goes to its head commit",
		event: "check_run",
		payload: `{"action":"rerequested","check_run":{"head_sha":"f00d","check_suite":{"head_sha":"f00d"}},
			"repository":{"id":10,"full_name":"octo/repo"}}`,
		want: Meta{Action: "rerequested", RepoID: 10, Repo: "octo/repo", OrderKey: "r10@f00d"},
	},
	{
		name:  "push goes to its ref",
		event: "push",
		payload: `{"ref":"refs/heads/main","before":"a","after":"b","repository":{"id":10,"full_name":"octo/repo"},
			"pusher":{"name":"alice"},"sender":{"login":"alice","type":"User"},"installation":{"id":3}}`,
		want: Meta{Installation: 3, RepoID: 10, Repo: "octo/repo", Sender: "alice", SenderType: "User",
			OrderKey: "r10:refs/heads/main"},
	},
	{
		name:  "installation goes to the installation",
		event: "installation",
		payload: `{"action":"created","installation":{"id":3,"account":{"login":"octo"}},
			"repositories":[{"id":10,"full_name":"octo/repo"}],"sender":{"login":"alice","type":"User"}}`,
		want: Meta{Action: "created", Installation: 3, Sender: "alice", SenderType: "User", OrderKey: "i3"},
	},
	{
		name:  "installation_repositories goes to the installation",
		event: "installation_repositories",
		payload: `{"action":"added","installation":{"id":3},"repositories_added":[{"id":11}],
			"repository":{"id":10,"full_name":"octo/repo"}}`,
		want: Meta{Action: "added", Installation: 3, RepoID: 10, Repo: "octo/repo", OrderKey: "i3"},
	},
	{
		name:    "repository without an id keys by name",
		event:   "issues",
		payload: `{"action":"opened","issue":{"number":5},"repository":{"full_name":"octo/repo"}}`,
		want:    Meta{Action: "opened", Repo: "octo/repo", Number: 5, OrderKey: "r:octo/repo#5"},
	},
	{
		name:    "no repository, no number",
		event:   "issues",
		payload: `{"action":"opened"}`,
		want:    Meta{Action: "opened", OrderKey: "r0"},
	},
	{
		name:    "a top-level number counts only for issues and pull_request",
		event:   "star",
		payload: `{"action":"created","number":5,"repository":{"id":10}}`,
		want:    Meta{Action: "created", RepoID: 10, OrderKey: "r10"},
	},
	{
		name:    "a negative issue number is ignored",
		event:   "issues",
		payload: `{"action":"opened","issue":{"number":-3},"repository":{"id":10}}`,
		want:    Meta{Action: "opened", RepoID: 10, OrderKey: "r10"},
	},
	{
		name:    "unknown fields and nulls are ignored",
		event:   "issues",
		payload: `{"action":"opened","issue":{"number":5,"extra":{"deep":[1,2,{"x":null}]}},"repository":{"id":10},"sender":null,"installation":null}`,
		want:    Meta{Action: "opened", RepoID: 10, Number: 5, OrderKey: "r10#5"},
	},
}

func TestParseMeta(t *testing.T) {
	for _, tc := range envelopeCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseMeta(tc.event, []byte(tc.payload))
			if err != nil {
				t.Fatalf("ParseMeta: %v", err)
			}
			if got != tc.want {
				t.Fatalf("ParseMeta =\n  %+v\nwant\n  %+v", got, tc.want)
			}
		})
	}
}

func TestParseMetaSharedKeys(t *testing.T) {
	key := func(event, payload string) string {
		t.Helper()
		m, err := ParseMeta(event, []byte(payload))
		if err != nil {
			t.Fatal(err)
		}
		return m.OrderKey
	}
	repo := `"repository":{"id":10,"full_name":"octo/repo"}`
	issue := key("issues", `{"issue":{"number":7},`+repo+`}`)
	comment := key("issue_comment", `{"issue":{"number":7},`+repo+`}`)
	pr := key("pull_request", `{"number":7,"pull_request":{"number":7},`+repo+`}`)
	review := key("pull_request_review", `{"pull_request":{"number":7},`+repo+`}`)
	suite := key("check_suite", `{"check_suite":{"head_sha":"x","pull_requests":[{"number":7}]},`+repo+`}`)
	for _, k := range []string{comment, pr, review, suite} {
		if k != issue {
			t.Errorf("deliveries about #7 have different keys: %q vs %q", k, issue)
		}
	}
	if other := key("issues", `{"issue":{"number":7},"repository":{"id":11,"full_name":"octo/other"}}`); other == issue {
		t.Errorf("#7 in two repositories share the key %q", other)
	}
	if n8 := key("issues", `{"issue":{"number":8},`+repo+`}`); n8 == issue {
		t.Errorf("#7 and #8 share the key %q", n8)
	}
	if p1, p2 := key("push", `{"ref":"refs/heads/a",`+repo+`}`), key("push", `{"ref":"refs/heads/b",`+repo+`}`); p1 == p2 {
		t.Errorf("pushes to two refs share the key %q", p1)
	}
}

func TestParseMetaRefusesNonObjects(t *testing.T) {
	for _, p := range []string{
		``,
		`not json`,
		`[1,2]`,
		`"a string"`,
		`42`,
		`{"action":"opened"`,
		`{"action":"opened"}}`,
		"\xff\xfe",
	} {
		if m, err := ParseMeta("issues", []byte(p)); err == nil {
			t.Errorf("ParseMeta(%q) = %+v, want an error", p, m)
		}
	}
}
