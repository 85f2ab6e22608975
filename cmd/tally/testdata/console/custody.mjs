// The custody of a claim's artifacts in the console's claim view, on a
// cluster node: in a real browser. Environment: BASE (a cluster node
// served with --insecure-dev), VIEW (the claim view's hash route),
// ARTIFACT, WANT (what its custody cell must say, in time), OUT (where the
// screenshot goes). Prints "screenshot PATH" and, at the end, "ok"; exits
// non-zero on the first failed check.
import { onPage } from './page.mjs';

const env = process.env;
await onPage('/' + env.VIEW, 'claim-custody.png', async (page) => {
  const cell = page.locator(`[data-custody="${env.ARTIFACT}"]`);
  await cell.waitFor({ timeout: 20000 });
  const header = await page.locator('section[aria-labelledby="h-art"] thead').textContent();
  if (!header.includes('Custody')) throw new Error('the artifacts table has no custody column: ' + header);
  const deadline = Date.now() + 20000;
  for (;;) {
    const got = (await cell.textContent()).trim();
    if (got.includes(env.WANT)) break;
    if (Date.now() > deadline) throw new Error('custody shown: ' + got + '; want ' + env.WANT);
    await page.reload();
    await cell.waitFor({ timeout: 20000 });
  }
});
