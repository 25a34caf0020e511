// Package ghsim is an in-memory GitHub for warden's tests and demo: a REST
// server (httptest-ready or on a port) serving the routes warden calls, and a
// webhook sender that delivers a signed delivery for every mutation, made
// through the API or by a test acting as a person ("a human did this").
//
// It behaves like github.com where warden could notice the difference:
// App JWTs and expiring installation tokens scoped to their repositories,
// pagination with Link headers, ETags and free 304s, x-ratelimit-* headers
// over a real per-installation budget, secondary-rate-limit refusals and
// injectable 5xx and latency, GitHub's error shapes, deliveries with the
// real headers and the acting user as sender, and the App's delivery log with
// redelivery. It is a test double for github.com only; nothing in warden's
// service imports it.
package ghsim

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

// Options configure a simulator.
type Options struct {
	AppID   int64  // default 4242
	AppSlug string // default "warden-sim"
	AppName string // default "warden (simulated)"
	// PrivateKeyPEM is the App's key; one is generated when empty.
	PrivateKeyPEM []byte
	// WebhookURL receives deliveries; none are sent while it is empty (they
	// are logged as failed, as GitHub logs an unreachable receiver).
	WebhookURL    string
	WebhookSecret string
	RateLimit     int           // per installation per hour; default 5000
	TokenTTL      time.Duration // installation token lifetime; default 1h
	// Now is the simulator's clock; default time.Now.
	Now func() time.Time
}

// Sim is the simulated GitHub. All its methods are safe for concurrent use.
type Sim struct {
	opt Options
	key *rsa.PrivateKey

	manifestOnce sync.Once
	manifestSt   *manifestStore // the manifest flow's codes (manifests.go)

	mu        sync.Mutex
	nextID    int64
	users     map[string]*User // by lower-case login
	installs  map[int64]*Installation
	repos     map[string]*Repo // by lower-case full name
	reposByID map[int64]*Repo
	tokens    map[string]*token
	rates     map[int64]*rateState // by installation; 0 = app (JWT)
	calls     map[int64]*Calls
	faults    faults
	bot       *User

	hooks *hookSender
	mux   http.Handler

	onExchange func(Exchange)
	onDelivery func(Delivered)
}

// UserType is a GitHub account type as webhooks and REST report it.
type UserType string

// Account types.
const (
	TypeUser UserType = "User"
	TypeBot  UserType = "Bot"
	TypeOrg  UserType = "Organization"
)

// User is a GitHub account.
type User struct {
	ID    int64
	Login string
	Type  UserType
}

// Installation is one installation of the App on an account.
type Installation struct {
	ID      int64
	Account *User
	Repos   map[int64]*Repo
	// Suspended installations get 403 on token creation.
	Suspended bool
}

// Calls counts the REST requests made with an installation's tokens (or the
// App's JWT, for installation 0).
type Calls struct {
	Reads, Writes, NotModified int
}

// New builds a simulator. Start it with Start, or mount Handler yourself.
func New(opt Options) (*Sim, error) {
	if opt.AppID == 0 {
		opt.AppID = 4242
	}
	if opt.AppSlug == "" {
		opt.AppSlug = "warden-sim"
	}
	if opt.AppName == "" {
		opt.AppName = "warden (simulated)"
	}
	if opt.RateLimit == 0 {
		opt.RateLimit = 5000
	}
	if opt.TokenTTL == 0 {
		opt.TokenTTL = time.Hour
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	s := &Sim{opt: opt, nextID: 1000,
		users: map[string]*User{}, installs: map[int64]*Installation{}, repos: map[string]*Repo{},
		reposByID: map[int64]*Repo{}, tokens: map[string]*token{}, rates: map[int64]*rateState{}, calls: map[int64]*Calls{}}
	if len(opt.PrivateKeyPEM) == 0 {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			return nil, fmt.Errorf("ghsim: generate the App key: %w", err)
		}
		s.key = k
	} else {
		blk, _ := pem.Decode(opt.PrivateKeyPEM)
		if blk == nil {
			return nil, fmt.Errorf("ghsim: PrivateKeyPEM is not PEM")
		}
		k, err := x509.ParsePKCS1PrivateKey(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("ghsim: PrivateKeyPEM: %w", err)
		}
		s.key = k
	}
	s.bot = s.addUserLocked(opt.AppSlug+"[bot]", TypeBot)
	s.hooks = newHookSender(s)
	s.mux = s.routes()
	if newSimHook != nil {
		newSimHook(s)
	}
	return s, nil
}

// newSimHook, when set (by this package's tests), sees every new simulator:
// the conformance tests attach their observers with it.
var newSimHook func(*Sim)

// PrivateKeyPEM is the App's private key, as GitHub hands it to the App's
// owner: give it to warden.
func (s *Sim) PrivateKeyPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(s.key)})
}

// AppID is the App's id.
func (s *Sim) AppID() int64 { return s.opt.AppID }

// BotLogin is the App's bot account login ("<slug>[bot]").
func (s *Sim) BotLogin() string { return s.bot.Login }

// Handler serves the REST API.
func (s *Sim) Handler() http.Handler { return s.mux }

// Server is a running simulator.
type Server struct {
	*httptest.Server
}

// Start serves the simulator on a loopback port. Close the server when done;
// Close also stops the webhook sender.
func (s *Sim) Start() *Server {
	srv := httptest.NewServer(s.mux)
	return &Server{srv}
}

// SetWebhook points deliveries at url, signed with secret.
func (s *Sim) SetWebhook(url, secret string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opt.WebhookURL, s.opt.WebhookSecret = url, secret
}

func (s *Sim) now() time.Time { return s.opt.Now().UTC() }

func (s *Sim) newID() int64 {
	s.nextID++
	return s.nextID
}

// AddUser creates an account (or returns the existing one with that login).
func (s *Sim) AddUser(login string, typ UserType) *User {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addUserLocked(login, typ)
}

func (s *Sim) addUserLocked(login string, typ UserType) *User {
	if u, ok := s.users[strings.ToLower(login)]; ok {
		return u
	}
	u := &User{ID: s.newID(), Login: login, Type: typ}
	s.users[strings.ToLower(login)] = u
	return u
}

func (s *Sim) userLocked(login string) *User {
	return s.users[strings.ToLower(login)]
}

// Install installs the App on account (created as an organization if new) and
// sends installation.created.
func (s *Sim) Install(account string, sender string) *Installation {
	s.mu.Lock()
	defer s.mu.Unlock()
	acct := s.addUserLocked(account, TypeOrg)
	in := &Installation{ID: s.newID(), Account: acct, Repos: map[int64]*Repo{}}
	s.installs[in.ID] = in
	s.emitLocked("installation", "created", in, nil, s.addUserLocked(sender, TypeUser), map[string]any{
		"installation": s.installationJSON(in, true),
		"repositories": []any{},
	})
	return in
}

// Calls returns how many requests an installation's tokens made (0: the App's JWT).
func (s *Sim) Calls(installation int64) Calls {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.calls[installation]; c != nil {
		return *c
	}
	return Calls{}
}

// ResetCalls zeroes every call counter.
func (s *Sim) ResetCalls() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = map[int64]*Calls{}
}
