package ghsim

import (
	"encoding/base64"
	"fmt"
	"sort"
	"time"
)

// Renderers produce the JSON objects GitHub returns and puts in webhook
// payloads, with the fields GitHub's OpenAPI description marks required.
// They run under s.mu.

const apiBase = "https://api.github.com"
const webBase = "https://github.com"

func ts(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func tsPtr(t *time.Time) any {
	if t == nil {
		return nil
	}
	return ts(*t)
}

func nodeID(kind string, id int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf("%s:%d", kind, id)))
}

func (s *Sim) userJSON(u *User) map[string]any {
	if u == nil {
		return nil
	}
	api := apiBase + "/users/" + u.Login
	return map[string]any{
		"login": u.Login, "id": u.ID, "node_id": nodeID("U", u.ID), "type": string(u.Type), "site_admin": false,
		"avatar_url": "https://avatars.githubusercontent.com/u/" + fmt.Sprint(u.ID), "gravatar_id": "",
		"url": api, "html_url": webBase + "/" + u.Login, "followers_url": api + "/followers",
		"following_url": api + "/following{/other_user}", "gists_url": api + "/gists{/gist_id}",
		"starred_url": api + "/starred{/owner}{/repo}", "subscriptions_url": api + "/subscriptions",
		"organizations_url": api + "/orgs", "repos_url": api + "/repos", "events_url": api + "/events{/privacy}",
		"received_events_url": api + "/received_events", "user_view_type": "public",
	}
}

func (s *Sim) appJSON() map[string]any {
	owner := s.users["acme"]
	if owner == nil {
		owner = &User{ID: 1, Login: "acme", Type: TypeOrg}
	}
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return map[string]any{
		"id": s.opt.AppID, "slug": s.opt.AppSlug, "node_id": nodeID("A", s.opt.AppID), "client_id": fmt.Sprintf("Iv1.%016x", s.opt.AppID),
		"owner": s.userJSON(owner), "name": s.opt.AppName, "description": "keeps an agent-operated backlog honest",
		"external_url": "https://example.invalid/warden", "html_url": webBase + "/apps/" + s.opt.AppSlug,
		"created_at": ts(created), "updated_at": ts(created), "permissions": appPermissions(), "events": appEvents(),
		"installations_count": len(s.installs),
	}
}

func (s *Sim) installationJSON(in *Installation, full bool) map[string]any {
	if !full {
		return map[string]any{"id": in.ID, "node_id": nodeID("I", in.ID)}
	}
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	targetType := "Organization"
	if in.Account.Type == TypeUser {
		targetType = "User"
	}
	return map[string]any{
		"id": in.ID, "account": s.userJSON(in.Account), "repository_selection": "selected",
		"access_tokens_url": fmt.Sprintf("%s/app/installations/%d/access_tokens", apiBase, in.ID),
		"repositories_url":  apiBase + "/installation/repositories",
		"html_url":          fmt.Sprintf("%s/organizations/%s/settings/installations/%d", webBase, in.Account.Login, in.ID),
		"app_id":            s.opt.AppID, "app_slug": s.opt.AppSlug, "target_id": in.Account.ID, "target_type": targetType,
		"permissions": appPermissions(), "events": appEvents(), "created_at": ts(created), "updated_at": ts(created),
		"single_file_name": nil, "has_multiple_single_files": false, "single_file_paths": []string{},
		"suspended_by": nil, "suspended_at": suspendedAt(in, created),
	}
}

// suspendedAt is an installation's suspended_at: null unless it is
// suspended (the simulator keeps no time of suspension: it says the
// installation's creation).
func suspendedAt(in *Installation, created time.Time) any {
	if !in.Suspended {
		return nil
	}
	return ts(created)
}

func (s *Sim) repoJSON(r *Repo) map[string]any {
	api := apiBase + "/repos/" + r.FullName
	m := map[string]any{
		"id": r.ID, "node_id": nodeID("R", r.ID), "name": r.Name, "full_name": r.FullName, "private": r.Private,
		"owner": s.userJSON(r.Owner), "html_url": webBase + "/" + r.FullName, "description": nil, "fork": false,
		"url": api, "default_branch": r.DefaultBranch, "visibility": visibility(r.Private),
		"created_at": ts(r.CreatedAt), "updated_at": ts(r.CreatedAt), "pushed_at": ts(r.CreatedAt),
		"archived": false, "disabled": false, "has_issues": true, "open_issues_count": 0,
		"forks_url": api + "/forks", "keys_url": api + "/keys{/key_id}", "collaborators_url": api + "/collaborators{/collaborator}",
		"teams_url": api + "/teams", "hooks_url": api + "/hooks", "issue_events_url": api + "/issues/events{/number}",
		"events_url": api + "/events", "assignees_url": api + "/assignees{/user}", "branches_url": api + "/branches{/branch}",
		"tags_url": api + "/tags", "blobs_url": api + "/git/blobs{/sha}", "git_tags_url": api + "/git/tags{/sha}",
		"git_refs_url": api + "/git/refs{/sha}", "trees_url": api + "/git/trees{/sha}", "statuses_url": api + "/statuses/{sha}",
		"languages_url": api + "/languages", "stargazers_url": api + "/stargazers", "contributors_url": api + "/contributors",
		"subscribers_url": api + "/subscribers", "subscription_url": api + "/subscription", "commits_url": api + "/commits{/sha}",
		"git_commits_url": api + "/git/commits{/sha}", "comments_url": api + "/comments{/number}",
		"issue_comment_url": api + "/issues/comments{/number}", "contents_url": api + "/contents/{+path}",
		"compare_url": api + "/compare/{base}...{head}", "merges_url": api + "/merges", "archive_url": api + "/{archive_format}{/ref}",
		"downloads_url": api + "/downloads", "issues_url": api + "/issues{/number}", "pulls_url": api + "/pulls{/number}",
		"milestones_url": api + "/milestones{/number}", "notifications_url": api + "/notifications{?since,all,participating}",
		"labels_url": api + "/labels{/name}", "releases_url": api + "/releases{/id}", "deployments_url": api + "/deployments",
		"git_url": "git://github.com/" + r.FullName + ".git", "ssh_url": "git@github.com:" + r.FullName + ".git",
		"clone_url": webBase + "/" + r.FullName + ".git", "svn_url": webBase + "/" + r.FullName, "homepage": nil,
		"size": 0, "stargazers_count": 0, "watchers_count": 0, "language": nil, "has_projects": true, "has_downloads": true,
		"has_wiki": false, "has_pages": false, "has_discussions": false, "forks_count": 0, "mirror_url": nil,
		"open_issues": 0, "forks": 0, "watchers": 0, "license": nil, "allow_forking": true, "is_template": false,
		"web_commit_signoff_required": false, "topics": []string{},
		"network_count": 0, "subscribers_count": 0,
	}
	return m
}

func visibility(private bool) string {
	if private {
		return "private"
	}
	return "public"
}

func sortedInstallIDs(m map[int64]*Installation) []int64 {
	out := make([]int64, 0, len(m))
	for id := range m {
		out = append(out, id)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func sortedRepoIDs(m map[int64]*Repo) []int64 {
	out := make([]int64, 0, len(m))
	for id := range m {
		out = append(out, id)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
