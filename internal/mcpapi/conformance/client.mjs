// Conformance driver: warden's MCP endpoint held to the official TypeScript
// MCP client (@modelcontextprotocol/sdk, pinned in package.json), over
// streamable HTTP with a bearer token, as an agent host drives it.
//
//   node client.mjs <mcp-url> <token> <owner/repo> <claim-owner> <region>
//
// WARDEN_MCP_SDK names the SDK's package directory (the Go test finds it in
// node_modules). The backlog must hold three ready items, all admitted:
// the first in claim order anchored to src/wal, one anchored to
// src/wal/batch.go, one anchored to docs only. Each step asserts the answer;
// the first mismatch ends the run with exit status 1, naming the step.

import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [url, token, repository, owner, region] = process.argv.slice(2);
if (!region) {
  console.error("usage: node client.mjs <mcp-url> <token> <owner/repo> <claim-owner> <region>");
  process.exit(2);
}
const sdk = process.env.WARDEN_MCP_SDK;
if (!sdk) {
  console.error("WARDEN_MCP_SDK is not set: it names the @modelcontextprotocol/sdk package directory");
  process.exit(2);
}
const { Client } = await import(pathToFileURL(join(sdk, "dist/esm/client/index.js")).href);
const { StreamableHTTPClientTransport } = await import(pathToFileURL(join(sdk, "dist/esm/client/streamableHttp.js")).href);

class Mismatch extends Error {}
let step = "start";
let checks = 0;
function check(cond, what, got) {
  checks++;
  if (!cond) {
    throw new Mismatch(`${what}${got === undefined ? "" : `; got ${JSON.stringify(got)}`}`);
  }
}

const client = new Client({ name: "warden-conformance", version: "1.0.0" });
const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});

// call runs a tool; a refusal is returned (isError), never thrown.
async function call(name, args) {
  const res = await client.callTool({ name, arguments: args });
  const text = (res.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
  return { out: res.structuredContent ?? {}, isError: res.isError === true, text };
}
async function ok(name, args) {
  const r = await call(name, args);
  check(!r.isError, `${name} refused`, r.out);
  return r.out;
}
async function refused(name, args) {
  const r = await call(name, args);
  check(r.isError, `${name} succeeded, want a refusal`, r.out);
  check(typeof r.out.reason === "string" && r.out.reason !== "", `${name}'s refusal carries no reason`, r.out);
  check(r.text.startsWith(r.out.reason + ": "), `${name}'s refusal text does not begin with its reason`, r.text);
  return r.out;
}

// rest asks the agent API the same question, for the reason it gives.
const api = url.replace(/\/mcp\/?$/, "/api/v1/repos/" + repository);
async function rest(method, path, body) {
  const res = await fetch(api + path, {
    method,
    headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

const wantTools = [
  "repocontext_list_repos", "lattice_list_regions", "repocontext_related",
  "repocontext_scan", "repocontext_recall", "repocontext_remember", "repocontext_update", "repocontext_forget",
  "repocontext_claim", "repocontext_renew_claim", "repocontext_release_claim", "repocontext_claim_status",
  "repocontext_neighbors", "backlog_ready", "backlog_claim_next", "backlog_report",
];

async function run() {
  step = "initialize";
  await client.connect(transport);
  const server = client.getServerVersion();
  check(server?.name === "warden", "the server names itself warden", server);
  check(client.getServerCapabilities()?.tools !== undefined, "the server offers tools", client.getServerCapabilities());
  check((client.getInstructions() ?? "").includes("repocontext_list_repos"), "the instructions say how to bind {repoId}", client.getInstructions());

  step = "tools/list";
  const { tools } = await client.listTools();
  const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
  for (const name of wantTools) {
    check(byName[name] !== undefined, `tools/list lists ${name}`, Object.keys(byName));
  }
  for (const t of tools) {
    check(typeof t.description === "string" && t.description.length >= 40, `${t.name} has a description`, t.description);
    check(t.inputSchema?.type === "object", `${t.name} publishes an object input schema`, t.inputSchema);
  }
  for (const name of ["repocontext_claim", "repocontext_renew_claim", "repocontext_release_claim", "backlog_claim_next"]) {
    check(byName[name].inputSchema.properties?.requestId !== undefined, `${name} takes requestId`, byName[name].inputSchema);
  }
  check((byName.backlog_claim_next.inputSchema.required ?? []).includes("leaseSeconds"), "backlog_claim_next requires leaseSeconds",
    byName.backlog_claim_next.inputSchema);

  step = "repocontext_list_repos";
  const repos = await ok("repocontext_list_repos", {});
  const mine = (repos.repos ?? []).find((r) => r.repository.toLowerCase() === repository.toLowerCase());
  check(mine !== undefined && typeof mine.repoId === "string" && mine.repoId !== "", `${repository} is listed with its repoId`, repos);
  const repoId = mine.repoId;
  const prefix = `repo/${repoId}/mem/backlog/`;
  const file = (p) => `repo/${repoId}/file/${p}`;

  step = "lattice_list_regions";
  const regions = await ok("lattice_list_regions", {});
  check(regions.current === region, `the current region is ${region}`, regions);
  check((regions.regions ?? []).some((r) => r.id === region && r.current === true), `${region} is a routable region, current`, regions);

  step = "backlog_ready";
  const ready = await ok("backlog_ready", { repoId });
  check(ready.readyCount === 3 && ready.ready.length === 3, "three items are ready", ready);
  for (const r of ready.ready) {
    check(typeof r.key === "string" && r.key === prefix + r.item, `ready item ${r.item} carries its key`, r);
  }
  const [a, b, c] = ready.ready.map((r) => r.key);

  step = "repocontext_related (an item)";
  const rel = await ok("repocontext_related", { key: a });
  check(JSON.stringify(rel.anchors) === JSON.stringify([file("src/wal")]), `${a}'s radius is src/wal`, rel);
  check(rel.related.length === 1 && rel.related[0].key === b, `only ${b} overlaps ${a}`, rel);
  check(JSON.stringify(rel.related[0].shared) === JSON.stringify([{ anchor: file("src/wal"), overlaps: file("src/wal/batch.go") }]),
    "the anchors shared are named", rel.related[0]);
  check(rel.inFlight.length === 0, "nothing is in flight yet", rel);

  step = "repocontext_related (an anchor)";
  const relDocs = await ok("repocontext_related", { repoId, anchors: ["docs"] });
  check(relDocs.related.length === 1 && relDocs.related[0].key === c, `only ${c} is under docs`, relDocs);

  step = "repocontext_claim with requestId";
  const rid = `conformance-${process.pid}-1`;
  const claim = await ok("repocontext_claim", { key: a, owner, leaseSeconds: 120, requestId: rid });
  check(claim.granted === true && claim.key === a && claim.lockName === "repocontext/claim/" + a, "the claim is granted under the protocol's key", claim);
  check(Number.isInteger(claim.fencingToken) && claim.fencingToken > 0, "the grant carries a fencing token", claim);
  check(claim.region === region && claim.leaseDefaulted === false, "the grant records the region and the lease asked for", claim);
  const fence = claim.fencingToken;

  step = "repocontext_claim resent";
  const again = await ok("repocontext_claim", { key: a, owner, leaseSeconds: 120, requestId: rid });
  check(again.granted === true && again.fencingToken === fence && again.replayed === true, "a resend answers the same grant, replayed", again);
  check(again.leaseExpiresAtUtc === claim.leaseExpiresAtUtc, "a resend answers the same lease", again);

  step = "repocontext_related (in flight)";
  const relB = await ok("repocontext_related", { key: b });
  check(relB.inFlight.length === 1 && relB.inFlight[0] === a, `${a} is in flight beside ${b}`, relB);

  step = "repocontext_renew_claim";
  const renew = await ok("repocontext_renew_claim", { key: a, fencingToken: fence, leaseSeconds: 300 });
  check(renew.granted === true && renew.fencingToken === fence && renew.leaseSeconds === 300, "the renew keeps the fence with the new lease", renew);

  step = "repocontext_update under the fence";
  const body = "lastLocation: branch feat/wal\nresumeNote: conformance run";
  const up = await ok("repocontext_update", { key: a, fields: { body }, fencingToken: fence });
  check(up.key === a && up.fieldsUpdated === 1 && up.item?.body?.includes("resumeNote: conformance run"), "the fenced update is written", up);

  step = "repocontext_release_claim";
  const rel1 = await ok("repocontext_release_claim", { key: a, fencingToken: fence });
  check(rel1.released === true, "the claim is released", rel1);

  step = "repocontext_update with a stale fence";
  const claim2 = await ok("repocontext_claim", { key: a, owner, leaseSeconds: 120, requestId: `conformance-${process.pid}-2` });
  check(claim2.granted === true && claim2.fencingToken > fence, "a new claim moves the fence on", claim2);
  const stale = await refused("repocontext_update", { key: a, fields: { body: body + " (stale)" }, fencingToken: fence });
  const restStale = await rest("PATCH", "/items/" + a.slice(prefix.length), { body: body + " (stale)", fencingToken: fence });
  check(restStale.status === 409 && stale.reason === restStale.body.reason, "the tool error carries the REST reason",
    { mcp: stale.reason, rest: restStale.body.reason });
  check(stale.reason === "StaleToken" && stale.currentFencingToken === claim2.fencingToken, "a stale fence is StaleToken, naming the current one", stale);
  check((await ok("repocontext_release_claim", { key: a, fencingToken: claim2.fencingToken })).released === true, "the second claim is released");

  step = "arguments the input schema refuses";
  const bad = await refused("repocontext_claim", { key: a, owner, leaseSeconds: "soon" });
  const restBad = await rest("POST", "/items/" + a.slice(prefix.length) + "/claim", { owner, leaseSeconds: "soon" });
  check(bad.reason === "invalid-request" && bad.field === "leaseSeconds" && bad.reason === restBad.body.reason,
    "a mistyped argument is invalid-request naming it, as the REST API refuses it", { mcp: bad, rest: restBad.body });

  step = "backlog_claim_next with requestId";
  const nid = `conformance-${process.pid}-3`;
  const next = await ok("backlog_claim_next", { repoId, owner, leaseSeconds: 120, requestId: nid });
  check(next.granted === true && next.key === a && next.lockName === "repocontext/claim/" + a, `the best ready item (${a}) is claimed`, next);
  const nextAgain = await ok("backlog_claim_next", { repoId, owner, leaseSeconds: 120, requestId: nid });
  check(nextAgain.key === a && nextAgain.fencingToken === next.fencingToken && nextAgain.replayed === true, "a resend answers the same grant", nextAgain);

  step = "backlog_ready with a claim held";
  const ready2 = await ok("backlog_ready", { repoId });
  check(ready2.readyCount === 2 && !ready2.ready.some((r) => r.key === a), `${a} has left the ready set`, ready2);
  check(ready2.excluded.some((e) => e.key === a && e.reason === "held"), `${a} is excluded held`, ready2.excluded);
  check((await ok("repocontext_release_claim", { key: a, fencingToken: next.fencingToken })).released === true, "the last claim is released");
}

try {
  await run();
  console.log(`ok: ${checks} checks passed against ${url}`);
  await client.close();
  process.exit(0);
} catch (e) {
  console.error(`FAIL at ${step}: ${e instanceof Mismatch ? e.message : e?.stack ?? e}`);
  try { await client.close(); } catch { /* already failing */ }
  process.exit(1);
}
