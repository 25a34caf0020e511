package ghsim

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestManifestConversion(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	sim, err := New(Options{Now: clock, WebhookSecret: "hook-secret"})
	if err != nil {
		t.Fatal(err)
	}
	srv := sim.Start()
	defer srv.Close()
	post := func(code string) (*http.Response, map[string]any) {
		t.Helper()
		resp, err := http.Post(srv.URL+"/app-manifests/"+code+"/conversions", "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		return resp, body
	}
	manifest := `{"name":"warden","url":"https://example.com/w","default_permissions":{"issues":"write","checks":"write"},"default_events":["issues","push"]}`
	code := sim.ManifestCode(manifest)

	// No Authorization header: the conversion needs none.
	resp, body := post(code)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("conversion: status %d %v, want 201", resp.StatusCode, body)
	}
	if got := body["id"]; got != float64(sim.AppID()) {
		t.Errorf("id %v, want %d", got, sim.AppID())
	}
	if body["pem"] != string(sim.PrivateKeyPEM()) {
		t.Errorf("pem is not the simulator's private key")
	}
	if body["webhook_secret"] != "hook-secret" {
		t.Errorf("webhook_secret %v, want the simulator's", body["webhook_secret"])
	}
	for _, k := range []string{"slug", "node_id", "owner", "client_id", "client_secret"} {
		if v, ok := body[k]; !ok || v == "" || v == nil {
			t.Errorf("%s missing: %v", k, v)
		}
	}
	if body["name"] != "warden" {
		t.Errorf("name %v, want the manifest's", body["name"])
	}
	perms, _ := json.Marshal(body["permissions"])
	if string(perms) != `{"checks":"write","issues":"write","metadata":"read"}` {
		t.Errorf("permissions %s, want the manifest's (plus metadata)", perms)
	}
	events, _ := json.Marshal(body["events"])
	if string(events) != `["issues","push"]` {
		t.Errorf("events %s, want the manifest's", events)
	}
	if ms := sim.Manifests(); len(ms) != 1 || string(ms[0]) != manifest {
		t.Errorf("Manifests() = %s, want the one submitted", ms)
	}

	// Single-use.
	if resp, body := post(code); resp.StatusCode != http.StatusNotFound || body["message"] != "Not Found" {
		t.Errorf("second conversion: %d %v, want 404 Not Found", resp.StatusCode, body)
	}
	// Unknown.
	if resp, _ := post("nope"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown code: %d, want 404", resp.StatusCode)
	}
	// Expired after an hour.
	old := sim.ManifestCode(manifest)
	advance(time.Hour)
	if resp, _ := post(old); resp.StatusCode != http.StatusNotFound {
		t.Errorf("expired code: %d, want 404", resp.StatusCode)
	}
	fresh := sim.ManifestCode(manifest)
	advance(59 * time.Minute)
	if resp, _ := post(fresh); resp.StatusCode != http.StatusCreated {
		t.Errorf("code 59 minutes old: %d, want 201", resp.StatusCode)
	}
	if !strings.Contains(strings.Join(sim.Routes(), "\n"), "POST /app-manifests/{code}/conversions") {
		t.Errorf("Sim.Routes does not list the conversion")
	}
}
