// What the console's browser scripts share: Debian's headless Chromium (ROVER_CHROMIUM, never a
// downloaded browser) and one page of the size the screenshots are taken at.

import { chromium } from 'playwright-core';

/** `script`'s gateway URL, its first argument; exits 2 with the usage when it is missing. */
export function gatewayArgument(script) {
  const [base] = process.argv.slice(2);
  if (!base) {
    console.error(`usage: node ${script} <gatewayBaseUrl>`);
    process.exit(2);
  }
  return base;
}

/** A headless Chromium and a new page in it: `{ browser, page }`. */
export async function openPage() {
  const browser = await chromium.launch({
    executablePath: process.env.ROVER_CHROMIUM ?? '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-sync'],
  });
  const page = await (await browser.newContext({ viewport: { width: 1100, height: 900 } })).newPage();
  page.setDefaultTimeout(30_000);
  return { browser, page };
}
