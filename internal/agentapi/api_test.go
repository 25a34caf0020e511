package agentapi

import (
	"net/http"
	"strings"
	"testing"
)

func TestAuthenticateComparesEveryToken(t *testing.T) {
	creds := newCredentials(testTokens)
	for _, c := range []struct {
		header string
		want   string
	}{
		{"Bearer " + tokPM, "pm"},
		{"bearer " + tokHuman, "alice"},
		{"Bearer  " + tokWorker2 + " ", "w2"},
		{"Bearer " + tokLimited, "limited"},
		{"Bearer " + tokPM + "x", ""},
		{"Bearer " + tokPM[:len(tokPM)-1], ""},
		{"Basic " + tokPM, ""},
		{tokPM, ""},
		{"Bearer ", ""},
		{"", ""},
	} {
		got, ok := authenticate(creds, c.header)
		if (c.want == "") == ok || (ok && got.name != c.want) {
			t.Errorf("%q: got %v %v, want %q", c.header, got, ok, c.want)
		}
	}
}

func TestAuthAndRepositoryRefusals(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		name   string
		path   string
		header []string
		status int
		reason string
	}{
		{"no token", "items", nil, 401, ReasonUnauthenticated},
		{"unknown token", "items", []string{"Authorization", "Bearer not-a-known-token-at-all"}, 401, ReasonUnauthenticated},
		{"wrong scheme", "items", []string{"Authorization", "token " + tokPM}, 401, ReasonUnauthenticated},
		{"unknown route still needs a token", "/nope", nil, 401, ReasonUnauthenticated},
		{"token limited to another repository", "items", []string{"Authorization", "Bearer " + tokLimited}, 403, ReasonRepoNotAllowed},
		{"limited token on an unserved repository learns nothing", "/repos/acme/nope/items", []string{"Authorization", "Bearer " + tokLimited}, 403, ReasonRepoNotAllowed},
		{"repository not served", "/repos/acme/nope/items", []string{"Authorization", "Bearer " + tokPM}, 404, ReasonRepoNotServed},
		{"unknown route", "/nope", []string{"Authorization", "Bearer " + tokPM}, 404, ReasonNotFound},
		{"bad item id", "items/issue-0", []string{"Authorization", "Bearer " + tokPM}, 422, ReasonInvalidRequest},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := f.call("GET", c.path, "", nil, c.header...)
			f.problemIs(r, c.status, c.reason)
			if c.status == 401 && r.header.Get("WWW-Authenticate") == "" {
				t.Fatal("401 without WWW-Authenticate")
			}
		})
	}
	// The repository name is matched without regard to case.
	f.must(f.call("GET", "/repos/ACME/App/items", tokPM, nil), 200)
}

func TestRoleRefusals(t *testing.T) {
	f := newFixture(t)
	f.seed(10, []string{"ruling-owner:pm"})
	f.seed(11, nil)
	create := map[string]any{"title": "t", "specification": "s"}
	// A worker neither creates, adopts nor forgets items.
	f.problemIs(f.call("POST", "items", tokWorker1, create), 403, ReasonRoleNotAllowed)
	f.problemIs(f.call("POST", "items/adopt", tokWorker1, map[string]any{"number": 1}), 403, ReasonRoleNotAllowed)
	f.problemIs(f.call("DELETE", "items/issue-11", tokWorker1, nil), 403, ReasonRoleNotAllowed)
	// A worker claims only under its own token's prefix, and takes no
	// maintenance claims.
	f.problemIs(f.call("POST", "items/issue-10/claim", tokWorker1, map[string]any{"owner": "w2/run-1"}), 403, ReasonOwnerNotAllowed)
	f.problemIs(f.call("POST", "items/issue-10/claim", tokWorker1, map[string]any{"owner": "w1"}), 403, ReasonOwnerNotAllowed)
	f.problemIs(f.call("POST", "items/issue-10/claim", tokWorker1, map[string]any{"owner": "w1/run-1", "purpose": "maintenance"}), 403, ReasonRoleNotAllowed)
	if n := f.issueCount(); n != 0 {
		t.Fatalf("refused requests opened %d issues", n)
	}
	// A human act through a worker token, even under the worker's own claim.
	c := f.must(f.call("POST", "items/issue-10/claim", tokWorker1, map[string]any{"owner": "w1/run-1"}), 200)
	if c.body["granted"] != true {
		t.Fatalf("claim: %s", c.raw)
	}
	tok := c.num("fencingToken")
	r := f.call("PATCH", "items/issue-10", tokWorker1, map[string]any{"removeTags": []string{"ruling-owner:pm"}, "fencingToken": tok})
	f.problemIs(r, 403, ReasonHumanAct)
	// Another worker may not write, renew or release under w1's claim.
	f.problemIs(f.call("PATCH", "items/issue-10", tokWorker2, map[string]any{"body": "x", "fencingToken": tok}), 403, ReasonOwnerNotAllowed)
	f.problemIs(f.call("POST", "items/issue-10/renew", tokWorker2, map[string]any{"fencingToken": tok}), 403, ReasonOwnerNotAllowed)
	f.problemIs(f.call("POST", "items/issue-10/release", tokWorker2, map[string]any{"fencingToken": tok}), 403, ReasonOwnerNotAllowed)
	// A worker writes nothing without its own claim.
	f.problemIs(f.call("PATCH", "items/issue-11", tokWorker1, map[string]any{"title": "renamed"}), 403, ReasonOwnerNotAllowed)
	// Changing phase: after creation needs a pm token.
	f.problemIs(f.call("PATCH", "items/issue-10", tokWorker1, map[string]any{"addTags": []string{"phase:research"},
		"removeTags": []string{"phase:implementation"}, "fencingToken": tok}), 403, ReasonHumanAct)
	// The human token may.
	f.must(f.call("PATCH", "items/issue-10", tokHuman, map[string]any{"removeTags": []string{"ruling-owner:pm"}, "fencingToken": tok}), 200)
}

func TestMalformedRequestsNameTheField(t *testing.T) {
	f := newFixture(t)
	f.seed(5, nil)
	long := strings.Repeat("x", 257)
	cases := []struct {
		name, method, path string
		body               any
		status             int
		reason, field      string
	}{
		{"unknown field", "POST", "items", map[string]any{"title": "t", "specification": "s", "colour": "red"}, 422, ReasonInvalidRequest, "colour"},
		{"unknown nested field", "POST", "items", map[string]any{"title": "t", "specification": "s", "links": []any{map[string]any{"rel": "related", "target": "issue-5", "weight": 1}}}, 422, ReasonInvalidRequest, "weight"},
		{"title missing", "POST", "items", map[string]any{"specification": "s"}, 422, ReasonInvalidRequest, "title"},
		{"title empty", "POST", "items", map[string]any{"title": "  ", "specification": "s"}, 422, ReasonInvalidRequest, "title"},
		{"title too long", "POST", "items", map[string]any{"title": long, "specification": "s"}, 422, ReasonInvalidRequest, "title"},
		{"title not a string", "POST", "items", map[string]any{"title": 7, "specification": "s"}, 422, ReasonInvalidRequest, "title"},
		{"specification missing", "POST", "items", map[string]any{"title": "t"}, 422, ReasonInvalidRequest, "specification"},
		{"specification too long", "POST", "items", map[string]any{"title": "t", "specification": strings.Repeat("s", 65537)}, 422, ReasonInvalidRequest, "specification"},
		{"specification leaves no room for the marker", "POST", "items", map[string]any{"title": "t", "specification": strings.Repeat("s", 65536)}, 422, ReasonInvalidRequest, "specification"},
		{"bad tag", "POST", "items", map[string]any{"title": "t", "specification": "s", "tags": []string{"priority:P1", "two words"}}, 422, ReasonInvalidRequest, "tags[1]"},
		{"bad relation", "POST", "items", map[string]any{"title": "t", "specification": "s", "links": []any{map[string]any{"rel": "dependsOn", "target": "issue-5"}}}, 422, ReasonInvalidRequest, "links[0].rel"},
		{"bad target", "POST", "items", map[string]any{"title": "t", "specification": "s", "links": []any{map[string]any{"rel": "blockedBy", "target": "5"}}}, 422, ReasonInvalidRequest, "links[0].target"},
		{"key of another repository", "POST", "items", map[string]any{"title": "t", "specification": "s", "links": []any{map[string]any{"rel": "blockedBy", "target": "repo/other/mem/backlog/issue-5"}}}, 422, ReasonInvalidRequest, "links[0].target"},
		{"absolute anchor", "POST", "items", map[string]any{"title": "t", "specification": "s", "links": []any{map[string]any{"rel": "anchoredTo", "target": "/etc/passwd"}}}, 422, ReasonInvalidRequest, "links[0].target"},
		{"two epics", "POST", "items", map[string]any{"title": "t", "specification": "s", "links": []any{map[string]any{"rel": "partOf", "target": "issue-5"}, map[string]any{"rel": "partOf", "target": "issue-6"}}}, 422, ReasonInvalidRequest, "links"},
		{"not JSON", "POST", "items", "{title", 400, ReasonInvalidJSON, ""},
		{"two values", "POST", "items", `{"title":"t","specification":"s"} {}`, 400, ReasonInvalidJSON, ""},
		{"array body", "POST", "items", `[1]`, 400, ReasonInvalidJSON, ""},
		{"empty body", "POST", "items/issue-5/claim", "", 400, ReasonInvalidJSON, ""},
		{"too large", "POST", "items", `{"title":"` + strings.Repeat("x", MaxBody) + `"}`, 413, ReasonTooLarge, ""},
		{"adopt without number", "POST", "items/adopt", map[string]any{}, 422, ReasonInvalidRequest, "number"},
		{"adopt number 0", "POST", "items/adopt", map[string]any{"number": 0}, 422, ReasonInvalidRequest, "number"},
		{"claim without owner", "POST", "items/issue-5/claim", map[string]any{}, 422, ReasonInvalidRequest, "owner"},
		{"claim owner with a space", "POST", "items/issue-5/claim", map[string]any{"owner": "pm/a b"}, 422, ReasonInvalidRequest, "owner"},
		{"lease 0", "POST", "items/issue-5/claim", map[string]any{"owner": "pm/a", "leaseSeconds": 0}, 422, ReasonInvalidRequest, "leaseSeconds"},
		{"negative lease", "POST", "items/issue-5/claim", map[string]any{"owner": "pm/a", "leaseSeconds": -5}, 422, ReasonInvalidRequest, "leaseSeconds"},
		{"wait above 60", "POST", "items/issue-5/claim", map[string]any{"owner": "pm/a", "maxWaitSeconds": 61}, 422, ReasonInvalidRequest, "maxWaitSeconds"},
		{"unknown purpose", "POST", "items/issue-5/claim", map[string]any{"owner": "pm/a", "purpose": "urgent"}, 422, ReasonInvalidRequest, "purpose"},
		{"bad branch", "POST", "items/issue-5/claim", map[string]any{"owner": "pm/a", "branch": "a..b"}, 422, ReasonInvalidRequest, "branch"},
		{"renew without token", "POST", "items/issue-5/renew", map[string]any{"leaseSeconds": 5}, 422, ReasonInvalidRequest, "fencingToken"},
		{"release token not an integer", "POST", "items/issue-5/release", map[string]any{"fencingToken": 1.5}, 422, ReasonInvalidRequest, "fencingToken"},
		{"release token as a string", "POST", "items/issue-5/release", map[string]any{"fencingToken": "3"}, 422, ReasonInvalidRequest, "fencingToken"},
		{"release token 0", "POST", "items/issue-5/release", map[string]any{"fencingToken": 0}, 422, ReasonInvalidRequest, "fencingToken"},
		{"patch unknown field", "PATCH", "items/issue-5", map[string]any{"tags": []string{"a"}}, 422, ReasonInvalidRequest, "tags"},
		{"patch that changes nothing", "PATCH", "items/issue-5", map[string]any{"fencingToken": 3}, 422, ReasonInvalidRequest, ""},
		{"patch bad removeTags", "PATCH", "items/issue-5", map[string]any{"removeTags": []string{""}}, 422, ReasonInvalidRequest, "removeTags[0]"},
		{"delete token twice", "DELETE", "items/issue-5?fencingToken=2", map[string]any{"fencingToken": 3}, 422, ReasonInvalidRequest, "fencingToken"},
		{"delete bad query token", "DELETE", "items/issue-5?fencingToken=x", nil, 422, ReasonInvalidRequest, "fencingToken"},
		{"limit 0", "GET", "items?limit=0", nil, 422, ReasonInvalidRequest, "limit"},
		{"limit 1001", "GET", "items?limit=1001", nil, 422, ReasonInvalidRequest, "limit"},
		{"forged cursor", "GET", "items?cursor=abc", nil, 422, ReasonInvalidRequest, "cursor"},
		{"id with a leading zero", "GET", "items/issue-05", nil, 422, ReasonInvalidRequest, "id"},
		{"missing item", "GET", "items/issue-99", nil, 404, ReasonMissing, ""},
		{"wrong method", "PUT", "items/issue-5", map[string]any{}, 405, ReasonMethod, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := f.call(c.method, c.path, tokPM, c.body)
			f.problemIs(r, c.status, c.reason, c.field)
		})
	}
	t.Run("content type", func(t *testing.T) {
		r := f.call("POST", "items", tokPM, `{"title":"t","specification":"s"}`, "Content-Type", "text/plain")
		f.problemIs(r, http.StatusUnsupportedMediaType, ReasonUnsupportedMedia)
	})
	t.Run("idempotency key", func(t *testing.T) {
		r := f.call("POST", "items", tokPM, map[string]any{"title": "t", "specification": "s"}, IdempotencyHeader, "has space")
		f.problemIs(r, 422, ReasonInvalidRequest, IdempotencyHeader)
	})
	if n := f.issueCount(); n != 0 {
		t.Fatalf("malformed requests opened %d issues", n)
	}
}
