package app

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v4"
	"github.com/google/go-github/v66/github"
	"github.com/prometheus/client_golang/prometheus"
)

func TestNewRejectsBadConfigWithoutLeakingKey(t *testing.T) {
	good := testKeyPEM()
	// A PEM block whose payload was damaged: still looks like a key.
	block, _ := pem.Decode(good)
	damaged := bytes.Replace(good, []byte(block.Type+"-----\n"), []byte(block.Type+"-----\nAAAA"), 1)
	truncated := good[:len(good)/2]

	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecDER, err := x509.MarshalPKCS8PrivateKey(ecKey)
	if err != nil {
		t.Fatal(err)
	}
	ecPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: ecDER})
	pubDER, err := x509.MarshalPKIXPublicKey(&testKey().PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	encrypted := pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: block.Bytes})

	tests := []struct {
		name    string
		cfg     Config
		wantErr string
		secret  []byte // must not appear in the error
	}{
		{"zero app id", Config{AppID: 0, PrivateKey: good}, "AppID", nil},
		{"negative app id", Config{AppID: -3, PrivateKey: good}, "AppID", nil},
		{"empty key", Config{AppID: 1}, "private key: missing", nil},
		{"not PEM", Config{AppID: 1, PrivateKey: []byte("hunter2-not-a-key")}, "not PEM-encoded", []byte("hunter2")},
		{"damaged PEM", Config{AppID: 1, PrivateKey: damaged}, "does not hold a valid", damaged},
		{"truncated PEM", Config{AppID: 1, PrivateKey: truncated}, "private key", truncated},
		{"EC key", Config{AppID: 1, PrivateKey: ecPEM}, "not an RSA key", ecPEM},
		{"public key", Config{AppID: 1, PrivateKey: pubPEM}, "not a private key", pubPEM},
		{"encrypted key", Config{AppID: 1, PrivateKey: encrypted}, "encrypted", encrypted},
		{"bad scheme", Config{AppID: 1, PrivateKey: good, BaseURL: "ftp://example.com/"}, "scheme", good},
		{"no host", Config{AppID: 1, PrivateKey: good, BaseURL: "http:///api"}, "no host", good},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg)
			if err == nil {
				t.Fatal("New succeeded, want error")
			}
			msg := err.Error()
			if !strings.Contains(msg, tt.wantErr) {
				t.Errorf("error %q does not mention %q", msg, tt.wantErr)
			}
			if strings.Contains(msg, "-----") {
				t.Errorf("error quotes PEM armour: %q", msg)
			}
			for _, line := range strings.Split(string(tt.secret), "\n") {
				if len(line) >= 8 && !strings.HasPrefix(line, "-----") && strings.Contains(msg, line) {
					t.Errorf("error %q contains key material %q", msg, line)
				}
			}
		})
	}
}

func TestNewAcceptsKeyForms(t *testing.T) {
	pkcs8, err := x509.MarshalPKCS8PrivateKey(testKey())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		key  []byte
	}{
		{"PKCS#1", testKeyPEM()},
		{"PKCS#8", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})},
		{"flattened newlines", bytes.ReplaceAll(testKeyPEM(), []byte("\n"), []byte(`\n`))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(Config{AppID: 1, PrivateKey: tt.key}); err != nil {
				t.Fatalf("New: %v", err)
			}
		})
	}
}

func TestBaseURLs(t *testing.T) {
	tests := []struct {
		in, base, app, upload string
	}{
		{"", "https://api.github.com/", "https://api.github.com/app", "https://uploads.github.com/"},
		{"https://api.github.com", "https://api.github.com/", "https://api.github.com/app", "https://uploads.github.com/"},
		{"https://api.github.com/", "https://api.github.com/", "https://api.github.com/app", "https://uploads.github.com/"},
		{"http://127.0.0.1:8123", "http://127.0.0.1:8123/", "http://127.0.0.1:8123/app", "http://127.0.0.1:8123/"},
		{"http://127.0.0.1:8123/", "http://127.0.0.1:8123/", "http://127.0.0.1:8123/app", "http://127.0.0.1:8123/"},
		{"https://ghe.example.com/api/v3", "https://ghe.example.com/api/v3/", "https://ghe.example.com/api/v3/app", "https://ghe.example.com/api/uploads/"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			a, err := New(Config{AppID: 1, PrivateKey: testKeyPEM(), BaseURL: tt.in})
			if err != nil {
				t.Fatal(err)
			}
			inst, err := a.Installation(9)
			if err != nil {
				t.Fatal(err)
			}
			for name, c := range map[string]*github.Client{"app": a.AppClient(), "installation": inst} {
				if got := c.BaseURL.String(); got != tt.base {
					t.Errorf("%s BaseURL = %q, want %q", name, got, tt.base)
				}
				if got := c.UploadURL.String(); got != tt.upload {
					t.Errorf("%s UploadURL = %q, want %q", name, got, tt.upload)
				}
				req, err := c.NewRequest(http.MethodGet, "app", nil)
				if err != nil {
					t.Fatal(err)
				}
				if got := req.URL.String(); got != tt.app {
					t.Errorf("%s: \"app\" resolves to %q, want %q", name, got, tt.app)
				}
			}
			if a.BaseURL() != tt.base {
				t.Errorf("App.BaseURL() = %q, want %q", a.BaseURL(), tt.base)
			}
		})
	}
}

func TestIdentityFromJWTCallCachedAfterFirstSuccess(t *testing.T) {
	f := newFake(t, nil)
	a := newTestApp(t, f, nil)
	ctx := context.Background()

	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id, err := a.Identity(ctx)
			if err != nil {
				t.Errorf("Identity: %v", err)
				return
			}
			want := Identity{ID: testAppID, Slug: "warden-test", BotLogin: "warden-test[bot]", Name: "Warden (test)"}
			if id != want {
				t.Errorf("Identity = %+v, want %+v", id, want)
			}
		}()
	}
	wg.Wait()
	if n := f.hit("GET /app"); n != 1 {
		t.Errorf("GET /app sent %d times, want 1 (cached)", n)
	}
	if c := a.Calls(AppInstallation); c.Reads != 1 || c.Writes != 0 {
		t.Errorf("Calls(app) = %+v, want 1 read", c)
	}
}

func TestIdentityNotCachedAfterFailure(t *testing.T) {
	f := newFake(t, nil)
	a := newTestApp(t, f, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := a.Identity(ctx); err == nil {
		t.Fatal("Identity with a cancelled context succeeded")
	}
	if _, err := a.Identity(context.Background()); err != nil {
		t.Fatalf("Identity after a failure: %v", err)
	}
}

func TestInstallationTokenCreatedOnceAndCounted(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	f := newFake(t, func(w http.ResponseWriter, r *http.Request, n int) {
		mu.Lock()
		seen[r.Header.Get("Authorization")]++
		mu.Unlock()
		fmt.Fprint(w, `{"number":1}`)
	})
	reg := prometheus.NewPedanticRegistry()
	a := newTestApp(t, f, func(c *Config) { c.Registerer = reg })
	ctx := context.Background()

	c1, err := a.Installation(7)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		c, err := a.Installation(7)
		if err != nil {
			t.Fatal(err)
		}
		if c != c1 {
			t.Fatal("Installation(7) returned a different client: not cached")
		}
		if _, _, err := c.Issues.Get(ctx, "o", "r", 1); err != nil {
			t.Fatalf("Issues.Get: %v", err)
		}
	}
	c8, err := a.Installation(8)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c8.Issues.Get(ctx, "o", "r", 1); err != nil {
		t.Fatalf("Issues.Get as 8: %v", err)
	}

	if n := f.hit("POST /app/installations/7/access_tokens"); n != 1 {
		t.Errorf("token for 7 created %d times, want 1", n)
	}
	if n := f.hit("POST /app/installations/8/access_tokens"); n != 1 {
		t.Errorf("token for 8 created %d times, want 1", n)
	}
	if seen["token ghs_test_7"] != 3 || seen["token ghs_test_8"] != 1 {
		t.Errorf("Authorization headers seen = %v", seen)
	}
	if got, want := a.Calls(7), (CallCounts{Reads: 3}); got != want {
		t.Errorf("Calls(7) = %+v, want %+v", got, want)
	}
	if got, want := a.Calls(AppInstallation), (CallCounts{Writes: 2}); got != want {
		t.Errorf("Calls(app) = %+v, want %+v (token creations)", got, want)
	}
	wantMetric(t, reg, map[string]string{"installation": "7", "method": "GET", "status": "200"}, 3)
	wantMetric(t, reg, map[string]string{"installation": "app", "method": "POST", "status": "201"}, 2)
}

func TestInstallationRejectsNonPositiveID(t *testing.T) {
	a, err := New(Config{AppID: 1, PrivateKey: testKeyPEM()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Installation(0); err == nil {
		t.Error("Installation(0) succeeded")
	}
}

func TestClientCacheEvictsLeastRecentlyUsed(t *testing.T) {
	c := newClientCache(2)
	built := map[int64]int{}
	get := func(id int64) *github.Client {
		return c.get(id, func() *github.Client { built[id]++; return github.NewClient(nil) })
	}
	one := get(1)
	get(2)
	if get(1) != one { // 1 is now the most recently used
		t.Fatal("cache miss for 1")
	}
	get(3) // evicts 2
	if c.len() != 2 {
		t.Fatalf("len = %d, want 2", c.len())
	}
	if get(1) != one {
		t.Error("1 was evicted, want 2 evicted")
	}
	get(2)
	if built[2] != 2 || built[1] != 1 || built[3] != 1 {
		t.Errorf("builds = %v, want 1:1 2:2 3:1", built)
	}
}

func TestConcurrentInstallationsShareNothingRacy(t *testing.T) {
	f := newFake(t, nil)
	a := newTestApp(t, f, nil)
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := a.Installation(int64(i%5 + 1))
			if err != nil {
				t.Error(err)
				return
			}
			if _, _, err := c.Issues.Get(ctx, "o", "r", i); err != nil {
				t.Error(err)
			}
			_ = a.Budget(int64(i%5 + 1))
		}()
	}
	wg.Wait()
	if n := f.tokenCalls(); n != 5 {
		t.Errorf("tokens created %d times, want 5 (one per installation)", n)
	}
	total := 0
	for id := int64(1); id <= 5; id++ {
		total += a.Calls(id).Reads
	}
	if total != 40 {
		t.Errorf("reads counted = %d, want 40", total)
	}
}

// wantMetric asserts warden_github_requests_total{labels} == want.
func wantMetric(t *testing.T, reg *prometheus.Registry, labels map[string]string, want float64) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() != "warden_github_requests_total" {
			continue
		}
	metrics:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if labels[lp.GetName()] != lp.GetValue() {
					continue metrics
				}
			}
			if got := m.GetCounter().GetValue(); got != want {
				t.Errorf("warden_github_requests_total%v = %v, want %v", labels, got, want)
			}
			return
		}
	}
	t.Errorf("warden_github_requests_total%v not found", labels)
}

// TestFakeVerifiesJWTStrictly keeps the fake's JWT check from passing
// vacuously: a token signed by another key, with another algorithm or
// issuer is rejected.
func TestFakeVerifiesJWTStrictly(t *testing.T) {
	otherKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	claims := func(iss string) jwt.RegisteredClaims {
		return jwt.RegisteredClaims{
			Issuer:    iss,
			IssuedAt:  jwt.NewNumericDate(now.Add(-30 * time.Second)),
			ExpiresAt: jwt.NewNumericDate(now.Add(2 * time.Minute)),
		}
	}
	sign := func(m jwt.SigningMethod, key any, c jwt.RegisteredClaims) string {
		s, err := jwt.NewWithClaims(m, c).SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return "Bearer " + s
	}
	iss := strconv.Itoa(testAppID)
	tests := []struct {
		name  string
		auth  string
		valid bool
	}{
		{"good", sign(jwt.SigningMethodRS256, testKey(), claims(iss)), true},
		{"other key", sign(jwt.SigningMethodRS256, otherKey, claims(iss)), false},
		{"HS256", sign(jwt.SigningMethodHS256, []byte("secret"), claims(iss)), false},
		{"wrong issuer", sign(jwt.SigningMethodRS256, testKey(), claims("1")), false},
		{"installation token", "token ghs_x", false},
	}
	for _, tt := range tests {
		if err := verifyJWT(tt.auth); (err == nil) != tt.valid {
			t.Errorf("%s: verifyJWT = %v, want valid=%v", tt.name, err, tt.valid)
		}
	}
}
