// Drives the Hub console in Debian's headless Chromium (as console.mjs does): a class teacher's
// request that Rover hands to its class-teacher specialist, then the page reloaded so the chat is
// reopened from the server. Run by tests/it/console.rs.
//
// Usage: node badge.mjs <gatewayBaseUrl>
// Prints {chatId, live, reopened} on stdout — each a list of the timeline's rows, {tool, state,
// label, agent} (agent: the specialist badge, or null) — and exits 1 with the failed step on
// stderr otherwise.

import { gatewayArgument, openPage } from './page.mjs';

const base = gatewayArgument('badge.mjs');
const { browser, page } = await openPage();

let step = 'start';
const seen = {};
/** The timeline's rows, with the specialist badge each shows. */
const rows = () =>
  page.getByTestId('activity').evaluateAll((all) =>
    all.map((row) => ({
      tool: row.dataset.tool,
      state: row.dataset.state,
      label: row.querySelector('.label')?.innerText ?? null,
      agent: row.querySelector('.agent')?.innerText ?? null,
    })),
  );
const done = (tool) => page.locator(`[data-testid="activity"][data-tool="${tool}"][data-state="output-available"]`);

try {
  step = 'sign in as a class teacher';
  await page.goto(`${base}/`);
  await page.getByText('amina@hill.school', { exact: true }).click();
  await page.getByTestId('sign-in').click();
  await page.getByTestId('composer').waitFor();
  seen.chatId = new URL(page.url()).searchParams.get('chat');

  step = 'the specialist records attendance, live';
  await page.getByTestId('composer').fill('Record attendance for S1 Blue: everyone present except Nakato');
  await page.getByTestId('send').click();
  await done('record_attendance').waitFor();
  await page.getByTestId('assistant-message').last().getByTestId('reply').last().waitFor();
  await page.getByTestId('send').waitFor();
  seen.live = await rows();

  step = 'reload: the chat is reopened from the server';
  const reopened = page.waitForResponse(
    (response) => new URL(response.url()).pathname === `/api/chats/${seen.chatId}` && response.request().method() === 'GET',
  );
  await page.reload();
  seen.readStatus = (await reopened).status();
  await done('record_attendance').waitFor();
  await page.getByTestId('send').waitFor();
  seen.reopened = await rows();
  process.stdout.write(`${JSON.stringify(seen)}\n`);
} catch (error) {
  console.error(`step "${step}" failed: ${error.stack ?? error}`);
  console.error(`page text:\n${await page.locator('body').innerText().catch(() => '?')}`);
  console.error(`seen: ${JSON.stringify(seen)}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
