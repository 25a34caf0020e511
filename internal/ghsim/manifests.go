package ghsim

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
)

// The manifest flow (https://docs.github.com/apps/sharing-github-apps/registering-a-github-app-from-a-manifest):
// the App's owner posts a manifest to github.com, GitHub redirects to the
// manifest's redirect_url with a temporary code, and the code is exchanged,
// without authentication, for the new App's credentials with
// POST /app-manifests/{code}/conversions. Codes are single-use and expire
// after an hour.
//
// The simulator has no github.com web UI: a test plays the browser and GitHub
// by minting a code with Sim.ManifestCode. The App "created" is the
// simulator's own App (its id, slug and private key), so credentials obtained
// by the flow work against this simulator; its permissions and events are the
// manifest's.

// manifestCodeTTL is how long a manifest code can be converted.
const manifestCodeTTL = time.Hour

type manifestCode struct {
	manifest json.RawMessage
	expires  time.Time
}

type manifestStore struct {
	mu        sync.Mutex
	codes     map[string]*manifestCode
	submitted []json.RawMessage
}

func (s *Sim) manifests() *manifestStore {
	s.manifestOnce.Do(func() { s.manifestSt = &manifestStore{codes: map[string]*manifestCode{}} })
	return s.manifestSt
}

// ManifestCode records manifestJSON as submitted to github.com's new-App
// page and returns the code GitHub would put on the redirect to the
// manifest's redirect_url. The code converts once, within an hour.
func (s *Sim) ManifestCode(manifestJSON string) string {
	b := make([]byte, 10)
	rand.Read(b)
	code := hex.EncodeToString(b)
	m := s.manifests()
	m.mu.Lock()
	defer m.mu.Unlock()
	raw := json.RawMessage(append([]byte(nil), manifestJSON...))
	m.codes[code] = &manifestCode{manifest: raw, expires: s.now().Add(manifestCodeTTL)}
	m.submitted = append(m.submitted, raw)
	return code
}

// Manifests returns the manifests submitted with ManifestCode, oldest first.
func (s *Sim) Manifests() []json.RawMessage {
	m := s.manifests()
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]json.RawMessage(nil), m.submitted...)
}

// manifestRoutes serves the conversion, which needs no authentication.
func (s *Sim) manifestRoutes(r chi.Router) {
	r.Post("/app-manifests/{code}/conversions", s.convertManifest)
}

func (s *Sim) convertManifest(w http.ResponseWriter, r *http.Request) {
	code := chi.URLParam(r, "code")
	m := s.manifests()
	m.mu.Lock()
	c := m.codes[code]
	delete(m.codes, code) // single-use, even when expired
	m.mu.Unlock()
	if c == nil || !s.now().Before(c.expires) {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	var man struct {
		Name               string            `json:"name"`
		URL                string            `json:"url"`
		Description        string            `json:"description"`
		DefaultPermissions map[string]string `json:"default_permissions"`
		DefaultEvents      []string          `json:"default_events"`
	}
	if err := json.Unmarshal(c.manifest, &man); err != nil || man.Name == "" {
		writeValidation(w, "Integration", "manifest", "invalid", "the manifest is not a JSON object with a name")
		return
	}
	perms := map[string]string{"metadata": "read"} // every App has it
	for k, v := range man.DefaultPermissions {
		perms[k] = v
	}
	events := append([]string{}, man.DefaultEvents...)

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.opt.WebhookSecret == "" {
		b := make([]byte, 20)
		rand.Read(b)
		s.opt.WebhookSecret = hex.EncodeToString(b)
	}
	secret := make([]byte, 20)
	rand.Read(secret)
	out := s.appJSON()
	out["name"] = man.Name
	out["external_url"] = man.URL
	out["description"] = man.Description
	out["permissions"] = perms
	out["events"] = events
	out["client_id"] = fmt.Sprintf("Iv1.%016x", s.opt.AppID)
	out["client_secret"] = hex.EncodeToString(secret)
	out["webhook_secret"] = s.opt.WebhookSecret
	out["pem"] = string(s.PrivateKeyPEM())
	writeJSON(w, http.StatusCreated, out)
}
