// The start and end every console script shares: chromium launched
// headless, one desktop page on BASE + route that records uncaught errors
// and console errors, the script's checks (check(page)), a full-page
// screenshot OUT/shot (printed as "screenshot PATH"), then "ok" only when
// the page reported no error; the browser is closed whatever happens.
import { chromium } from 'playwright-core';

export async function onPage(route, shot, check) {
  const env = process.env;
  const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--headless', '--no-sandbox', '--disable-gpu'] });
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    const problems = [];
    page.on('pageerror', (e) => problems.push('uncaught: ' + e.message));
    page.on('console', (m) => { if (m.type() === 'error') problems.push('console error: ' + m.text()); });
    await page.goto(env.BASE + route);
    await check(page);
    const file = env.OUT + '/' + shot;
    await page.screenshot({ path: file, fullPage: true });
    console.log('screenshot ' + file);
    if (problems.length) throw new Error(problems.join('\n'));
    console.log('ok');
  } finally {
    await browser.close();
  }
}
