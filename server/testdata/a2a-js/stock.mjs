// A stock A2A v1.0 client (@a2a-js/sdk, its defaults: no custom fetch, no
// card resolver of its own) given only the server's root URL: it reads the
// server's card, sends a promise under pinki's extension URI with the
// extension activated, reads the task back, and asks for a task that does
// not exist. With TALLY_TOKEN set the token travels the SDK's own way, as a
// service parameter set by a call interceptor; without it the server runs
// --insecure-dev and the SDK sends nothing tally-specific. Run by
// server/a2a_interop_test.go; env: TALLY_ROOT (the server's URL),
// TALLY_TOKEN (optional), PROMISE_ID.
import { Role, TaskState } from '@a2a-js/sdk';
import { ClientFactory, ClientFactoryOptions, ServiceParameters, withA2AExtensions } from '@a2a-js/sdk/client';
import { TaskNotFoundError } from '@a2a-js/sdk/errors';

const root = process.env.TALLY_ROOT;
const token = process.env.TALLY_TOKEN || '';
const id = process.env.PROMISE_ID;
const PINKI = 'https://github.com/azigler/pinki/ext/promise/v0';
const KEY = PINKI + '/promise';

function check(cond, what, got) {
  if (!cond) {
    console.error('FAIL: ' + what + (got === undefined ? '' : ': ' + JSON.stringify(got)));
    process.exit(1);
  }
  console.log('ok: ' + what);
}

// The token, when there is one, rides as the Authorization service
// parameter, which the transport sends as a header.
const interceptors = token ? [{
  async before(args) {
    args.options = { ...args.options, serviceParameters: { ...args.options?.serviceParameters, Authorization: 'Bearer ' + token } };
  },
  async after() {},
}] : [];
const factory = token
  ? new ClientFactory(ClientFactoryOptions.createFrom(ClientFactoryOptions.default, { clientConfig: { interceptors } }))
  : new ClientFactory();
const client = await factory.createFromUrl(root);
const card = await client.getAgentCard();
const schemes = Object.keys(card.securitySchemes || {});
check(token ? schemes.includes('bearer') : schemes.length === 0, 'the card declares bearer auth exactly when tokens are required', card.securitySchemes);

const withPinki = { serviceParameters: ServiceParameters.create(withA2AExtensions(PINKI)) };
const sent = await client.sendMessage({
  message: {
    messageId: 'msg-' + id,
    role: Role.ROLE_USER,
    parts: [{ content: { $case: 'text', value: 'hand back a reviewed schema' } }],
    metadata: { [KEY]: { id, promise: 'hand back a reviewed schema', by: 'reviewer', to: 'author', until: '2026-09-01T17:00:00Z' } },
  },
}, withPinki);
const task = sent.id ? sent : sent.payload?.value ?? sent.task;
check(task && task.id === id, 'SendMessage returns the promise task', sent);

const got = await client.getTask({ id }, withPinki);
check(got.status?.state === TaskState.TASK_STATE_WORKING || got.status?.state === 'TASK_STATE_WORKING', 'GetTask: an owed promise is WORKING', got.status);
const rec = got.metadata?.[KEY];
check(rec && rec.id === id && rec.by === 'reviewer' && rec.state === 'owed', "GetTask: the record rides under pinki's key", got.metadata);

try {
  await client.getTask({ id: 'no-such-task' });
  check(false, 'GetTask of an unknown id fails');
} catch (e) {
  check(e instanceof TaskNotFoundError, 'GetTask of an unknown id is TaskNotFound', { name: e?.name, message: e?.message });
}
console.log('stock client ok');
