// The console's cluster view in a real browser: each member's liveness as
// the node asked sees it. Environment: BASE (a cluster node served with
// --insecure-dev), DEAD (a member settled dead), ALIVE (the others, by
// commas), OUT (where the screenshot goes). Prints "screenshot PATH" and,
// at the end, "ok"; exits non-zero on the first failed check.
import { onPage } from './page.mjs';

const env = process.env;
await onPage('/#/cluster', 'cluster-members.png', async (page) => {
  const alive = env.ALIVE.split(',');
  const cell = (id) => page.locator(`[data-liveness="${id}"]`);
  await cell(env.DEAD).waitFor({ timeout: 20000 });
  // The view is redrawn every 2 s: read it until the states are shown.
  const deadline = Date.now() + 20000;
  for (;;) {
    const got = {};
    for (const id of [env.DEAD, ...alive]) got[id] = (await cell(id).textContent()).trim();
    if (got[env.DEAD] === 'dead' && alive.every((id) => got[id] === 'alive')) break;
    if (Date.now() > deadline) throw new Error('member states shown: ' + JSON.stringify(got));
    await page.waitForTimeout(500);
  }
  const header = await page.locator('section[aria-labelledby="h-zones"] thead').textContent();
  if (!['Liveness', 'Incarnation', 'Health'].every((c) => header.includes(c))) throw new Error('the nodes table has no liveness columns: ' + header);
});
