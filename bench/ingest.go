package main

import (
	"bytes"
	"context"
	"encoding/json"
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
	"time"

	"github.com/wardenhq/warden/internal/corpus"
	"github.com/wardenhq/warden/internal/db"
	"github.com/wardenhq/warden/webhooks"
)

type ingestConfig struct {
	Deliveries   int           // for the throughput figures
	Clients      int           // concurrent keep-alive connections
	PayloadBytes int           // payload size
	Rate         int           // deliveries per second for the latency figure
	RateFor      time.Duration // how long the paced run lasts
}

var benchSecret = []byte("bench-secret")

// benchIngest measures durable acceptance through the real ingress and inbox
// (SQLite, WAL, synchronous=FULL, group commit) against the ceiling: a
// handler that reads the body, checks the signature and answers. Both run
// in this process on loopback with the same load generator, so the ratio is
// the figure. The dispatcher is not running: this is the acknowledgement path.
func benchIngest(ctx context.Context, cfg ingestConfig) ([]Figure, error) {
	dir, err := os.MkdirTemp("", "warden-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	ceiling := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
	ceilRate, _, err := throughput(ceiling, cfg, "ceil")
	if err != nil {
		return nil, err
	}

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
	var batches atomic.Int64
	ib.OnCommit(func() { batches.Add(1) })
	ingress := webhooks.NewIngress(ib, nil, log, webhooks.IngressOptions{Secrets: [][]byte{benchSecret}, MaxConcurrentReads: 256})
	durRate, n, err := throughput(ingress, cfg, "dur")
	if err != nil {
		return nil, err
	}
	perCommit := float64(n) / float64(max(batches.Load(), 1))
	var stored int
	if err := d.Read.QueryRow(`SELECT COUNT(*) FROM inbox`).Scan(&stored); err != nil {
		return nil, err
	}
	if stored != n {
		return nil, fmt.Errorf("ingest: %d acknowledged but %d stored", n, stored)
	}
	p50, p99, err := pacedLatency(ingress, cfg)
	if err != nil {
		return nil, err
	}
	_, source := template()
	work := fmt.Sprintf("%d deliveries of %d KB (%s), %d clients", cfg.Deliveries, cfg.PayloadBytes>>10, source, cfg.Clients)
	return []Figure{
		{"ingest", "durable deliveries accepted", durRate, "/s", work + fmt.Sprintf(", %.0f per commit", perCommit), "aim > 5000/s"},
		{"ingest", "ceiling (signature check only)", ceilRate, "/s", work, "—"},
		{"ingest", "durable / ceiling", durRate / ceilRate, "ratio", work, "aim ≥ 0.6"},
		{"ingest", "ack latency p50", p50.Seconds() * 1000, "ms", fmt.Sprintf("%d/s for %s", cfg.Rate, cfg.RateFor), "GitHub's limit 10,000 ms"},
		{"ingest", "ack latency p99", p99.Seconds() * 1000, "ms", fmt.Sprintf("%d/s for %s", cfg.Rate, cfg.RateFor), "GitHub's limit 10,000 ms"},
	}, nil
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

func post(c *http.Client, url, id string, body []byte, sig string) error {
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "issue_comment")
	req.Header.Set("X-GitHub-Delivery", id)
	req.Header.Set("X-Hub-Signature-256", sig)
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("delivery %s: status %d", id, resp.StatusCode)
	}
	return nil
}

// throughput sends cfg.Deliveries distinct deliveries from cfg.Clients
// goroutines and returns acknowledged deliveries per second.
func throughput(h http.Handler, cfg ingestConfig, prefix string) (float64, int, error) {
	s, err := startServer(h)
	if err != nil {
		return 0, 0, err
	}
	defer s.srv.Close()
	c := newClient(cfg.Clients)
	// Pre-build bodies so the generator's cost is the same for both runs.
	bodies := make([][]byte, cfg.Deliveries)
	sigs := make([]string, cfg.Deliveries)
	for i := range bodies {
		bodies[i], sigs[i] = delivery(fmt.Sprintf("%s-%d", prefix, i), cfg.PayloadBytes)
	}
	// Warm up connections.
	for i := 0; i < cfg.Clients; i++ {
		b, sig := delivery(fmt.Sprintf("%s-warm-%d", prefix, i), cfg.PayloadBytes)
		if err := post(c, s.url, fmt.Sprintf("%s-warm-%d", prefix, i), b, sig); err != nil {
			return 0, 0, err
		}
	}
	var next atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < cfg.Clients; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= cfg.Deliveries {
					return
				}
				if err := post(c, s.url, fmt.Sprintf("%s-%d", prefix, i), bodies[i], sigs[i]); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	if e, ok := firstErr.Load().(error); ok {
		return 0, 0, e
	}
	return float64(cfg.Deliveries) / el.Seconds(), cfg.Deliveries + cfg.Clients, nil
}

// pacedLatency sends cfg.Rate deliveries per second (open loop) for
// cfg.RateFor and returns the p50 and p99 acknowledgement latency.
func pacedLatency(h http.Handler, cfg ingestConfig) (time.Duration, time.Duration, error) {
	s, err := startServer(h)
	if err != nil {
		return 0, 0, err
	}
	defer s.srv.Close()
	c := newClient(256)
	total := int(float64(cfg.Rate) * cfg.RateFor.Seconds())
	lat := make([]time.Duration, total)
	interval := time.Second / time.Duration(cfg.Rate)
	var wg sync.WaitGroup
	var firstErr atomic.Value
	start := time.Now()
	for i := 0; i < total; i++ {
		due := start.Add(time.Duration(i) * interval)
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
		body, sig := delivery(fmt.Sprintf("paced-%d", i), cfg.PayloadBytes)
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			if err := post(c, s.url, fmt.Sprintf("paced-%d", i), body, sig); err != nil {
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
