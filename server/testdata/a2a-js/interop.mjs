// An independent A2A v1.0 client (@a2a-js/sdk) against a tally session:
// fetch the card, send a promise under pinki's extension URI with the
// extension activated, read the task back with GetTask, and check the echoed
// A2A-Extensions header, the record in the task's metadata and the mapped
// state; then the same for a claim under tally's claim URI. Run by
// server/a2a_interop_test.go; env: A2A_BASE (the session's …/a2a URL) and
// TALLY_TOKEN.
import { Role, TaskState } from '@a2a-js/sdk';
import { ClientFactory, DefaultAgentCardResolver, JsonRpcTransportFactory, RestTransportFactory } from '@a2a-js/sdk/client';

// The card path is resolved relative to the base, so the base ends in '/'.
const base = process.env.A2A_BASE.replace(/\/?$/, '/');
const token = process.env.TALLY_TOKEN;
const PINKI = 'https://github.com/azigler/pinki/ext/promise/v0';
const KEY = PINKI + '/promise';
const CLAIM = 'urn:tally:ext:claim';

function check(cond, what, got) {
  if (!cond) {
    console.error('FAIL: ' + what + (got === undefined ? '' : ': ' + JSON.stringify(got)));
    process.exit(1);
  }
  console.log('ok: ' + what);
}

// Every call carries the bearer token and activates one extension (pinki's,
// then tally's claim URI); the last response's A2A-Extensions header is kept
// to check the echo.
let echoed = [];
let active = PINKI;
const fetchImpl = async (input, init = {}) => {
  const headers = new Headers(init.headers || {});
  headers.set('Authorization', 'Bearer ' + token);
  headers.set('A2A-Extensions', active);
  const resp = await fetch(input, { ...init, headers });
  echoed.push(resp.headers.get('A2A-Extensions'));
  return resp;
};

const card = await new DefaultAgentCardResolver({ fetchImpl }).resolve(base);
const uris = (card.capabilities?.extensions || []).map((e) => e.uri);
check(uris.includes('urn:tally:ext:promise'), 'card declares the promise extension', uris);
check((card.supportedInterfaces || []).some((i) => i.protocolVersion === '1.0'), 'card has a 1.0 interface', card.supportedInterfaces);

// One client per transport, each used for a promise and then a claim.
const clients = [];
for (const [name, transport] of [['JSONRPC', new JsonRpcTransportFactory({ fetchImpl })], ['HTTP+JSON', new RestTransportFactory({ fetchImpl })]]) {
  const factory = new ClientFactory({ transports: [transport], cardResolver: new DefaultAgentCardResolver({ fetchImpl }) });
  clients.push([name, await factory.createFromUrl(base)]);
}

// send sends one record under key with the active extension, checks that
// the answer is the task id and that A2A-Extensions was echoed, and reads
// the task back with GetTask (checking the echo again).
async function send(name, client, id, key, record, what) {
  echoed = [];
  const sent = await client.sendMessage({
    message: {
      messageId: 'msg-' + id,
      role: Role.ROLE_USER,
      parts: [{ content: { $case: 'text', value: record.promise || record.work } }],
      metadata: { [key]: record },
    },
  });
  const task = sent.id ? sent : sent.payload?.value ?? sent.task;
  check(task && task.id === id, name + ': SendMessage returns the ' + what + ' task', sent);
  check(echoed.at(-1) === active, name + ': A2A-Extensions echoed', echoed);
  echoed = [];
  const got = await client.getTask({ id });
  check(echoed.at(-1) === active, name + ': GetTask echoes A2A-Extensions', echoed);
  return got;
}

const is = (got, state) => got.status?.state === TaskState[state] || got.status?.state === state;

for (const [name, client] of clients) {
  const id = 'js-' + name.replace(/\W/g, '').toLowerCase();
  const got = await send(name, client, id, KEY, { id, promise: 'hand back a reviewed schema', to: 'author', until: '2026-09-01T17:00:00Z' }, 'promise');
  check(is(got, 'TASK_STATE_WORKING'), name + ': an owed promise is WORKING', got.status);
  const rec = got.metadata?.[KEY];
  check(rec && rec.id === id && rec.by === 'reviewer' && rec.to === 'author' && rec.state === 'owed', name + ': the record rides in metadata under pinki\'s key', got.metadata);
}

// A claim: created with the claim URI activated, read back as a task whose
// id is the claim's, SUBMITTED while generated, its claimant the token's.
active = CLAIM;
check(uris.includes(CLAIM), 'card declares the claim extension', uris);
for (const [name, client] of clients) {
  const id = 'js-claim-' + name.replace(/\W/g, '').toLowerCase();
  const got = await send(name, client, id, CLAIM, { claim: id, respondent: 'parser', work: 'reject incomplete escapes', slots: [] }, 'claim');
  check(is(got, 'TASK_STATE_SUBMITTED'), name + ': a generated claim is SUBMITTED', got.status);
  const rec = got.metadata?.[CLAIM];
  check(rec && rec.claim === id && rec.claimant === 'reviewer' && rec.state === 'Generated', name + ': the claim rides in metadata under the claim URI', got.metadata);
}
console.log('interop ok');
