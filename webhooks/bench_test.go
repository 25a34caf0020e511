package webhooks

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wardenhq/warden/internal/corpus"
	"github.com/wardenhq/warden/internal/db"
)

// BenchmarkInboxAccept measures durable, group-committed acceptance of 10 KB
// deliveries from parallel callers, without HTTP.
func BenchmarkInboxAccept(b *testing.B) {
	ctx := context.Background()
	d, err := db.Open(ctx, "sqlite:"+filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	ib, err := OpenInbox(ctx, d)
	if err != nil {
		b.Fatal(err)
	}
	defer ib.Close()
	var commits atomic.Int64
	ib.OnCommit(func() { commits.Add(1) })
	payload := benchPayload(b)
	var n atomic.Int64
	b.SetBytes(int64(len(payload)))
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			h := sha256.Sum256([]byte(fmt.Sprint(n.Add(1))))
			id := hex.EncodeToString(h[:16])
			if _, err := ib.Accept(ctx, Incoming{ID: id, Event: "issue_comment", Payload: payload, ReceivedAt: time.Now()}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/float64(max(commits.Load(), 1)), "deliveries/commit")
}

// benchPayload is GitHub's own issue_comment example when the corpora are
// installed, else a synthetic body of about the same size and shape.
func benchPayload(b testing.TB) []byte {
	if ex, err := corpus.WebhookExamples(); err == nil && len(ex["issue_comment"]) > 0 {
		return ex["issue_comment"][0]
	}
	var sb strings.Builder
	sb.WriteString(`{"action":"created","comment":{"body":"`)
	for i := 0; sb.Len() < 12<<10; i++ {
		fmt.Fprintf(&sb, "https://api.github.com/repos/octo/app/issues/%d/comments word%d ", i%50, i%17)
	}
	sb.WriteString(`"}}`)
	return []byte(sb.String())
}

// BenchmarkDrainOneKey measures the dispatcher draining a backlog about one
// issue with a handler that does nothing: the delivery path's own cost per
// delivery (each completion must be durable before the key's next starts).
func BenchmarkDrainOneKey(b *testing.B) {
	ctx := context.Background()
	d, err := db.Open(ctx, "sqlite:"+filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	ib, err := OpenInbox(ctx, d)
	if err != nil {
		b.Fatal(err)
	}
	defer ib.Close()
	payload := issuePayload(1, 1, "alice")
	for i := 0; i < b.N; i++ {
		if _, err := ib.Accept(ctx, Incoming{ID: fmt.Sprintf("d-%d", i), Event: "issues", Payload: payload, ReceivedAt: time.Now()}); err != nil {
			b.Fatal(err)
		}
	}
	var handled atomic.Int64
	h := HandlerFunc(func(context.Context, *Delivery) (Result, error) {
		handled.Add(1)
		return Result{Outcome: "ok"}, nil
	})
	disp := NewDispatcher(ib, h, nil, discardLogger(), DispatchOptions{Identity: func(context.Context) (string, error) { return testBot, nil }})
	b.ResetTimer()
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- disp.Run(rctx) }()
	for handled.Load() < int64(b.N) {
		time.Sleep(time.Millisecond)
	}
	b.StopTimer()
	cancel()
	<-done
}
