package service

import (
	"os"
	"slices"
	"testing"

	yaml "go.yaml.in/yaml/v4"
)

// TestAppManifestMatchesTheService checks app.yml against what the service
// handles: every handled event is subscribed (or sent to every App anyway),
// nothing else is, and the permissions are exactly the least set.
func TestAppManifestMatchesTheService(t *testing.T) {
	b, err := os.ReadFile("../../app.yml")
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Permissions map[string]string `yaml:"default_permissions"`
		Events      []string          `yaml:"default_events"`
	}
	if err := yaml.Unmarshal(b, &m); err != nil {
		t.Fatalf("app.yml: %v", err)
	}
	events := append(append([]string(nil), m.Events...), "installation", "installation_repositories")
	slices.Sort(events)
	want := append([]string(nil), SubscribedEvents...)
	slices.Sort(want)
	if !slices.Equal(events, want) {
		t.Errorf("app.yml events (+ installation*) %v, the service handles %v", events, want)
	}
	least := map[string]string{"issues": "write", "pull_requests": "write", "checks": "write", "contents": "read", "metadata": "read"}
	if len(m.Permissions) != len(least) {
		t.Errorf("permissions %v, want exactly %v", m.Permissions, least)
	}
	for k, v := range least {
		if m.Permissions[k] != v {
			t.Errorf("permission %s: %q, want %q", k, m.Permissions[k], v)
		}
	}
}
