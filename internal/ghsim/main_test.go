package ghsim

// The conformance harness. TestMain attaches a recorder to every simulator
// any test in this package creates (through newSimHook), runs the tests, and
// then holds what the simulator did against sources nobody here wrote:
//
//   - every recorded REST answer against GitHub's REST description
//     (@octokit/openapi, see conformance_openapi_test.go);
//   - every route the simulator serves must have been answered with a 2xx
//     by some test in the package;
//   - every webhook the simulator delivered against the fields GitHub's
//     example payloads (@octokit/webhooks-examples) carry and warden reads
//     (see conformance_webhooks_test.go).
//
// The summary goes to stdout (shown by `go test -v`, or when the package
// fails). A failed check makes the package fail. Under CI=true a missing
// corpus, a route no test answered with a 2xx, and a required webhook
// event/action the simulator never delivered fail too (only for a full run of
// the package: with -run or -skip, coverage is reported, not enforced).

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wardenhq/warden/internal/corpus"
)

func TestMain(m *testing.M) {
	newSimHook = confRec.attach
	code := m.Run()
	newSimHook = nil
	if confListing() {
		os.Exit(code)
	}
	if confAfterRun(os.Stdout) && code == 0 {
		code = 1
	}
	os.Exit(code)
}

// confExchange is one REST exchange and the simulator that answered it.
type confExchange struct {
	sim *Sim
	Exchange
}

// confDelivery is one webhook delivery attempt and the simulator that made it.
type confDelivery struct {
	sim *Sim
	Delivered
}

// confRecorder records every exchange and delivery of every simulator the
// package's tests create.
type confRecorder struct {
	mu         sync.Mutex
	sims       []*Sim
	exchanges  []confExchange
	deliveries []confDelivery
}

var confRec confRecorder

// attach is newSimHook: it observes a new simulator. (A test that calls
// Observe itself replaces these observers for its simulator, and that
// simulator's traffic goes unchecked.)
func (r *confRecorder) attach(s *Sim) {
	r.mu.Lock()
	r.sims = append(r.sims, s)
	r.mu.Unlock()
	s.Observe(func(e Exchange) {
		r.mu.Lock()
		r.exchanges = append(r.exchanges, confExchange{s, e})
		r.mu.Unlock()
	}, func(d Delivered) {
		r.mu.Lock()
		r.deliveries = append(r.deliveries, confDelivery{s, d})
		r.mu.Unlock()
	})
}

// exchangesOf returns the exchanges recorded for one simulator, oldest first.
func (r *confRecorder) exchangesOf(s *Sim) []Exchange {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Exchange
	for _, e := range r.exchanges {
		if e.sim == s {
			out = append(out, e.Exchange)
		}
	}
	return out
}

func (r *confRecorder) snapshot() (sims []*Sim, ex []confExchange, del []confDelivery) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*Sim(nil), r.sims...), append([]confExchange(nil), r.exchanges...), append([]confDelivery(nil), r.deliveries...)
}

// confCI reports whether the tests run under CI (CI=true), where a skipped
// conformance check and missing coverage are failures.
func confCI() bool { return os.Getenv("CI") == "true" }

// confFullRun reports whether every test of the package ran (no -run or
// -skip filter): coverage is only enforced then.
func confFullRun() bool {
	for _, name := range []string{"test.run", "test.skip"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != "" {
			return false
		}
	}
	return true
}

func confListing() bool {
	f := flag.Lookup("test.list")
	return f != nil && f.Value.String() != ""
}

// confCorpusMissingMsg is the loud message of a skip for missing corpora.
const confCorpusMissingMsg = "test corpora not installed: run npm ci"

// confSkipIfMissing skips t when err says the corpora are not installed
// (failing it under CI=true), and fails it on any other error.
func confSkipIfMissing(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if errors.Is(err, corpus.ErrMissing) {
		msg := "!!! " + confCorpusMissingMsg + " (" + err.Error() + ") — GitHub conformance NOT checked !!!"
		if confCI() {
			t.Fatal(msg + " [CI=true: a skip is a failure]")
		}
		t.Skip(msg)
	}
	t.Fatal(err)
}

// confAfterRun runs the checks over what the package's tests recorded and
// prints their summary; it reports whether the package must fail.
func confAfterRun(w io.Writer) (failed bool) {
	start := time.Now()
	defer func() { fmt.Fprintf(w, "(conformance checks took %s)\n", time.Since(start).Round(time.Millisecond)) }()
	sims, exchanges, deliveries := confRec.snapshot()
	fmt.Fprintln(w)
	fmt.Fprintln(w, "=== ghsim conformance (GitHub REST description and webhook examples)")
	if len(sims) == 0 {
		fmt.Fprintln(w, "no simulator was created by the tests that ran: nothing to check")
		return false
	}
	strict := confCI() && confFullRun()
	spec, err := confLoadSpec()
	if err != nil {
		if errors.Is(err, corpus.ErrMissing) {
			fmt.Fprintf(w, "!!! %s (%v): the simulator's REST answers and webhooks were NOT checked against GitHub !!!\n", confCorpusMissingMsg, err)
			if confCI() {
				fmt.Fprintln(w, "FAIL: CI=true and the corpora are missing")
				return true
			}
			return false
		}
		fmt.Fprintf(w, "FAIL: load GitHub's REST description: %v\n", err)
		return true
	}
	routes := confServedRoutes(sims[0])
	if confValidateExchanges(w, spec, routes, exchanges, strict) {
		failed = true
	}
	if confCheckDeliveries(w, spec, deliveries, strict) {
		failed = true
	}
	if failed {
		fmt.Fprintln(w, "FAIL: ghsim conformance")
	} else {
		fmt.Fprintln(w, "ok: ghsim conformance")
	}
	return failed
}

// confTrunc shortens s to n characters for the summary.
func confTrunc(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
