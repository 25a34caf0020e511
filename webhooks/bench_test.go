package webhooks

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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
	payload := []byte(`{"comment":{"body":"` + strings.Repeat("x", benchPayloadSize) + `"}}`)
	var n atomic.Int64
	b.SetBytes(int64(len(payload)))
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := fmt.Sprintf("d-%d", n.Add(1))
			if _, err := ib.Accept(ctx, Incoming{ID: id, Event: "issue_comment", Payload: payload, ReceivedAt: time.Now()}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/float64(max(commits.Load(), 1)), "deliveries/commit")
}

var benchPayloadSize = 10 << 10
