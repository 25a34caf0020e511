package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/wardenhq/warden/internal/corpus"
	"github.com/wardenhq/warden/internal/db"
	"github.com/wardenhq/warden/webhooks"
)

type ingestConfig struct {
	Deliveries   int           // per throughput run
	Rounds       int           // alternating ceiling/durable runs
	Clients      int           // concurrent keep-alive connections
	PayloadBytes int           // payload size
	Rate         int           // deliveries per second for the latency figure
	RateFor      time.Duration // how long the paced run lasts
}

var benchSecret = []byte("bench-secret")

// benchIngest measures durable acceptance through the real ingress and inbox
// (SQLite, WAL, synchronous=FULL, group commit) against the ceiling: a
// handler that reads the body, checks the signature and answers. Both run
// in this process on loopback with the same load generator, alternating for
// cfg.Rounds rounds (the best of each is kept: the machine is shared, and
// noise only ever slows a run), so the ratio is the figure. The dispatcher
// is not running: this is the acknowledgement path.
func benchIngest(ctx context.Context, cfg ingestConfig) ([]Figure, error) {
	dir, err := os.MkdirTemp("", "warden-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	ceiling := ceilingHandler()
	d, err := db.Open(ctx, "sqlite:"+filepath.Join(dir, "bench.db"))
	if err != nil {
		return nil, err
	}
	defer d.Close()
	ib, err := webhooks.OpenInbox(ctx, d)
	if err != nil {
		return nil, err
	}
	defer ib.Close()
	var commits atomic.Int64
	ib.OnCommit(func() { commits.Add(1) })
	ingress := webhooks.NewIngress(ib, nil, log, webhooks.IngressOptions{Secrets: [][]byte{benchSecret}, MaxConcurrentReads: 256})

	var ceil, dur run
	sent := 0
	for round := 0; round < cfg.Rounds; round++ {
		c, err := throughput(ceiling, cfg, fmt.Sprintf("ceil%d", round))
		if err != nil {
			return nil, err
		}
		ceil = ceil.best(c)
		c0 := commits.Load()
		r, err := throughput(ingress, cfg, fmt.Sprintf("dur%d", round))
		if err != nil {
			return nil, err
		}
		r.perCommit = float64(r.n) / float64(max(commits.Load()-c0, 1))
		dur = dur.best(r)
		sent += r.n
	}
	var stored int
	if err := d.Read.QueryRow(`SELECT COUNT(*) FROM inbox`).Scan(&stored); err != nil {
		return nil, err
	}
	if stored != sent {
		return nil, fmt.Errorf("ingest: %d acknowledged but %d stored", sent, stored)
	}
	p50, p99, err := pacedLatency(ingress, cfg)
	if err != nil {
		return nil, err
	}
	_, source := template()
	work := fmt.Sprintf("%d deliveries of %d KB (%s), %d clients, best of %d", cfg.Deliveries, cfg.PayloadBytes>>10, source, cfg.Clients, cfg.Rounds)
	paced := fmt.Sprintf("%d/s for %s, open loop", cfg.Rate, cfg.RateFor)
	return []Figure{
		{"ingest", "durable deliveries accepted", dur.rate, "/s", work + fmt.Sprintf(", %.0f per commit", dur.perCommit), "aim > 5000/s"},
		{"ingest", "ceiling (signature check only)", ceil.rate, "/s", work, "—"},
		{"ingest", "durable / ceiling", dur.rate / ceil.rate, "ratio", work, "aim ≥ 0.6"},
		{"ingest", "CPU per durable delivery", dur.cpu.Seconds() * 1e6, "µs", "process CPU (user+sys, generator included) / deliveries", fmt.Sprintf("ceiling %.0f µs", ceil.cpu.Seconds()*1e6)},
		{"ingest", "ack latency p50", p50.Seconds() * 1000, "ms", paced, "GitHub gives up at 10,000 ms"},
		{"ingest", "ack latency p99", p99.Seconds() * 1000, "ms", paced, "GitHub gives up at 10,000 ms"},
	}, nil
}

// ceilingHandler is the figures' ceiling: it reads the body, checks the
// signature and answers, keeping nothing.
func ceilingHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, webhooks.MaxBody))
		if err != nil {
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			return
		}
		if webhooks.VerifySignature([][]byte{benchSecret}, r.Header.Get("X-Hub-Signature-256"), body) != nil {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	})
}

// run is one throughput measurement.
type run struct {
	rate      float64       // acknowledged deliveries per second
	cpu       time.Duration // process CPU per delivery
	n         int           // deliveries acknowledged, warm-up included
	perCommit float64
}

func (r run) best(o run) run {
	if o.rate > r.rate {
		return o
	}
	return r
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

type server struct {
	url string
	srv *http.Server
}

func startServer(h http.Handler) (*server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &server{url: "http://" + ln.Addr().String() + "/webhooks", srv: &http.Server{Handler: h}}
	go s.srv.Serve(ln)
	return s, nil
}

func newClient(conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConns: conns, MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}}
}

// template is the payload the ingest figures use: GitHub's own
// issue_comment.created example (from @octokit/webhooks-examples) when the
// corpora are installed, else a synthetic object of the same shape.
var template = sync.OnceValues(func() (map[string]any, string) {
	if ex, err := corpus.WebhookExamples(); err == nil && len(ex["issue_comment"]) > 0 {
		var m map[string]any
		if json.Unmarshal(ex["issue_comment"][0], &m) == nil {
			return m, "GitHub's issue_comment example"
		}
	}
	return map[string]any{"action": "created", "issue": map[string]any{"number": 1},
		"repository": map[string]any{"id": 1, "full_name": "o/r"}, "sender": map[string]any{"login": "alice", "type": "User"},
		"comment": map[string]any{"body": ""}}, "synthetic issue_comment (corpora not installed)"
})

var words = strings.Fields(`the backlog item claims a fenced lease and its worker posts a marker before any
work while the pull request links the issue and the check run reports each attempt owner outcome
parked ruling topic question human admission gate label removed agent takeover prior fence branch`)

// delivery builds a signed body of about size bytes: the template with its
// comment made of prose long enough to reach size.
func delivery(id string, size int) ([]byte, string) {
	m, _ := template()
	return deliveryFrom(m, id, size)
}

// deliveryFrom is delivery over the payload m.
func deliveryFrom(m map[string]any, id string, size int) ([]byte, string) {
	base, _ := json.Marshal(m)
	pad := size - len(base)
	var b strings.Builder
	for i := 0; b.Len() < pad; i++ {
		b.WriteString(words[(i*7+len(id)*13+i*i)%len(words)])
		b.WriteByte(' ')
	}
	c := maps.Clone(m)
	if cm, ok := c["comment"].(map[string]any); ok {
		cm = maps.Clone(cm)
		cm["body"] = b.String()
		c["comment"] = cm
	}
	body, _ := json.Marshal(c)
	return body, webhooks.Sign(benchSecret, body)
}

// post sends one delivery and requires 202 Accepted (stored).
func post(c *http.Client, url, id string, body []byte, sig string) error {
	code, _, err := send(c, url, id, body, sig)
	if err == nil && code != http.StatusAccepted {
		err = fmt.Errorf("delivery %s: status %d", id, code)
	}
	return err
}

// send sends one delivery and returns the status and the answer's text
// (the ingress answers "stored", "duplicate" or "requeued").
func send(c *http.Client, url, id string, body []byte, sig string) (int, string, error) {
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "issue_comment")
	req.Header.Set("X-GitHub-Delivery", id)
	req.Header.Set("X-Hub-Signature-256", sig)
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	text, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, strings.TrimSpace(string(text)), nil
}

// throughput sends cfg.Deliveries distinct deliveries from cfg.Clients
// goroutines and measures acknowledged deliveries per second.
func throughput(h http.Handler, cfg ingestConfig, prefix string) (run, error) {
	s, err := startServer(h)
	if err != nil {
		return run{}, err
	}
	defer s.srv.Close()
	return load([]string{s.url}, false, cfg, prefix, nil)
}

// load sends cfg.Deliveries distinct deliveries from cfg.Clients goroutines,
// round-robin over urls, and measures distinct deliveries acknowledged per
// second. With fanout, each delivery goes to every url (consecutive posts,
// so the copies race each other) and answer, when not nil, judges each
// response (i is the delivery; errRedeliver sends that post again);
// otherwise every post must answer 202.
func load(urls []string, fanout bool, cfg ingestConfig, prefix string, answer func(i, code int, text string) error) (run, error) {
	return loadBodies(urls, fanout, cfg, prefix, answer, func(i int) ([]byte, string) {
		return delivery(fmt.Sprintf("%s-%d", prefix, i), cfg.PayloadBytes)
	})
}

// loadBodies is load with the 64 distinct bodies made by body.
func loadBodies(urls []string, fanout bool, cfg ingestConfig, prefix string, answer func(i, code int, text string) error,
	body func(i int) ([]byte, string)) (run, error) {
	c := newClient(cfg.Clients)
	// Pre-build bodies so the generator's cost is the same for both handlers
	// (deliveries differ by id; 64 distinct bodies are enough).
	bodies := make([][]byte, 64)
	sigs := make([]string, 64)
	for i := range bodies {
		bodies[i], sigs[i] = body(i)
	}
	// Warm up connections.
	for i := 0; i < cfg.Clients; i++ {
		if err := post(c, urls[i%len(urls)], guid(prefix+"-warm", i), bodies[i%64], sigs[i%64]); err != nil {
			return run{}, err
		}
	}
	per := 1
	if fanout {
		per = len(urls)
	}
	var next atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	cpu0, start := cpuTime(), time.Now()
	for w := 0; w < cfg.Clients; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k := int(next.Add(1) - 1)
				i := k / per
				if i >= cfg.Deliveries {
					return
				}
				url, id := urls[k%len(urls)], guid(prefix, i)
				var err error
				if answer == nil {
					err = post(c, url, id, bodies[i%64], sigs[i%64])
				} else {
					for err = errRedeliver; err == errRedeliver; {
						var code int
						var text string
						if code, text, err = send(c, url, id, bodies[i%64], sigs[i%64]); err == nil {
							err = answer(i, code, text)
						}
					}
				}
				if err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	el, cpu := time.Since(start), cpuTime()-cpu0
	if e, ok := firstErr.Load().(error); ok {
		return run{}, e
	}
	return run{rate: float64(cfg.Deliveries) / el.Seconds(), cpu: cpu / time.Duration(cfg.Deliveries),
		n: cfg.Deliveries + cfg.Clients}, nil
}

// errRedeliver is what load's answer returns to have a post sent again.
var errRedeliver = errors.New("redeliver")

// pacedLatency sends cfg.Rate deliveries per second (open loop) for
// cfg.RateFor and returns the p50 and p99 acknowledgement latency.
func pacedLatency(h http.Handler, cfg ingestConfig) (time.Duration, time.Duration, error) {
	s, err := startServer(h)
	if err != nil {
		return 0, 0, err
	}
	defer s.srv.Close()
	return paced([]string{s.url}, cfg, "paced")
}

// paced is pacedLatency over servers already running: deliveries go
// round-robin to urls, their ids made from prefix.
func paced(urls []string, cfg ingestConfig, prefix string) (time.Duration, time.Duration, error) {
	c := newClient(256)
	total := int(float64(cfg.Rate) * cfg.RateFor.Seconds())
	lat := make([]time.Duration, total)
	bodies, sigs := make([][]byte, 64), make([]string, 64)
	for i := range bodies {
		bodies[i], sigs[i] = delivery(fmt.Sprintf("%s-%d", prefix, i), cfg.PayloadBytes)
	}
	interval := time.Second / time.Duration(cfg.Rate)
	var wg sync.WaitGroup
	var firstErr atomic.Value
	start := time.Now()
	for i := 0; i < total; i++ {
		due := start.Add(time.Duration(i) * interval)
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
		body, sig, url := bodies[i%len(bodies)], sigs[i%len(sigs)], urls[i%len(urls)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			if err := post(c, url, guid(prefix, i), body, sig); err != nil {
				firstErr.CompareAndSwap(nil, err)
			}
			lat[i] = time.Since(t0)
		}()
	}
	wg.Wait()
	if e, ok := firstErr.Load().(error); ok {
		return 0, 0, e
	}
	slices.Sort(lat)
	return lat[total/2], lat[total*99/100], nil
}

// guid makes a delivery id shaped like GitHub's (a random-looking UUID), so
// the inbox's unique index sees the random inserts it sees in production.
func guid(prefix string, i int) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("%s-%d", prefix, i)))
	x := hex.EncodeToString(h[:16])
	return x[:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32]
}
