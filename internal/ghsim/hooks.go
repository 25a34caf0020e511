package ghsim

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
)

// HookDelivery is one row of the App's webhook delivery log.
type HookDelivery struct {
	ID             int64
	GUID           string
	Event          string
	Action         string
	InstallationID int64
	RepositoryID   int64
	DeliveredAt    time.Time
	Redelivery     bool
	Duration       time.Duration
	Status         string // "OK", or why it failed
	StatusCode     int
	Payload        []byte
}

type outgoing struct {
	guid, event, action string
	installation, repo  int64
	body                []byte
	redelivery          bool
}

// hookSender delivers webhooks one at a time from a queue, like one of
// GitHub's hookshot workers, and logs every attempt.
type hookSender struct {
	s       *Sim
	mu      sync.Mutex
	cond    *sync.Cond
	queue   []outgoing
	busy    bool
	held    bool
	drop    bool
	log     []*HookDelivery
	nextID  int64
	client  *http.Client
	stopped bool
}

func newHookSender(s *Sim) *hookSender {
	h := &hookSender{s: s, nextID: 90000, client: &http.Client{Timeout: 10 * time.Second}}
	h.cond = sync.NewCond(&h.mu)
	go h.run()
	return h
}

func newGUID() string {
	b := make([]byte, 16)
	rand.Read(b)
	x := hex.EncodeToString(b)
	return x[:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:]
}

// emitLocked queues the delivery of event for a mutation, with the fields
// every payload carries: action, sender, repository, installation.
func (s *Sim) emitLocked(event, action string, in *Installation, repo *Repo, sender *User, body map[string]any) {
	if action != "" {
		body["action"] = action
	}
	if sender != nil {
		body["sender"] = s.userJSON(sender)
	}
	if repo != nil {
		if _, ok := body["repository"]; !ok {
			body["repository"] = s.repoJSON(repo)
		}
		if in == nil {
			in = repo.Install
		}
		if repo.Owner.Type == TypeOrg {
			if _, ok := body["organization"]; !ok {
				body["organization"] = s.orgJSON(repo.Owner)
			}
		}
	}
	var instID, repoID int64
	if in != nil {
		instID = in.ID
		if _, ok := body["installation"]; !ok {
			body["installation"] = s.installationJSON(in, false)
		}
	}
	if repo != nil {
		repoID = repo.ID
	}
	b, err := json.Marshal(body)
	if err != nil {
		panic(fmt.Sprintf("ghsim: marshal %s payload: %v", event, err))
	}
	s.hooks.enqueue(outgoing{guid: newGUID(), event: event, action: action, installation: instID, repo: repoID, body: b})
}

func (s *Sim) orgJSON(u *User) map[string]any {
	api := apiBase + "/orgs/" + u.Login
	return map[string]any{"login": u.Login, "id": u.ID, "node_id": nodeID("O", u.ID), "url": api,
		"repos_url": api + "/repos", "events_url": api + "/events", "hooks_url": api + "/hooks", "issues_url": api + "/issues",
		"members_url": api + "/members{/member}", "public_members_url": api + "/public_members{/member}",
		"avatar_url": "https://avatars.githubusercontent.com/u/" + fmt.Sprint(u.ID), "description": nil}
}

func (h *hookSender) enqueue(o outgoing) {
	h.mu.Lock()
	h.queue = append(h.queue, o)
	h.mu.Unlock()
	h.cond.Broadcast()
}

func (h *hookSender) run() {
	for {
		h.mu.Lock()
		for !h.stopped && (len(h.queue) == 0 || h.held) {
			h.cond.Wait()
		}
		if h.stopped {
			h.mu.Unlock()
			return
		}
		o := h.queue[0]
		h.queue = h.queue[1:]
		h.busy = true
		drop := h.drop
		h.mu.Unlock()
		d := h.deliver(o, drop)
		h.mu.Lock()
		h.log = append(h.log, d)
		h.busy = false
		h.mu.Unlock()
		h.cond.Broadcast()
	}
}

func (h *hookSender) deliver(o outgoing, drop bool) *HookDelivery {
	h.s.mu.Lock()
	url, secret := h.s.opt.WebhookURL, h.s.opt.WebhookSecret
	now := h.s.now()
	h.s.mu.Unlock()
	h.mu.Lock()
	h.nextID++
	id := h.nextID
	h.mu.Unlock()
	d := &HookDelivery{ID: id, GUID: o.guid, Event: o.event, Action: o.action, InstallationID: o.installation,
		RepositoryID: o.repo, DeliveredAt: now, Redelivery: o.redelivery, Payload: o.body}
	h.s.mu.Lock()
	observe := h.s.onDelivery
	h.s.mu.Unlock()
	if observe != nil {
		observe(Delivered{Event: o.event, Action: o.action, Payload: o.body})
	}
	if url == "" || drop {
		d.Status = "failed to connect to host"
		return d
	}
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(o.body))
	if err != nil {
		d.Status = "invalid URL"
		return d
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "GitHub-Hookshot/5d5a5f1")
	req.Header.Set("X-GitHub-Event", o.event)
	req.Header.Set("X-GitHub-Delivery", o.guid)
	req.Header.Set("X-GitHub-Hook-ID", "448710")
	req.Header.Set("X-GitHub-Hook-Installation-Target-Type", "integration")
	req.Header.Set("X-GitHub-Hook-Installation-Target-ID", strconv.FormatInt(h.s.opt.AppID, 10))
	if secret != "" {
		m := hmac.New(sha256.New, []byte(secret))
		m.Write(o.body)
		req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(m.Sum(nil)))
		m1 := hmac.New(sha1.New, []byte(secret))
		m1.Write(o.body)
		req.Header.Set("X-Hub-Signature", "sha1="+hex.EncodeToString(m1.Sum(nil)))
	}
	start := time.Now()
	resp, err := h.client.Do(req)
	d.Duration = time.Since(start)
	if err != nil {
		d.Status = "failed to connect to host"
		return d
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	d.StatusCode = resp.StatusCode
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		d.Status = "OK"
	} else {
		d.Status = "Invalid HTTP Response: " + strconv.Itoa(resp.StatusCode)
	}
	return d
}

// Flush waits until every queued delivery has been attempted (held ones
// excepted).
func (s *Sim) Flush(ctx context.Context) error {
	h := s.hooks
	done := make(chan struct{})
	go func() {
		h.mu.Lock()
		for !h.stopped && (h.busy || (len(h.queue) > 0 && !h.held)) {
			h.cond.Wait()
		}
		h.mu.Unlock()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		h.cond.Broadcast()
		return fmt.Errorf("ghsim: deliveries not flushed: %w", ctx.Err())
	}
}

// Pending is how many deliveries wait to be sent.
func (s *Sim) Pending() int {
	s.hooks.mu.Lock()
	defer s.hooks.mu.Unlock()
	n := len(s.hooks.queue)
	if s.hooks.busy {
		n++
	}
	return n
}

// HoldDeliveries stops sending: deliveries queue up until ReleaseDeliveries.
func (s *Sim) HoldDeliveries() {
	s.hooks.mu.Lock()
	s.hooks.held = true
	s.hooks.mu.Unlock()
}

// ReleaseDeliveries sends the held deliveries in the order permute gives
// (indices into the queue; nil keeps the order), since GitHub does not keep
// delivery order.
func (s *Sim) ReleaseDeliveries(permute func(n int) []int) {
	h := s.hooks
	h.mu.Lock()
	if permute != nil {
		idx := permute(len(h.queue))
		q := make([]outgoing, 0, len(h.queue))
		for _, i := range idx {
			q = append(q, h.queue[i])
		}
		h.queue = q
	}
	h.held = false
	h.mu.Unlock()
	h.cond.Broadcast()
}

// DropDeliveries makes deliveries fail (as if warden were unreachable) while
// on: they are logged as failed, and can be redelivered through the API.
func (s *Sim) DropDeliveries(on bool) {
	s.hooks.mu.Lock()
	s.hooks.drop = on
	s.hooks.mu.Unlock()
}

// Deliveries returns the delivery log, oldest first.
func (s *Sim) Deliveries() []HookDelivery {
	s.hooks.mu.Lock()
	defer s.hooks.mu.Unlock()
	out := make([]HookDelivery, len(s.hooks.log))
	for i, d := range s.hooks.log {
		out[i] = *d
	}
	return out
}

// Close stops the webhook sender.
func (s *Sim) Close() {
	s.hooks.mu.Lock()
	s.hooks.stopped = true
	s.hooks.mu.Unlock()
	s.hooks.cond.Broadcast()
}

func (d *HookDelivery) json() map[string]any {
	var action any
	if d.Action != "" {
		action = d.Action
	}
	var inst, repo any
	if d.InstallationID != 0 {
		inst = d.InstallationID
	}
	if d.RepositoryID != 0 {
		repo = d.RepositoryID
	}
	return map[string]any{"id": d.ID, "guid": d.GUID, "delivered_at": ts(d.DeliveredAt), "redelivery": d.Redelivery,
		"duration": d.Duration.Seconds(), "status": d.Status, "status_code": d.StatusCode, "event": d.Event,
		"action": action, "installation_id": inst, "repository_id": repo, "throttled_at": nil}
}

func (s *Sim) hookRoutes(r chi.Router) {
	r.Get("/app/hook/deliveries", func(w http.ResponseWriter, r *http.Request) {
		per, _ := page(r)
		var before int64 = 1 << 62
		if c := r.URL.Query().Get("cursor"); c != "" {
			n, err := strconv.ParseInt(strings.TrimPrefix(c, "v1_"), 10, 64)
			if err != nil {
				writeError(w, http.StatusUnprocessableEntity, "Invalid cursor")
				return
			}
			before = n
		}
		h := s.hooks
		h.mu.Lock()
		var rows []*HookDelivery
		for i := len(h.log) - 1; i >= 0 && len(rows) <= per; i-- { // newest first
			if h.log[i].ID < before {
				rows = append(rows, h.log[i])
			}
		}
		h.mu.Unlock()
		if len(rows) > per {
			rows = rows[:per]
			u := *r.URL
			u.Scheme, u.Host = "http", r.Host
			q := u.Query()
			q.Set("per_page", strconv.Itoa(per))
			q.Set("cursor", fmt.Sprintf("v1_%d", rows[len(rows)-1].ID))
			u.RawQuery = q.Encode()
			w.Header().Set("Link", fmt.Sprintf("<%s>; rel=\"next\"", u.String()))
		}
		out := []any{}
		for _, d := range rows {
			out = append(out, d.json())
		}
		writeJSON(w, http.StatusOK, out)
	})
	find := func(r *http.Request) *HookDelivery {
		id, ok := intParam(r, "id")
		if !ok {
			return nil
		}
		s.hooks.mu.Lock()
		defer s.hooks.mu.Unlock()
		for _, d := range s.hooks.log {
			if d.ID == id {
				return d
			}
		}
		return nil
	}
	r.Get("/app/hook/deliveries/{id}", func(w http.ResponseWriter, r *http.Request) {
		d := find(r)
		if d == nil {
			writeError(w, http.StatusNotFound, "Not Found")
			return
		}
		m := d.json()
		var payload any
		json.Unmarshal(d.Payload, &payload)
		m["request"] = map[string]any{"headers": map[string]string{"X-GitHub-Event": d.Event, "X-GitHub-Delivery": d.GUID}, "payload": payload}
		m["response"] = map[string]any{"headers": map[string]string{}, "payload": nil}
		m["url"] = s.opt.WebhookURL
		writeJSON(w, http.StatusOK, m)
	})
	r.Post("/app/hook/deliveries/{id}/attempts", func(w http.ResponseWriter, r *http.Request) {
		d := find(r)
		if d == nil {
			writeError(w, http.StatusNotFound, "Not Found")
			return
		}
		if s.now().Sub(d.DeliveredAt) > 3*24*time.Hour {
			writeError(w, http.StatusUnprocessableEntity, "Delivery is too old to redeliver")
			return
		}
		s.hooks.enqueue(outgoing{guid: d.GUID, event: d.Event, action: d.Action, installation: d.InstallationID,
			repo: d.RepositoryID, body: d.Payload, redelivery: true})
		writeJSON(w, http.StatusAccepted, map[string]any{})
	})
}
