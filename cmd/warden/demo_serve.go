package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/wardenhq/warden/internal/harness"
)

// demoEndpoint is one service `warden demo --serve` leaves running, with a
// curl line that exercises it.
type demoEndpoint struct {
	name, url, curl string
}

// mcpInitialize is the first request of an MCP session (JSON-RPC).
const mcpInitialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}`

// demoEndpoints are the status page, the agent API and the MCP endpoint of
// a running demo.
func demoEndpoints(env *harness.Env) []demoEndpoint {
	repo := env.Repo.FullName
	api := env.PublicURL + "/api/v1/repos/" + repo
	bearer := func(tok string) string { return "-H 'Authorization: Bearer " + tok + "'" }
	return []demoEndpoint{
		{"status page", env.AdminURL + "/", "curl -fsS " + env.AdminURL + "/"},
		{"agent API", api, "curl -fsS " + bearer(harness.WorkerToken) + " " + api + "/ready"},
		{"MCP endpoint", env.PublicURL + "/mcp", "curl -fsS " + bearer(harness.WorkerToken) +
			" -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' -d '" + mcpInitialize + "' " +
			env.PublicURL + "/mcp"},
	}
}

// printDemoEndpoints tells what a running demo serves and how to reach it.
func printDemoEndpoints(w io.Writer, env *harness.Env) {
	fmt.Fprintln(w)
	fmt.Fprintln(w, "warden and the simulator keep running (Ctrl-C stops them):")
	for _, ep := range demoEndpoints(env) {
		fmt.Fprintf(w, "  %-13s %s\n", ep.name, ep.url)
		fmt.Fprintf(w, "    %s\n", ep.curl)
	}
	fmt.Fprintln(w, "  tokens (agent API and MCP, as Authorization: Bearer TOKEN):")
	for _, t := range []struct{ role, tok string }{{"worker", harness.WorkerToken}, {"pm", harness.PMToken}, {"human", harness.HumanToken}} {
		fmt.Fprintf(w, "    %-6s %s\n", t.role, t.tok)
	}
	fmt.Fprintf(w, "  GitHub simulator %s (repository %s; webhooks go to %s/webhooks)\n", env.GitHub.URL,
		env.Repo.FullName, strings.TrimSuffix(env.PublicURL, "/"))
}
