package harness

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestProfilerOnTheAdminListenerOnly: Go's profiler answers on the
// operators' listener, and the public listener (GitHub's and the agents')
// does not expose it.
func TestProfilerOnTheAdminListenerOnly(t *testing.T) {
	e := New(t, Options{})
	get := func(url string) (int, string) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return resp.StatusCode, string(b)
	}
	if code, body := get(e.AdminURL + "/debug/pprof/"); code != http.StatusOK || !strings.Contains(body, "goroutine") {
		t.Fatalf("admin /debug/pprof/: %d %.200q", code, body)
	}
	if code, body := get(e.AdminURL + "/debug/pprof/goroutine?debug=1"); code != http.StatusOK || !strings.Contains(body, "goroutine profile") {
		t.Fatalf("admin goroutine profile: %d %.200q", code, body)
	}
	if code, _ := get(e.PublicURL + "/debug/pprof/"); code == http.StatusOK {
		t.Fatalf("the public listener serves the profiler")
	}
}
