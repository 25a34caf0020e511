// Package conformance holds warden's MCP endpoint to MCP clients nobody here
// wrote. Its tests start warden (internal/harness) and drive /mcp as an
// agent does, through two official clients: the TypeScript SDK
// (@modelcontextprotocol/sdk, pinned in package.json and installed by
// `npm ci`), run by Node from client.mjs, and the Go SDK's client. Both
// resolve the protocol's bindings (repocontext_list_repos,
// lattice_list_regions), read a blast radius (repocontext_related), claim
// with a requestId and resend it, renew, update under the fence and with a
// stale one, release, claim the best ready item and read the ready set,
// asserting each answer.
//
// Without Node or the SDK the TypeScript test skips, naming what is
// missing; under CI=true it fails instead.
package conformance
