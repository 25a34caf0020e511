package app

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v4"
	"github.com/prometheus/client_golang/prometheus"
)

const testAppID = 4242

// testKey is generated once per test binary.
var testKey = sync.OnceValue(func() *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	return k
})

func testKeyPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(testKey())})
}

// apiHandler answers an installation-authenticated request; n is how many
// times METHOD PATH has been requested, this one included.
type apiHandler func(w http.ResponseWriter, r *http.Request, n int)

// fakeGitHub plays the parts of GitHub the App uses: GET /app and token
// creation (both JWT-checked), and whatever api answers for the rest
// (installation-token-checked).
type fakeGitHub struct {
	t   *testing.T
	srv *httptest.Server
	api apiHandler

	mu   sync.Mutex
	hits map[string]int // "METHOD /path" → requests
}

func newFake(t *testing.T, api apiHandler) *fakeGitHub {
	t.Helper()
	f := &fakeGitHub{t: t, api: api, hits: make(map[string]int)}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeGitHub) hit(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hits[key]
}

// total is every request the server saw.
func (f *fakeGitHub) total() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, v := range f.hits {
		n += v
	}
	return n
}

// tokenCalls is how many installation tokens were created, all installations.
func (f *fakeGitHub) tokenCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for k, v := range f.hits {
		if strings.HasSuffix(k, "/access_tokens") {
			n += v
		}
	}
	return n
}

func (f *fakeGitHub) serve(w http.ResponseWriter, r *http.Request) {
	key := r.Method + " " + r.URL.Path
	f.mu.Lock()
	f.hits[key]++
	n := f.hits[key]
	f.mu.Unlock()

	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/app":
		if !f.checkJWT(w, r) {
			return
		}
		fmt.Fprintf(w, `{"id":%d,"slug":"warden-test","name":"Warden (test)"}`, testAppID)
	case r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/app/installations/") &&
		strings.HasSuffix(r.URL.Path, "/access_tokens"):
		if !f.checkJWT(w, r) {
			return
		}
		id := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/app/installations/"), "/access_tokens")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{
			"token":      "ghs_test_" + id,
			"expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339),
		})
	default:
		if !strings.HasPrefix(r.Header.Get("Authorization"), "token ghs_test_") {
			f.t.Errorf("%s: not authenticated with an installation token", key)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if f.api == nil {
			fmt.Fprint(w, `{}`)
			return
		}
		f.api(w, r, n)
	}
}

// checkJWT verifies the request's App JWT: RS256, signed by the test key,
// issued by the test App.
func (f *fakeGitHub) checkJWT(w http.ResponseWriter, r *http.Request) bool {
	err := verifyJWT(r.Header.Get("Authorization"))
	if err != nil {
		f.t.Errorf("%s %s: bad app JWT: %v", r.Method, r.URL.Path, err)
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"message":"A JSON web token could not be decoded"}`)
		return false
	}
	return true
}

func verifyJWT(authorization string) error {
	raw, ok := strings.CutPrefix(authorization, "Bearer ")
	if !ok {
		return errors.New("no bearer token")
	}
	claims := &jwt.RegisteredClaims{}
	tok, err := jwt.ParseWithClaims(raw, claims, func(tok *jwt.Token) (any, error) {
		if tok.Method != jwt.SigningMethodRS256 {
			return nil, fmt.Errorf("alg %v, want RS256", tok.Header["alg"])
		}
		return &testKey().PublicKey, nil
	})
	if err != nil {
		return err
	}
	if !tok.Valid {
		return errors.New("invalid token")
	}
	if claims.Issuer != strconv.Itoa(testAppID) {
		return fmt.Errorf("iss = %q, want %d", claims.Issuer, testAppID)
	}
	if claims.ExpiresAt == nil || claims.ExpiresAt.After(time.Now().Add(10*time.Minute)) {
		return errors.New("exp missing or more than 10 minutes ahead")
	}
	return nil
}

// newTestApp builds an App against f with fast retries; mut adjusts cfg.
func newTestApp(t *testing.T, f *fakeGitHub, mut func(*Config)) *App {
	t.Helper()
	cfg := Config{
		AppID:      testAppID,
		PrivateKey: testKeyPEM(),
		BaseURL:    f.srv.URL,
		Logger:     slog.New(slog.DiscardHandler),
		Registerer: prometheus.NewPedanticRegistry(),
		MaxWait:    5 * time.Second,
		RetryBase:  time.Millisecond,
	}
	if mut != nil {
		mut(&cfg)
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return a
}

// setRate writes x-ratelimit-* headers.
func setRate(w http.ResponseWriter, limit, remaining int, reset time.Time) {
	w.Header().Set("X-Ratelimit-Limit", strconv.Itoa(limit))
	w.Header().Set("X-Ratelimit-Remaining", strconv.Itoa(remaining))
	w.Header().Set("X-Ratelimit-Used", strconv.Itoa(limit-remaining))
	w.Header().Set("X-Ratelimit-Reset", strconv.FormatInt(reset.Unix(), 10))
	w.Header().Set("X-Ratelimit-Resource", "core")
}

const secondaryBody = `{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again.","documentation_url":"https://docs.github.com/rest/overview/resources-in-the-rest-api#secondary-rate-limits"}`
