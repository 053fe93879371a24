// Drives the Hub console's approval card in Debian's headless Chromium (as console.mjs does): the
// school admin asks for a write, edits it on the card's form (built from the tool's schema) and
// approves; then edits another in the raw-JSON fallback; then reopens the chat from the server.
// Run by tests/it/console.rs.
//
// Usage: node edit.mjs <gatewayBaseUrl>
// Prints one line of JSON on stdout — {formFields, editedReply, editedNote, rawReply,
// reopenedNotes, pageErrors} — and exits 1 with the failed step on stderr otherwise.

import { gatewayArgument, openPage } from './page.mjs';

const base = gatewayArgument('edit.mjs');
const { browser, page } = await openPage();

let step = 'start';
const seen = { pageErrors: [] };
// The page runs under the gateway's CSP: a refused script or style would show here.
page.on('pageerror', (error) => seen.pageErrors.push(String(error)));

const lastAssistant = () => page.getByTestId('assistant-message').last();
/** Sends `text` and opens the edit form of the approval card it raises. */
const askAndEdit = async (text) => {
  await page.getByTestId('composer').fill(text);
  await page.getByTestId('send').click();
  const card = lastAssistant().getByTestId('approval');
  await card.waitFor();
  await card.getByTestId('edit').click();
  await card.getByTestId('approval-edit').waitFor();
  return card;
};
/** Waits until the last reply contains `text` and the turn is over; answers the reply. */
const reply = async (text) => {
  const found = lastAssistant().getByTestId('reply').filter({ hasText: text });
  await found.waitFor();
  await page.getByTestId('send').waitFor();
  return found.innerText();
};

try {
  step = 'sign in as the school admin';
  await page.goto(`${base}/`);
  await page.getByText('Sign in as a demo user').waitFor();
  await page.getByText('admin@hill.school', { exact: true }).click();
  await page.getByTestId('sign-in').click();
  await page.getByTestId('composer').waitFor();
  const chatId = new URL(page.url()).searchParams.get('chat');

  step = 'edit a proposed write on the form, and approve it';
  const card = await askAndEdit('Create a department called Sciences');
  seen.formFields = await card
    .locator('[data-testid^="edit-"]')
    .evaluateAll((fields) => fields.map((f) => ({ field: f.dataset.testid, value: f.type === 'checkbox' ? f.checked : f.value })));
  await card.getByTestId('edit-name').fill('Natural Sciences');
  await card.getByTestId('approve-edited').click();
  seen.editedReply = await reply('Natural Sciences');
  seen.editedNote = await lastAssistant().getByTestId('approval-edited').innerText();

  step = 'edit another as raw JSON, and approve it';
  const raw = await askAndEdit('Create a department called Arts');
  await raw.getByTestId('edit-raw').check();
  await raw.getByTestId('edit-json').fill('{"name": "Fine Arts"}');
  await raw.getByTestId('approve-edited').click();
  seen.rawReply = await reply('Fine Arts');

  step = 'reopen the chat from the server: both show the edits they ran with';
  await page.goto(`${base}/?chat=${encodeURIComponent(chatId)}`);
  await page.getByTestId('approval-edited').nth(1).waitFor();
  seen.reopenedNotes = await page.getByTestId('approval-edited').allInnerTexts();
  process.stdout.write(`${JSON.stringify(seen)}\n`);
} catch (error) {
  console.error(`step "${step}" failed: ${error.stack ?? error}`);
  console.error(`page text:\n${await page.locator('body').innerText().catch(() => '?')}`);
  console.error(`seen: ${JSON.stringify(seen)}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
