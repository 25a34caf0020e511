package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// stream is a `go test -json` run of two packages (one failing), cut down
// from a real one.
const stream = `{"Action":"start","Package":"ex/a"}
{"Action":"run","Package":"ex/a","Test":"TestOK"}
{"Action":"output","Package":"ex/a","Test":"TestOK","Output":"=== RUN   TestOK\n"}
{"Action":"output","Package":"ex/a","Test":"TestOK","Output":"--- PASS: TestOK (0.00s)\n"}
{"Action":"pass","Package":"ex/a","Test":"TestOK","Elapsed":0}
{"Action":"run","Package":"ex/a","Test":"TestCorpus"}
{"Action":"output","Package":"ex/a","Test":"TestCorpus","Output":"=== RUN   TestCorpus\n"}
{"Action":"output","Package":"ex/a","Test":"TestCorpus","Output":"    corpus_test.go:12: @octokit/webhooks-examples not installed (npm ci)\n"}
{"Action":"output","Package":"ex/a","Test":"TestCorpus","Output":"--- SKIP: TestCorpus (0.00s)\n"}
{"Action":"skip","Package":"ex/a","Test":"TestCorpus","Elapsed":0}
{"Action":"output","Package":"ex/a","Output":"PASS\n"}
{"Action":"output","Package":"ex/a","Output":"ok  \tex/a\t0.012s\n"}
{"Action":"pass","Package":"ex/a","Elapsed":0.012}
{"Action":"run","Package":"ex/b","Test":"TestBroken"}
{"Action":"output","Package":"ex/b","Test":"TestBroken","Output":"=== RUN   TestBroken\n"}
{"Action":"output","Package":"ex/b","Test":"TestBroken","Output":"    b_test.go:9: got 2, want 3\n"}
{"Action":"output","Package":"ex/b","Test":"TestBroken","Output":"--- FAIL: TestBroken (0.00s)\n"}
{"Action":"fail","Package":"ex/b","Test":"TestBroken","Elapsed":0}
{"Action":"run","Package":"ex/b","Test":"TestHangs"}
{"Action":"output","Package":"ex/b","Test":"TestHangs","Output":"=== RUN   TestHangs\n"}
{"Action":"output","Package":"ex/b","Test":"TestHangs","Output":"panic: test timed out after 1s\n"}
{"Action":"output","Package":"ex/b","Output":"FAIL\n"}
{"Action":"output","Package":"ex/b","Output":"FAIL\tex/b\t1.002s\n"}
{"Action":"fail","Package":"ex/b","Elapsed":1.002}
{"Action":"output","Package":"ex/c","Output":"?   \tex/c\t[no test files]\n"}
{"Action":"skip","Package":"ex/c","Elapsed":0}
not json: the go command said something
`

func TestSummaryOfAStream(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"-"}, strings.NewReader(stream), &out, &errb)
	got := out.String()
	if code != 1 {
		t.Errorf("exit %d, want 1 (a test failed)", code)
	}
	for _, want := range []string{
		"ok  \tex/a\t0.012s\n",
		"    b_test.go:9: got 2, want 3\n--- FAIL: TestBroken (0.00s)\n",
		"panic: test timed out after 1s\n",
		"FAIL\tex/b\t1.002s\n",
		"?   \tex/c\t[no test files]\n",
		"not json: the go command said something\n",
		"skipped tests (1):\n  ex/a TestCorpus: corpus_test.go:12: @octokit/webhooks-examples not installed (npm ci)\n",
		"tests: 1 passed, 1 failed, 1 skipped\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("want %q in:\n%s", want, got)
		}
	}
	for _, unwanted := range []string{"=== RUN", "--- PASS", "--- SKIP", "PASS\n"} {
		if strings.Contains(got, unwanted) {
			t.Errorf("%q printed (go test without -v does not):\n%s", unwanted, got)
		}
	}
	// The failure is printed where it happened, before the package line.
	if i := strings.Index(got, "FAIL\tex/b"); strings.Index(got, "got 2, want 3") > i || strings.Index(got, "panic: test timed out") > i {
		t.Errorf("the failing test's output comes after its package's line:\n%s", got)
	}
}

func TestSkipReason(t *testing.T) {
	cases := []struct{ out, want string }{
		{"=== RUN   TestX\n    x_test.go:3: no chromium\n--- SKIP: TestX (0.00s)\n", "x_test.go:3: no chromium"},
		{"=== RUN   TestX\n--- SKIP: TestX (0.00s)\n", "(no reason given)"},
		{"=== RUN   TestX\n    x_test.go:3: first\n    x_test.go:4: second\n--- SKIP: TestX (0.00s)\n", "x_test.go:3: first / x_test.go:4: second"},
	}
	for _, c := range cases {
		if got := skipReason(c.out); got != c.want {
			t.Errorf("skipReason(%q) = %q, want %q", c.out, got, c.want)
		}
	}
}

// TestRunsGoTest runs the summariser on a real package (testdata/fixture):
// its exit status is go test's, skips are listed with their reasons, and a
// failure's output is printed in full.
func TestRunsGoTest(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Fatalf("go is not on PATH: %v", err)
	}
	dir, err := filepath.Abs(filepath.Join("testdata", "fixture"))
	if err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	defer os.Chdir(wd)
	for _, fail := range []bool{false, true} {
		t.Setenv("FIXTURE_FAIL", map[bool]string{false: "0", true: "1"}[fail])
		var out, errb bytes.Buffer
		code := run([]string{"-count=1", "./..."}, strings.NewReader(""), &out, &errb)
		got := out.String()
		if wantCode := map[bool]int{false: 0, true: 1}[fail]; code != wantCode {
			t.Fatalf("FIXTURE_FAIL=%v: exit %d, want %d\n%s%s", fail, code, wantCode, got, errb.String())
		}
		for _, want := range []string{"TestSkipsLoudly: fixture_test.go:10: corpus not installed: run npm ci",
			"TestTable/two: fixture_test.go:21: needs chromium", "skipped tests (2):"} {
			if !strings.Contains(got, want) {
				t.Errorf("FIXTURE_FAIL=%v: want %q in:\n%s", fail, want, got)
			}
		}
		if fail {
			for _, want := range []string{"the detail of the failure", "boom", "--- FAIL: TestFails", "FAIL\texample.com/fixture", "tests: 3 passed, 1 failed, 2 skipped"} {
				if !strings.Contains(got, want) {
					t.Errorf("a failing run: want %q in:\n%s", want, got)
				}
			}
		} else if !strings.Contains(got, "ok  \texample.com/fixture") || !strings.Contains(got, "tests: 4 passed, 0 failed, 2 skipped") {
			t.Errorf("a passing run:\n%s", got)
		}
	}
}
