// An independent MCP client, the official TypeScript SDK, against tally:
// over stdio it launches `tally mcp` (TALLY_BIN) once per identity; over
// streamable HTTP it talks to `tally serve` (MCP_URL) with bearer tokens.
// It lists the tools and their schemas, runs the seed's promise lifecycle,
// and checks that refusals are tool errors naming the rule, with the log
// (LOG_PATH) unchanged. Exits non-zero on the first failure.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { statSync } from "node:fs";

const env = process.env;
const mode = env.MODE;
const logPath = env.LOG_PATH;

function check(cond, what, detail) {
  if (!cond) {
    throw new Error("FAIL " + what + (detail === undefined ? "" : ": " + JSON.stringify(detail)));
  }
  console.log("ok   " + what);
}

function logSize() {
  try {
    return statSync(logPath).size;
  } catch {
    return 0;
  }
}

// connect opens a client session as who: a seat over stdio, a token's
// name (TOKEN_<WHO>) over HTTP.
async function connect(who, session) {
  const client = new Client({ name: "tally-interop", version: "1.0.0" });
  let transport;
  if (mode === "stdio") {
    transport = new StdioClientTransport({
      command: env.TALLY_BIN,
      args: ["mcp"],
      env: { PATH: env.PATH, TALLY_DIR: env.TALLY_DIR, TALLY_ACTOR: who },
      stderr: "inherit",
    });
  } else if (mode === "client") {
    // `tally mcp` over stdio, acting as the token's identity through a server.
    transport = new StdioClientTransport({
      command: env.TALLY_BIN,
      // The CLI acts in --session (default/default): another tenant's
      // token names a session of its own.
      args: session ? ["mcp", "--session", session] : ["mcp"],
      env: { PATH: env.PATH, TALLY_URL: env.TALLY_URL, TALLY_TOKEN: env["TOKEN_" + who.toUpperCase()] },
      stderr: "inherit",
    });
  } else {
    const token = env["TOKEN_" + who.toUpperCase()];
    transport = new StreamableHTTPClientTransport(new URL(env.MCP_URL), {
      requestInit: { headers: { Authorization: "Bearer " + token } },
    });
  }
  await client.connect(transport);
  return client;
}

// ok calls a tool that must succeed; its structured content is validated
// by the SDK against the tool's output schema.
async function ok(client, name, args) {
  const res = await client.callTool({ name, arguments: args });
  check(!res.isError, name + " succeeds", res.content);
  check(res.structuredContent && res.structuredContent.schema_version === 1, name + " returns structured content", res);
  check(JSON.stringify(JSON.parse(res.content[0].text)) === JSON.stringify(res.structuredContent), name + " text is its document");
  return res.structuredContent;
}

// refused calls a tool that must be refused and returns its error document.
async function refused(client, name, args, code, says) {
  const before = logSize();
  const res = await client.callTool({ name, arguments: args });
  check(res.isError === true, name + " is a tool error", res);
  const doc = JSON.parse(res.content[0].text);
  check(doc.schema_version === 1 && doc.code === code, name + " refused with code " + code, doc);
  check(doc.error.includes(says) && doc.error.includes(": "), name + " names the rule (" + says + ")", doc);
  check(logSize() === before, name + " appends nothing");
  return doc;
}

const reviewer = await connect("reviewer");
const author = await connect("author");
const stranger = await connect("stranger");

// The tools and their schemas.
const { tools } = await reviewer.listTools();
const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
for (const name of (env.EXPECT_TOOLS || "").split(",").filter(Boolean)) {
  const t = byName[name];
  check(t !== undefined, "tool " + name + " listed");
  check(/^tally_[a-z]+_[a-z_]+$/.test(t.name) && t.description.length > 0, name + " is named and described");
  check(t.inputSchema.type === "object" && t.inputSchema.additionalProperties === false, name + " input schema is a closed object", t.inputSchema);
  check("session" in t.inputSchema.properties, name + " takes the session");
  check(t.outputSchema && t.outputSchema.type === "object" && t.outputSchema.required.includes("schema_version"), name + " has an output schema");
}
check(byName.tally_promise_show.annotations.readOnlyHint === true, "show is read-only");
check(byName.tally_promise_resolve.annotations.destructiveHint === true, "resolve is destructive");
check(byName.tally_promise_declare.annotations.destructiveHint === false, "declare is not destructive");
check(JSON.stringify(byName.tally_promise_declare.inputSchema.required) === JSON.stringify(["promise", "to", "until"]), "declare requires promise, to, until");
check(byName.tally_promise_declare.inputSchema.properties.request_id.maxLength === 256, "declare takes a bounded request_id");

// The seed's promise lifecycle.
const id = "desk/ship-91-" + mode;
let d = await ok(reviewer, "tally_promise_declare", { id, promise: "hand back a reviewed schema", to: "author", until: "2h", meta: { rung: 0 }, request_id: "declare-" + mode });
check(d.promise.id === id && d.promise.by === "reviewer" && d.promise.state === "owed", "declared as the reviewer", d);
const size = logSize();
const again = await reviewer.callTool({ name: "tally_promise_declare", arguments: { id, promise: "hand back a reviewed schema", to: "author", until: "2h", meta: { rung: 0 }, request_id: "declare-" + mode } });
check(!again.isError && again.structuredContent.seq === d.seq && logSize() === size, "a retried declaration is the recorded answer, appending nothing", again);
d = await ok(reviewer, "tally_promise_amend", { id, until: "3h", reason: "nudge 1", meta: { rung: 1 } });
check(d.promise.horizons.length === 2, "amended: two horizons", d);
d = await ok(author, "tally_promise_assess", { id, note: "deadline passed, nothing delivered" });
check(d.promise.assessments.length === 1 && d.promise.assessments[0].state === "violated" && d.promise.assessments[0].observer === "author", "assessed violated by the author", d);

// Refusals: a stranger amending, the creditor satisfying, a bad deadline.
await refused(stranger, "tally_promise_amend", { id, until: "9h" }, "forbidden", "debtor");
await refused(author, "tally_promise_resolve", { id, as: "satisfied", evidence: ["x"] }, "forbidden", "");
await refused(reviewer, "tally_promise_declare", { promise: "x", to: "author", until: "yesterday" }, "invalid", "until");
await refused(reviewer, "tally_promise_declare", { promise: "x", to: "author", until: 5 }, "invalid", "until: must be a string");
await refused(reviewer, "tally_promise_declare", { promise: "x", until: "2h" }, "invalid", "to: required");

d = await ok(reviewer, "tally_promise_resolve", { id, as: "satisfied", evidence: ["https://example.org/reviews/91"] });
check(d.promise.state === "satisfied", "satisfied with evidence", d);
d = await ok(author, "tally_promise_show", { id });
check(d.promise.state === "satisfied" && d.promise.resolved_by === "reviewer", "shown satisfied", d);
d = await ok(author, "tally_promise_list", { state: "all", to: "author" });
check(d.promises.some((p) => p.id === id), "listed", d);

// The seed's claims C17 and C18 (CLAIMS=1): C17's patch fails review,
// its successor passes both checks on one patch.
if (env.CLAIMS === "1") {
  const maintainer = await connect("maintainer");
  const parser = await connect("parser");
  const b64 = (s) => Buffer.from(s).toString("base64");
  const C = (n) => n + "-" + mode;
  const c17 = {
    claim: C("C17"), respondent: "parser", work: "reject incomplete Unicode escapes", scope: "string parser and its regression tests",
    slots: [{ name: "change", mode: "required", checks: [
      { id: "behavior", validator: { name: "command", version: "1" }, evaluator: "maintainer", mode: "required", phases: ["programmatic"], attempts: 2 },
      { id: "review", validator: { name: "review", version: "1" }, evaluator: "maintainer", mode: "required", phases: ["quality"], attempts: 1 }] }],
  };
  const deliver = async (claim, testament, artifact, patch) => {
    await ok(parser, "tally_claim_artifact_publish", { claim, artifact, slot: "change", generation: 1, kind: "patch", schema: "text/x-diff", content_base64: b64(patch) });
    await ok(parser, "tally_claim_testament_close", { claim, testament, generation: 1, outcome: "complete", summary: "length check before decoding", confidence: 0.9, bindings: [{ slot: "change", artifact }] });
    await ok(parser, "tally_claim_testament_post", { claim, testament });
    await ok(maintainer, "tally_claim_testament_receive", { claim, testament });
  };
  const verdict = async (claim, check, artifact, result, evidence) => {
    await ok(maintainer, "tally_claim_check_begin", { claim, check, artifact });
    return ok(maintainer, "tally_claim_check_report", { claim, check, artifact, result, evidence: claim + "-" + check + "-log", evidence_base64: b64(evidence) });
  };
  let c = await ok(maintainer, "tally_claim_create", c17);
  check(c.claim.state === "Generated", "C17 generated", c);
  await ok(maintainer, "tally_claim_post", { claim: C("C17") });
  await ok(parser, "tally_claim_receipt_acquire", { claim: C("C17") });
  await deliver(C("C17"), "T1", "patch-a", "+\tif len(s) < 6 { return errIncomplete }\n");
  // A verdict by a non-evaluator: a tool error naming the rule, nothing recorded.
  await refused(parser, "tally_claim_check_report", { claim: C("C17"), check: "review", artifact: "patch-a", result: "pass", evidence: "forged", evidence_base64: b64("fine") }, "forbidden", "evaluator");
  await refused(stranger, "tally_claim_cancel", { claim: C("C17"), reason: "mine now" }, "forbidden", "");
  await verdict(C("C17"), "behavior", "patch-a", "pass", "go test ./parser: ok\n");
  c = await verdict(C("C17"), "review", "patch-a", "fail", "patch A: unchecked read after the escape\n");
  check(c.claim.state === "ValidationFailed", "C17 failed its review", c.claim.state);
  c = await ok(stranger, "tally_claim_show", { claim: C("C17") });
  check(c.claim.why !== undefined && c.claim.why !== null, "C17 says why it is not satisfied", c.claim);
  await ok(maintainer, "tally_claim_create", { claim: C("C18"), respondent: "parser", work: "reject incomplete Unicode escapes (bounds checked)", predecessor: C("C17") });
  await ok(maintainer, "tally_claim_post", { claim: C("C18") });
  await ok(parser, "tally_claim_receipt_acquire", { claim: C("C18") });
  await deliver(C("C18"), "T2", "patch-b", "+\tif len(s) < i+6 { return errIncomplete }\n");
  await verdict(C("C18"), "behavior", "patch-b", "pass", "go test ./parser: ok\n");
  c = await verdict(C("C18"), "review", "patch-b", "pass", "patch B: bounds checked before every read\n");
  check(c.claim.state === "Satisfied", "C18 satisfied", c.claim.state);
  await maintainer.close();
  await parser.close();
}

// The ledger: verified whole, exported as text.
const verified = await ok(author, "tally_ledger_verify", {});
check(verified.whole === true && verified.lines > 0, "the log verifies whole", verified);
const exported = await author.callTool({ name: "tally_ledger_export", arguments: { format: "jsonl" } });
check(!exported.isError && exported.content[0].text.includes('"id":"' + id + '"'), "the log exports as text", exported);

// The resource and the prompt.
const owed = await reviewer.readResource({ uri: "tally://owed/reviewer" });
check(JSON.parse(owed.contents[0].text).schema_version === 1, "tally://owed/reviewer reads a document");
const prompt = await reviewer.getPrompt({ name: "resume_seat", arguments: {} });
check(prompt.messages[0].content.text.startsWith("# tally prime: reviewer, as of "), "resume_seat prompt", prompt);

// A foreign tenant's token sees nothing of this tenant.
if (mode !== "stdio") {
  const foreign = await connect("foreign", "globex/default");
  await refused(foreign, "tally_promise_show", { id, session: "default/default" }, "not_found", "session");
  await refused(foreign, "tally_promise_amend", { id, until: "9h", session: "default/default" }, "not_found", "session");
  const own = await foreign.callTool({ name: "tally_promise_show", arguments: { id } });
  check(own.isError === true && !own.content[0].text.includes("reviewed schema"), "its own default session holds nothing", own);
  await foreign.close();
}
if (mode === "http") {
  // No token at all: the endpoint answers 401 before any MCP.
  const bare = new Client({ name: "tally-interop", version: "1.0.0" });
  let failed = false;
  try {
    await bare.connect(new StreamableHTTPClientTransport(new URL(env.MCP_URL)));
  } catch (e) {
    failed = true;
  }
  check(failed, "no token, no session");
}

for (const c of [reviewer, author, stranger]) {
  await c.close();
}
console.log("interop " + mode + ": all checks passed");
