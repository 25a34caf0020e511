package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wardenhq/warden/internal/corpus"
	"github.com/wardenhq/warden/internal/harness"
)

// The claim owner and region both drivers use: the harness's worker token
// is worker-7, and its warden serves region local.
const (
	claimOwner = "worker-7/conformance"
	region     = "local"
)

// sdkVersion is the @modelcontextprotocol/sdk version package.json pins.
const sdkVersion = "1.32.2"

// backlog starts warden with the three ready items the drivers expect, made
// by a maintainer's token (admitted at creation), in claim order: src/wal,
// src/wal/batch.go (which overlaps it), docs (which overlaps neither).
func backlog(t *testing.T) *harness.Env {
	t.Helper()
	e := harness.New(t, harness.Options{})
	for _, it := range []struct{ title, priority, anchor string }{
		{"Batch WAL writes", "priority:P1", "src/wal"},
		{"Tune the batch writer", "priority:P2", "src/wal/batch.go"},
		{"Document the WAL", "priority:P3", "docs"},
	} {
		body := map[string]any{"title": it.title, "specification": "What must be true: " + it.title, "tags": []string{it.priority},
			"links": []map[string]string{{"rel": "anchoredTo", "target": it.anchor}}}
		if code, err := e.API(context.Background(), harness.HumanToken, http.MethodPost, "/items", body, nil); err != nil || code != http.StatusCreated {
			t.Fatalf("create %q: %d %v", it.title, code, err)
		}
	}
	e.MustSettle(t)
	return e
}

// typeScriptClient finds Node and the pinned SDK; missing names what is not
// there.
func typeScriptClient() (node, sdk, missing string) {
	node, err := exec.LookPath("node")
	if err != nil {
		return "", "", "node is not on PATH"
	}
	nm, err := corpus.Root()
	if err != nil {
		return "", "", fmt.Sprintf("node_modules: %v", err)
	}
	sdk = filepath.Join(nm, "@modelcontextprotocol", "sdk")
	b, err := os.ReadFile(filepath.Join(sdk, "package.json"))
	if err != nil {
		return "", "", fmt.Sprintf("@modelcontextprotocol/sdk is not installed in %s (run `npm ci` at the repository root)", nm)
	}
	var pkg struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(b, &pkg); err != nil || pkg.Version != sdkVersion {
		return "", "", fmt.Sprintf("%s holds @modelcontextprotocol/sdk %q, not the pinned %s (run `npm ci`)", sdk, pkg.Version, sdkVersion)
	}
	return node, sdk, ""
}

// runScript runs client.mjs against warden and returns its output and exit
// status.
func runScript(t *testing.T, node, sdk string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{"client.mjs"}, args...)...)
	cmd.Env = append(os.Environ(), "WARDEN_MCP_SDK="+sdk)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &exit):
		return string(out), exit.ExitCode()
	default:
		t.Fatalf("node client.mjs: %v\n%s", err, out)
		return "", -1
	}
}

// TestConformanceTypeScriptClient: the official TypeScript MCP client
// drives warden's endpoint through the whole sequence (client.mjs), every
// answer asserted. A run told to expect another region must fail at that
// step: the script's checks can fail.
func TestConformanceTypeScriptClient(t *testing.T) {
	node, sdk, missing := typeScriptClient()
	if missing != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and the TypeScript MCP client cannot run: %s", missing)
		}
		t.Skipf("the TypeScript MCP client cannot run: %s", missing)
	}
	e := backlog(t)
	url := e.PublicURL + "/mcp"

	out, code := runScript(t, node, sdk, url, harness.WorkerToken, e.Repo.FullName, claimOwner, "eu-9")
	if code != 1 || !strings.Contains(out, "FAIL at lattice_list_regions: the current region is eu-9") {
		t.Fatalf("a run expecting region eu-9: exit %d, want 1 naming lattice_list_regions:\n%s", code, out)
	}

	out, code = runScript(t, node, sdk, url, harness.WorkerToken, e.Repo.FullName, claimOwner, region)
	if code != 0 {
		t.Fatalf("node client.mjs: exit %d\n%s", code, out)
	}
	if !strings.HasPrefix(out, "ok: ") {
		t.Fatalf("node client.mjs exited 0 without its closing line:\n%s", out)
	}
	t.Log(strings.TrimSpace(out))
}
