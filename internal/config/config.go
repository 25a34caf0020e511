// Package config reads warden's process-wide settings (CONTRACT.md §2) from
// the environment, with a flag overriding each non-secret one, and refuses a
// bad value with one line naming it.
package config

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"
)

// Settings are warden's process-wide settings (CONTRACT.md §2), read from
// the environment; a flag overrides each non-secret one. Secrets are never
// taken from flags (command lines are visible to every local user).
type Settings struct {
	Listen            string
	AdminListen       string
	Database          string
	AppID             int64
	PrivateKey        []byte
	WebhookSecrets    [][]byte
	GitHubAPIURL      string
	Agents            []string
	APITokens         []APIToken
	Region            string
	LeaseDefault      time.Duration
	LeaseMax          time.Duration
	Quarantine        time.Duration
	ReconcileInterval time.Duration
	MCPRepos          map[string]string
	LogLevel          string
}

// APIToken is one WARDEN_API_TOKENS entry.
type APIToken struct {
	Name  string
	Token string
	Role  string   // worker, pm or human
	Repos []string // empty: every repository
}

// Error is a start-up refusal: one line naming what is wrong. Commands exit
// with status 2 on it.
type Error struct{ Msg string }

// Error is Msg on one line (OneLine).
func (e *Error) Error() string { return OneLine(e.Msg) }

// OneLine joins a message's lines with "; " (or a space after a line
// ending in a colon), trimming each, so a refusal that quotes a driver's or
// a library's several lines (pgx names each address it tried) never spills
// over lines.
func OneLine(msg string) string {
	if !strings.ContainsAny(msg, "\r\n") {
		return msg
	}
	var b strings.Builder
	for _, l := range strings.FieldsFunc(msg, func(r rune) bool { return r == '\n' || r == '\r' }) {
		if l = strings.TrimSpace(l); l == "" {
			continue
		}
		if b.Len() > 0 {
			if strings.HasSuffix(b.String(), ":") {
				b.WriteString(" ")
			} else {
				b.WriteString("; ")
			}
		}
		b.WriteString(l)
	}
	return b.String()
}

func bad(format string, a ...any) error { return &Error{fmt.Sprintf(format, a...)} }

var (
	loginRe    = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:\[bot\])?$`)
	repoRe     = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}$`)
	tokenName  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
	regionRe   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
	repoIDRe   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$`)
	validRoles = map[string]bool{"worker": true, "pm": true, "human": true}
)

// Flags registers the overriding flags on fs and returns a function
// that loads the settings once fs is parsed. need says which settings the
// command requires ("app" for the GitHub App's, "secret" for the webhook
// secret).
func Flags(fs *flag.FlagSet, getenv func(string) string) func(need ...string) (*Settings, error) {
	listen := fs.String("listen", "", "public listener (WARDEN_LISTEN, default :8080)")
	admin := fs.String("admin-listen", "", "operators' listener (WARDEN_ADMIN_LISTEN, default 127.0.0.1:9090)")
	database := fs.String("database", "", "sqlite:PATH or postgres:// URL (WARDEN_DATABASE, default sqlite:warden.db)")
	appID := fs.String("app-id", "", "the GitHub App's id (WARDEN_APP_ID)")
	keyFile := fs.String("private-key-file", "", "the App's PEM private key file (WARDEN_PRIVATE_KEY_FILE)")
	apiURL := fs.String("github-api-url", "", "GitHub REST base URL (WARDEN_GITHUB_API_URL)")
	region := fs.String("region", "", "the homeRegion served here (WARDEN_REGION, default local)")
	logLevel := fs.String("log-level", "", "debug, info, warn or error (WARDEN_LOG_LEVEL, default info)")
	return func(need ...string) (*Settings, error) {
		get := func(flagVal, env, def string) string {
			if flagVal != "" {
				return flagVal
			}
			if v := strings.TrimSpace(getenv(env)); v != "" {
				return v
			}
			return def
		}
		s := &Settings{
			Listen:       get(*listen, "WARDEN_LISTEN", ":8080"),
			AdminListen:  get(*admin, "WARDEN_ADMIN_LISTEN", "127.0.0.1:9090"),
			Database:     get(*database, "WARDEN_DATABASE", "sqlite:warden.db"),
			GitHubAPIURL: get(*apiURL, "WARDEN_GITHUB_API_URL", "https://api.github.com/"),
			Region:       get(*region, "WARDEN_REGION", "local"),
			LogLevel:     get(*logLevel, "WARDEN_LOG_LEVEL", "info"),
		}
		var err error
		for _, l := range [][2]string{{"WARDEN_LISTEN", s.Listen}, {"WARDEN_ADMIN_LISTEN", s.AdminListen}} {
			if _, _, err := net.SplitHostPort(l[1]); err != nil {
				return nil, bad("%s: %q is not host:port", l[0], l[1])
			}
		}
		if !strings.HasPrefix(s.Database, "sqlite:") && !strings.HasPrefix(s.Database, "postgres://") &&
			!strings.HasPrefix(s.Database, "postgresql://") {
			return nil, bad("WARDEN_DATABASE: must be sqlite:PATH or a postgres:// URL")
		}
		u, err := url.Parse(s.GitHubAPIURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return nil, bad("WARDEN_GITHUB_API_URL: %q is not an http(s) URL", s.GitHubAPIURL)
		}
		if !strings.HasSuffix(s.GitHubAPIURL, "/") {
			s.GitHubAPIURL += "/"
		}
		if !regionRe.MatchString(s.Region) {
			return nil, bad("WARDEN_REGION: %q is not a region name (letters, digits, . _ -)", s.Region)
		}
		if !map[string]bool{"debug": true, "info": true, "warn": true, "error": true}[s.LogLevel] {
			return nil, bad("WARDEN_LOG_LEVEL: %q is not debug, info, warn or error", s.LogLevel)
		}
		durations := []struct {
			env  string
			def  string
			into *time.Duration
		}{
			{"WARDEN_LEASE_DEFAULT", "30s", &s.LeaseDefault},
			{"WARDEN_LEASE_MAX", "30m", &s.LeaseMax},
			{"WARDEN_QUARANTINE", "1h", &s.Quarantine},
			{"WARDEN_RECONCILE_INTERVAL", "10m", &s.ReconcileInterval},
		}
		for _, d := range durations {
			v := get("", d.env, d.def)
			dur, err := time.ParseDuration(v)
			if err != nil || dur <= 0 {
				return nil, bad("%s: %q is not a positive duration such as 30s or 10m", d.env, v)
			}
			*d.into = dur
		}
		if s.LeaseDefault > s.LeaseMax {
			return nil, bad("WARDEN_LEASE_DEFAULT (%s) is longer than WARDEN_LEASE_MAX (%s)", s.LeaseDefault, s.LeaseMax)
		}
		if s.Agents, err = parseAgents(getenv("WARDEN_AGENTS")); err != nil {
			return nil, err
		}
		if s.APITokens, err = parseTokens(getenv("WARDEN_API_TOKENS")); err != nil {
			return nil, err
		}
		if s.MCPRepos, err = parseMCPRepos(getenv("WARDEN_MCP_REPOS")); err != nil {
			return nil, err
		}
		for _, n := range need {
			switch n {
			case "app":
				if err := s.loadApp(get(*appID, "WARDEN_APP_ID", ""), get(*keyFile, "WARDEN_PRIVATE_KEY_FILE", ""), getenv); err != nil {
					return nil, err
				}
			case "secret":
				for _, sec := range strings.Split(getenv("WARDEN_WEBHOOK_SECRET"), ",") {
					if sec = strings.TrimSpace(sec); sec != "" {
						s.WebhookSecrets = append(s.WebhookSecrets, []byte(sec))
					}
				}
				if len(s.WebhookSecrets) == 0 {
					return nil, bad("WARDEN_WEBHOOK_SECRET is required (the App's webhook secret; several may be given, comma-separated)")
				}
			}
		}
		return s, nil
	}
}

func (s *Settings) loadApp(id, keyFile string, getenv func(string) string) error {
	if id == "" {
		return bad("WARDEN_APP_ID is required (the GitHub App's numeric id)")
	}
	var n int64
	if _, err := fmt.Sscanf(id, "%d", &n); err != nil || n <= 0 || fmt.Sprint(n) != id {
		return bad("WARDEN_APP_ID: %q is not a positive number", id)
	}
	s.AppID = n
	inline := getenv("WARDEN_PRIVATE_KEY")
	switch {
	case inline != "" && keyFile != "":
		return bad("set only one of WARDEN_PRIVATE_KEY and WARDEN_PRIVATE_KEY_FILE")
	case inline != "":
		s.PrivateKey = []byte(strings.ReplaceAll(inline, `\n`, "\n"))
	case keyFile != "":
		b, err := os.ReadFile(keyFile)
		if err != nil {
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return bad("WARDEN_PRIVATE_KEY_FILE: cannot read %s: %v", keyFile, err)
		}
		s.PrivateKey = b
	default:
		return bad("WARDEN_PRIVATE_KEY or WARDEN_PRIVATE_KEY_FILE is required (the App's PEM private key)")
	}
	return nil
}

func splitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func parseAgents(v string) ([]string, error) {
	out := splitList(v)
	for _, l := range out {
		if !loginRe.MatchString(l) {
			return nil, bad("WARDEN_AGENTS: %q is not a GitHub login", l)
		}
	}
	return out, nil
}

// parseTokens reads name:token:role[:owner/repo+owner/repo…] entries. Errors
// name the entry by its position and name, never by its token.
func parseTokens(v string) ([]APIToken, error) {
	var out []APIToken
	names, secrets := map[string]bool{}, map[string]bool{}
	for i, e := range splitList(v) {
		parts := strings.Split(e, ":")
		if len(parts) < 3 || len(parts) > 4 {
			return nil, bad("WARDEN_API_TOKENS entry %d: want name:token:role[:owner/repo+owner/repo]", i+1)
		}
		t := APIToken{Name: parts[0], Token: parts[1], Role: parts[2]}
		if !tokenName.MatchString(t.Name) {
			return nil, bad("WARDEN_API_TOKENS entry %d: name %q must be letters, digits, . _ - (at most 64)", i+1, t.Name)
		}
		if len(t.Token) < 16 {
			return nil, bad("WARDEN_API_TOKENS entry %d (%s): the token must be at least 16 characters", i+1, t.Name)
		}
		if !validRoles[t.Role] {
			return nil, bad("WARDEN_API_TOKENS entry %d (%s): role %q is not worker, pm or human", i+1, t.Name, t.Role)
		}
		if names[t.Name] {
			return nil, bad("WARDEN_API_TOKENS entry %d: name %q is used twice", i+1, t.Name)
		}
		if secrets[t.Token] {
			return nil, bad("WARDEN_API_TOKENS entry %d (%s): its token is the same as another entry's", i+1, t.Name)
		}
		names[t.Name], secrets[t.Token] = true, true
		if len(parts) == 4 {
			for _, r := range strings.Split(parts[3], "+") {
				if !repoRe.MatchString(r) {
					return nil, bad("WARDEN_API_TOKENS entry %d (%s): %q is not owner/repo", i+1, t.Name, r)
				}
				t.Repos = append(t.Repos, r)
			}
		}
		out = append(out, t)
	}
	return out, nil
}

func parseMCPRepos(v string) (map[string]string, error) {
	out := map[string]string{}
	for _, e := range splitList(v) {
		id, repo, ok := strings.Cut(e, "=")
		if !ok || !repoIDRe.MatchString(id) || !repoRe.MatchString(repo) {
			return nil, bad("WARDEN_MCP_REPOS: %q is not repoId=owner/repo", e)
		}
		if _, dup := out[id]; dup {
			return nil, bad("WARDEN_MCP_REPOS: repoId %q is given twice", id)
		}
		out[id] = repo
	}
	return out, nil
}
