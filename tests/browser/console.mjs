// Drives the Hub console (served by the gateway at /) in Debian's headless Chromium through
// playwright-core — no browser is downloaded. Run by tests/it/console.rs against a whole stack
// whose scripted model streams slowly enough to reload mid-reply.
//
// Usage: node console.mjs <gatewayBaseUrl> <screenshotPath>
// Each step waits for what the page shows (no sleeps). Prints one line of JSON (what it saw) on
// stdout; on a failed step exits 1 with the step, the error and the page's text on stderr, and a
// screenshot beside <screenshotPath> (…-failure.png).

import { chromium } from 'playwright-core';

const [base, screenshot] = process.argv.slice(2);
if (!base || !screenshot) {
  console.error('usage: node console.mjs <gatewayBaseUrl> <screenshotPath>');
  process.exit(2);
}
const executablePath = process.env.ROVER_CHROMIUM ?? '/usr/bin/chromium';
const STEP_TIMEOUT = 30_000;

const browser = await chromium.launch({
  executablePath,
  headless: true,
  args: [
    '--no-sandbox',
    '--disable-gpu',
    '--disable-quic',
    '--no-first-run',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
  ],
});
// A fresh context is a fresh profile (its own storage): nothing is left from another run.
const context = await browser.newContext({ viewport: { width: 1000, height: 900 } });
const page = await context.newPage();
page.setDefaultTimeout(STEP_TIMEOUT);

const seen = { requests: [], pageErrors: [], steps: [] };
page.on('pageerror', (error) => seen.pageErrors.push(String(error)));
page.on('response', (response) => {
  const url = new URL(response.url());
  if (url.pathname.startsWith('/api/')) {
    seen.requests.push({ method: response.request().method(), path: url.pathname, status: response.status() });
  }
});

let step = 'start';
const begin = (name) => {
  step = name;
  seen.steps.push(name);
};
const assistant = () => page.getByTestId('assistant-message');
const lastAssistant = () => assistant().last();
/** Sends `text` from the composer. */
const say = async (text) => {
  await page.getByTestId('composer').fill(text);
  await page.getByTestId('send').click();
};
/** Waits until the last assistant message's reply contains `text`, and the turn is over. */
const replyContains = async (text) => {
  await lastAssistant().getByTestId('reply').filter({ hasText: text }).waitFor();
  await page.getByTestId('send').waitFor();
};

try {
  begin('open the console and sign in as a demo user');
  await page.goto(`${base}/`);
  await page.getByText('Sign in as a demo user').waitFor();
  await page.getByText('admin@hill.school', { exact: true }).click();
  await page.getByTestId('sign-in').click();
  await page.getByTestId('composer').waitFor();
  seen.who = await page.getByTestId('who').innerText();
  seen.chatId = new URL(page.url()).searchParams.get('chat');

  begin('a write waits on a card showing its label and exact input, then runs once approved');
  await say('Create a department called Sciences');
  const card = lastAssistant().getByTestId('approval');
  await card.waitFor();
  seen.approvalCard = await card.innerText();
  seen.approvalInput = await card.getByTestId('approval-input').innerText();
  await card.getByTestId('approve').click();

  begin('a tool call is a timeline row with its label, then the reply');
  await replyContains('I created the Sciences department');
  seen.createRows = await lastAssistant().getByTestId('activity').allInnerTexts();
  seen.createReply = await lastAssistant().getByTestId('reply').innerText();

  begin('a failed tool call has no row');
  await say('Check the date and ask me which day I mean');
  await replyContains('could not ask you yet');
  seen.failedRows = await lastAssistant()
    .getByTestId('activity')
    .evaluateAll((rows) => rows.map((row) => ({ tool: row.dataset.tool, state: row.dataset.state, text: row.innerText })));

  begin('ask_user is answered inline');
  await say('Please sort out the thing from yesterday');
  const question = lastAssistant().getByTestId('question');
  await question.getByText("I'm not sure what you'd like me to do").waitFor();
  await page.getByTestId('send').waitFor();
  seen.question = await question.innerText();
  await question.getByTestId('answer-input').fill('The attendance for S1 Blue');
  await question.getByTestId('answer-send').click();
  await replyContains('Thanks.');
  seen.answered = await lastAssistant().getByTestId('answer').innerText();
  seen.answerReply = await lastAssistant().getByTestId('reply').last().innerText();

  begin('a reload mid-reply resumes the stream');
  const full = 'students';
  const earlier = await assistant().count();
  await say('How many students do we have?');
  // The reply has begun streaming (the model sends a chunk at a time) but is not finished.
  const streaming = assistant().nth(earlier).getByTestId('reply');
  await streaming.waitFor();
  seen.beforeReload = await streaming.innerText();
  seen.stoppable = await page.getByTestId('stop').isVisible();
  const resumed = page.waitForResponse(
    (response) => response.url().endsWith(`/api/chat/${seen.chatId}/stream`) && response.request().method() === 'GET',
  );
  await page.reload();
  seen.resumeStatus = (await resumed).status();
  await replyContains(full);
  seen.afterReload = await lastAssistant().getByTestId('reply').innerText();
  seen.historyAfterReload = await page.getByTestId('user-message').allInnerTexts();
  seen.rowsAfterReload = await page.getByTestId('activity').allInnerTexts();

  begin('screenshot');
  seen.questionsShown = await page.getByTestId('question').count();
  await page.screenshot({ path: screenshot, fullPage: true });
  seen.url = page.url();

  begin('stop ends the reply on the page, in a new chat');
  await page.getByRole('button', { name: 'New chat' }).click();
  await page.getByText('Ask Rover about the school').waitFor();
  seen.secondChatId = new URL(page.url()).searchParams.get('chat');
  await say('List the departments');
  const stopped = page.waitForResponse(
    (response) => response.url().endsWith(`/api/chat/${seen.secondChatId}/stop`) && response.request().method() === 'POST',
  );
  await page.getByTestId('stop').click();
  seen.stopStatus = (await stopped).status();
  await page.getByTestId('composer').fill('one more thing');
  await page.getByTestId('send').waitFor();

  begin('signing out forgets everything the console stored');
  seen.storedBeforeSignOut = await page.evaluate(() => Object.keys(localStorage).filter((k) => k.startsWith('rover.')).length);
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByText('Sign in as a demo user').waitFor();
  seen.storedAfterSignOut = await page.evaluate(() =>
    [...Object.keys(localStorage), ...Object.keys(sessionStorage)].filter((k) => k.startsWith('rover.')),
  );
  process.stdout.write(`${JSON.stringify(seen)}\n`);
} catch (error) {
  console.error(`step "${step}" failed: ${error.stack ?? error}`);
  console.error(`page text:\n${await page.locator('body').innerText().catch(() => '?')}`);
  console.error(`seen: ${JSON.stringify(seen)}`);
  await page.screenshot({ path: screenshot.replace(/\.png$/, '-failure.png'), fullPage: true }).catch(() => {});
  process.exitCode = 1;
} finally {
  await browser.close();
}
