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

// callOf is the call of TOOL/ACTION: the tool, with the action among the
// arguments.
function callOf(name, args) {
  const [tool, action] = name.split("/");
  return { name: tool, arguments: action === undefined ? args : { action, ...args } };
}

// ok calls a tool that must succeed; its answer is its document, once, as
// text (no structured content beside it).
async function ok(client, name, args) {
  const res = await client.callTool(callOf(name, args));
  check(!res.isError, name + " succeeds", res.content);
  check(res.structuredContent === undefined && res.content.length === 1, name + " answers one text", res);
  const doc = JSON.parse(res.content[0].text);
  check(doc.schema_version === 1, name + " text is its document", doc);
  return doc;
}

// refused calls a tool that must be refused and returns its error document.
async function refused(client, name, args, code, says) {
  const before = logSize();
  const res = await client.callTool(callOf(name, args));
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
// Each expected TOOL/ACTION: the tool listed, its action in the enum and
// named in its description with what it requires.
for (const name of (env.EXPECT_TOOLS || "").split(",").filter(Boolean)) {
  const [tool, action] = name.split("/");
  const t = byName[tool];
  check(t !== undefined, "tool " + tool + " listed");
  check(/^tally_[a-z]+(_[a-z]+)?$/.test(t.name) && t.description.length > 0, tool + " is named and described");
  check(t.inputSchema.type === "object" && t.inputSchema.additionalProperties === false, tool + " input schema is a closed object", t.inputSchema);
  check("session" in t.inputSchema.properties, tool + " takes the session");
  check(t.outputSchema === undefined, tool + " answers text, with no output schema");
  check(t.inputSchema.properties.action.enum.includes(action) && t.description.includes("\n- " + action + "("), name + " is an action of " + tool);
  for (const [member, p] of Object.entries(t.inputSchema.properties)) {
    check(typeof p.description === "string" && p.description.length > 0, tool + "." + member + " is described");
  }
}
check(byName.tally_promise_read.annotations.readOnlyHint === true, "reads are read-only");
check(byName.tally_promise.annotations.destructiveHint === true && byName.tally_promise.annotations.readOnlyHint === false, "promise writes may end one for good");
check(byName.tally_promise.description.includes("- declare(promise, to, until)"), "declare requires promise, to, until");
check(JSON.stringify(byName.tally_promise.inputSchema.properties.resolution.enum) === JSON.stringify(["satisfied", "cancelled", "released"]), "a resolution is one of three");
check(byName.tally_promise.inputSchema.properties.request_id.maxLength === 256, "writes take a bounded request_id");
check(JSON.stringify(byName.tally_expect.inputSchema.properties.replyTo.type) === JSON.stringify(["string", "object"]), "replyTo is a URL or an object");

// The seed's promise lifecycle.
const id = "desk/ship-91-" + mode;
let d = await ok(reviewer, "tally_promise/declare", { id, promise: "hand back a reviewed schema", to: "author", until: "2h", meta: { rung: 0 }, request_id: "declare-" + mode });
check(d.promise.id === id && d.promise.by === "reviewer" && d.promise.state === "owed", "declared as the reviewer", d);
const size = logSize();
const again = await reviewer.callTool(callOf("tally_promise/declare", { id, promise: "hand back a reviewed schema", to: "author", until: "2h", meta: { rung: 0 }, request_id: "declare-" + mode }));
check(!again.isError && JSON.parse(again.content[0].text).seq === d.seq && again._meta["tally/replayed"] === true && logSize() === size, "a retried declaration is the recorded answer, appending nothing", again);
d = await ok(reviewer, "tally_promise/amend", { id, until: "3h", reason: "nudge 1", meta: { rung: 1 } });
check(d.promise.horizons.length === 2, "amended: two horizons", d);
d = await ok(author, "tally_promise/assess", { id, note: "deadline passed, nothing delivered" });
check(d.promise.assessments.length === 1 && d.promise.assessments[0].state === "violated" && d.promise.assessments[0].observer === "author", "assessed violated by the author", d);

// Refusals: a stranger amending, the creditor satisfying, a bad deadline.
await refused(stranger, "tally_promise/amend", { id, until: "9h" }, "forbidden", "debtor");
await refused(author, "tally_promise/resolve", { id, resolution: "satisfied", evidence: ["x"] }, "forbidden", "");
await refused(reviewer, "tally_promise/declare", { promise: "x", to: "author", until: "yesterday" }, "invalid", "until");
await refused(reviewer, "tally_promise/declare", { promise: "x", to: "author", until: 5 }, "invalid", "until: must be a string");
await refused(reviewer, "tally_promise/declare", { promise: "x", until: "2h" }, "invalid", "to: required");

d = await ok(reviewer, "tally_promise/resolve", { id, resolution: "satisfied", evidence: ["https://example.org/reviews/91"] });
check(d.promise.state === "satisfied", "satisfied with evidence", d);
d = await ok(author, "tally_promise_read/show", { id });
check(d.promise.state === "satisfied" && d.promise.resolved_by === "reviewer", "shown satisfied", d);
d = await ok(author, "tally_promise_read/list", { state: "all", to: "author" });
check(d.promises.some((p) => p.id === id), "listed", d);

// An expectation due in 30 minutes (a duration, as until takes one), its
// lapses to go to an agent's push endpoint (replyTo, an object).
const x = await ok(reviewer, "tally_expect/raise", {
  expectationId: "exp-" + mode, kind: "delivery", subject: { type: "shipment", id: "S-" + mode }, satisfiedBy: { factKey: "shipped" }, dueAt: "30m", basis: "declared",
  replyTo: { url: "https://agent.example.org/a2a", push: { url: "https://agent.example.org/hook", token: "t", authentication: { scheme: "Bearer", credentials: "c" } } },
});
check(x.expectation.expectationId === "exp-" + mode && Date.parse(x.expectation.currentDue) > Date.now(), "raised, due 30m from now", x);
await refused(reviewer, "tally_expect/raise", { kind: "delivery", subject: { type: "shipment", id: "S-" + mode }, satisfiedBy: { factKey: "shipped" }, dueAt: "30m", basis: "guessed" }, "invalid", "basis");

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
    await ok(parser, "tally_claim/artifact.publish", { claim, artifact, slot: "change", generation: 1, kind: "patch", schema: "text/x-diff", content_base64: b64(patch) });
    await ok(parser, "tally_claim/testament.close", { claim, testament, generation: 1, outcome: "complete", summary: "length check before decoding", confidence: 0.9, bindings: [{ slot: "change", artifact }] });
    await ok(parser, "tally_claim/testament.post", { claim, testament });
    await ok(maintainer, "tally_claim/testament.receive", { claim, testament });
  };
  const verdict = async (claim, check, artifact, result, evidence) => {
    await ok(maintainer, "tally_claim/check.begin", { claim, check, artifact });
    return ok(maintainer, "tally_claim/check.report", { claim, check, artifact, result, evidence: claim + "-" + check + "-log", evidence_base64: b64(evidence) });
  };
  let c = await ok(maintainer, "tally_claim/create", c17);
  check(c.claim.state === "Generated", "C17 generated", c);
  await ok(maintainer, "tally_claim/post", { claim: C("C17") });
  await ok(parser, "tally_claim/receipt.acquire", { claim: C("C17") });
  await deliver(C("C17"), "T1", "patch-a", "+\tif len(s) < 6 { return errIncomplete }\n");
  // The evaluator reads the patch it reviews: its bytes as text, after its digest.
  const art = await maintainer.callTool(callOf("tally_claim_read/artifact", { claim: C("C17"), artifact: "patch-a" }));
  const head = JSON.parse(art.content[0].text);
  check(!art.isError && head.encoding === "utf-8" && head.digest.length > 0 && !head.truncated && art.content[1].text === "+\tif len(s) < 6 { return errIncomplete }\n", "the patch reads back, with its digest", art);
  // A verdict by a non-evaluator: a tool error naming the rule, nothing recorded.
  await refused(parser, "tally_claim/check.report", { claim: C("C17"), check: "review", artifact: "patch-a", result: "pass", evidence: "forged", evidence_base64: b64("fine") }, "forbidden", "evaluator");
  await refused(stranger, "tally_claim/cancel", { claim: C("C17"), reason: "mine now" }, "forbidden", "");
  await verdict(C("C17"), "behavior", "patch-a", "pass", "go test ./parser: ok\n");
  c = await verdict(C("C17"), "review", "patch-a", "fail", "patch A: unchecked read after the escape\n");
  check(c.claim.state === "ValidationFailed", "C17 failed its review", c.claim.state);
  c = await ok(stranger, "tally_claim_read/show", { claim: C("C17") });
  check(c.claim.why !== undefined && c.claim.why !== null, "C17 says why it is not satisfied", c.claim);
  await ok(maintainer, "tally_claim/create", { claim: C("C18"), respondent: "parser", work: "reject incomplete Unicode escapes (bounds checked)", predecessor: C("C17") });
  await ok(maintainer, "tally_claim/post", { claim: C("C18") });
  await ok(parser, "tally_claim/receipt.acquire", { claim: C("C18") });
  await deliver(C("C18"), "T2", "patch-b", "+\tif len(s) < i+6 { return errIncomplete }\n");
  await verdict(C("C18"), "behavior", "patch-b", "pass", "go test ./parser: ok\n");
  c = await verdict(C("C18"), "review", "patch-b", "pass", "patch B: bounds checked before every read\n");
  check(c.claim.state === "Satisfied", "C18 satisfied", c.claim.state);
  await maintainer.close();
  await parser.close();
}

// The ledger: verified whole, exported as text.
const verified = await ok(author, "tally_ledger/verify", {});
check(verified.whole === true && verified.lines > 0, "the log verifies whole", verified);
const exported = await author.callTool(callOf("tally_ledger/export", { format: "jsonl" }));
check(!exported.isError && exported.content[0].text.includes('"id":"' + id + '"'), "the log exports as text", exported);

// The resource and the prompt.
const owed = await reviewer.readResource({ uri: "tally://owed/reviewer" });
check(JSON.parse(owed.contents[0].text).schema_version === 1, "tally://owed/reviewer reads a document");
const prompt = await reviewer.getPrompt({ name: "resume_seat", arguments: {} });
check(prompt.messages[0].content.text.startsWith("# tally prime: reviewer, as of "), "resume_seat prompt", prompt);

// A foreign tenant's token sees nothing of this tenant.
if (mode !== "stdio") {
  const foreign = await connect("foreign", "globex/default");
  await refused(foreign, "tally_promise_read/show", { id, session: "default/default" }, "not_found", "session");
  await refused(foreign, "tally_promise/amend", { id, until: "9h", session: "default/default" }, "not_found", "session");
  const own = await foreign.callTool(callOf("tally_promise_read/show", { id }));
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
