package config

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var testKey = sync.OnceValue(func() []byte {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
})

func mapEnv(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func loadWith(t *testing.T, envs map[string]string, args []string, need ...string) (*Settings, error) {
	t.Helper()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(&bytes.Buffer{})
	load := Flags(fs, mapEnv(envs))
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return load(need...)
}

func TestSettingsDefaults(t *testing.T) {
	s, err := loadWith(t, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Listen != ":8080" || s.AdminListen != "127.0.0.1:9090" || s.Database != "sqlite:warden.db" ||
		s.GitHubAPIURL != "https://api.github.com/" || s.Region != "local" || s.LeaseDefault != 30*time.Second ||
		s.LeaseMax != 30*time.Minute || s.Quarantine != time.Hour || s.ReconcileInterval != 10*time.Minute {
		t.Fatalf("defaults differ from CONTRACT.md §2: %+v", s)
	}
}

func TestSettingsFlagOverridesEnv(t *testing.T) {
	s, err := loadWith(t, map[string]string{"WARDEN_LISTEN": ":1", "WARDEN_REGION": "eu"}, []string{"--listen", "127.0.0.1:7000"})
	if err != nil {
		t.Fatal(err)
	}
	if s.Listen != "127.0.0.1:7000" || s.Region != "eu" {
		t.Fatalf("got listen %q region %q", s.Listen, s.Region)
	}
}

func TestSettingsParsesLists(t *testing.T) {
	s, err := loadWith(t, map[string]string{
		"WARDEN_AGENTS":         "bot-one, worker-7[bot]",
		"WARDEN_API_TOKENS":     "pm:aaaaaaaaaaaaaaaaaaaa:pm,alice:bbbbbbbbbbbbbbbbbbbb:human:o/r+o/s",
		"WARDEN_MCP_REPOS":      "lattice=o/r",
		"WARDEN_GITHUB_API_URL": "http://127.0.0.1:9/api",
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Agents) != 2 || s.Agents[1] != "worker-7[bot]" {
		t.Fatalf("agents %q", s.Agents)
	}
	if len(s.APITokens) != 2 || s.APITokens[1].Role != "human" || len(s.APITokens[1].Repos) != 2 {
		t.Fatalf("tokens %+v", s.APITokens)
	}
	if s.MCPRepos["lattice"] != "o/r" {
		t.Fatalf("mcp repos %v", s.MCPRepos)
	}
	if s.GitHubAPIURL != "http://127.0.0.1:9/api/" {
		t.Fatalf("api url %q", s.GitHubAPIURL)
	}
}

func TestSettingsRefusals(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "key.pem")
	os.WriteFile(keyFile, testKey(), 0o600)
	secretToken := "s3cr3t-token-value-xyz"
	cases := []struct {
		name string
		env  map[string]string
		need []string
		want string // in the error
	}{
		{"listen", map[string]string{"WARDEN_LISTEN": "8080"}, nil, "WARDEN_LISTEN"},
		{"admin", map[string]string{"WARDEN_ADMIN_LISTEN": "localhost"}, nil, "WARDEN_ADMIN_LISTEN"},
		{"database", map[string]string{"WARDEN_DATABASE": "mysql://x"}, nil, "WARDEN_DATABASE"},
		{"api url", map[string]string{"WARDEN_GITHUB_API_URL": "ftp://x"}, nil, "WARDEN_GITHUB_API_URL"},
		{"region", map[string]string{"WARDEN_REGION": "eu west"}, nil, "WARDEN_REGION"},
		{"lease", map[string]string{"WARDEN_LEASE_DEFAULT": "soon"}, nil, "WARDEN_LEASE_DEFAULT"},
		{"lease negative", map[string]string{"WARDEN_LEASE_MAX": "-1s"}, nil, "WARDEN_LEASE_MAX"},
		{"lease order", map[string]string{"WARDEN_LEASE_DEFAULT": "1h", "WARDEN_LEASE_MAX": "30m"}, nil, "longer than WARDEN_LEASE_MAX"},
		{"quarantine", map[string]string{"WARDEN_QUARANTINE": "0s"}, nil, "WARDEN_QUARANTINE"},
		{"interval", map[string]string{"WARDEN_RECONCILE_INTERVAL": "10"}, nil, "WARDEN_RECONCILE_INTERVAL"},
		{"agents", map[string]string{"WARDEN_AGENTS": "good,bad login"}, nil, "WARDEN_AGENTS"},
		{"token shape", map[string]string{"WARDEN_API_TOKENS": "pm:" + secretToken}, nil, "entry 1"},
		{"token role", map[string]string{"WARDEN_API_TOKENS": "pm:" + secretToken + ":admin"}, nil, "role \"admin\""},
		{"token short", map[string]string{"WARDEN_API_TOKENS": "pm:short:pm"}, nil, "at least 16"},
		{"token dup name", map[string]string{"WARDEN_API_TOKENS": "pm:" + secretToken + ":pm,pm:" + secretToken + "2:pm"}, nil, "used twice"},
		{"token dup secret", map[string]string{"WARDEN_API_TOKENS": "a:" + secretToken + ":pm,b:" + secretToken + ":worker"}, nil, "same as another"},
		{"token repo", map[string]string{"WARDEN_API_TOKENS": "pm:" + secretToken + ":pm:norepo"}, nil, "owner/repo"},
		{"mcp", map[string]string{"WARDEN_MCP_REPOS": "x"}, nil, "WARDEN_MCP_REPOS"},
		{"app id missing", nil, []string{"app"}, "WARDEN_APP_ID is required"},
		{"app id bad", map[string]string{"WARDEN_APP_ID": "12a"}, []string{"app"}, "WARDEN_APP_ID"},
		{"key missing", map[string]string{"WARDEN_APP_ID": "1"}, []string{"app"}, "WARDEN_PRIVATE_KEY"},
		{"key both", map[string]string{"WARDEN_APP_ID": "1", "WARDEN_PRIVATE_KEY": "x", "WARDEN_PRIVATE_KEY_FILE": keyFile}, []string{"app"}, "only one"},
		{"key unreadable", map[string]string{"WARDEN_APP_ID": "1", "WARDEN_PRIVATE_KEY_FILE": "/nonexistent/key.pem"}, []string{"app"}, "cannot read"},
		{"secret missing", map[string]string{"WARDEN_WEBHOOK_SECRET": " , "}, []string{"secret"}, "WARDEN_WEBHOOK_SECRET is required"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := loadWith(t, c.env, nil, c.need...)
			if err == nil {
				t.Fatalf("accepted; want an error naming %q", c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q does not name %q", err, c.want)
			}
			if strings.Contains(err.Error(), secretToken) {
				t.Fatalf("error leaks a token: %q", err)
			}
			if strings.Count(err.Error(), "\n") > 0 {
				t.Fatalf("error is not one line: %q", err)
			}
		})
	}
}

// TestErrorIsOneLine: a refusal quoting a multi-line driver message is
// printed on one line.
func TestErrorIsOneLine(t *testing.T) {
	cases := []struct{ msg, want string }{
		{"WARDEN_LISTEN: bad", "WARDEN_LISTEN: bad"},
		{"WARDEN_DATABASE: open postgres: failed to connect:\n\t[::1]:1 (localhost): dial error\n\t127.0.0.1:1 (localhost): dial error\n",
			"WARDEN_DATABASE: open postgres: failed to connect: [::1]:1 (localhost): dial error; 127.0.0.1:1 (localhost): dial error"},
		{"a\r\nb", "a; b"},
	}
	for _, c := range cases {
		if got := (&Error{Msg: c.msg}).Error(); got != c.want {
			t.Errorf("Error(%q) = %q, want %q", c.msg, got, c.want)
		}
	}
}
