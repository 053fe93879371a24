// Drives the Hub console's settings page in Debian's headless Chromium (as console.mjs does): the
// school admin reads the approval rules, adds one and saves, and finds it again after a reload;
// then a class teacher opens the page and is refused. Run by tests/it/console.rs.
//
// Usage: node settings.mjs <gatewayBaseUrl>
// Prints one line of JSON on stdout — {adminReadStatus, rulesBefore, saveStatus, saved,
// rulesAfterReload, settingsAfterBack, teacherStatus, teacherSees, teacherForms, pageErrors}, the
// rules as the page shows them ([{role, tool, mode, shown}]) — and exits 1 with the failed step on
// stderr otherwise.

import { gatewayArgument, openPage } from './page.mjs';

const base = gatewayArgument('settings.mjs');
const { browser, page } = await openPage();

let step = 'start';
const seen = { pageErrors: [] };
// The page runs under the gateway's CSP: a refused script or style would show here.
page.on('pageerror', (error) => seen.pageErrors.push(String(error)));

/** The answer to the page's next `method /api/approval-policy`. */
const policyResponse = (method) =>
  page.waitForResponse(
    (response) => new URL(response.url()).pathname === '/api/approval-policy' && response.request().method() === method,
  );
/** Signs in as the demo user `email`, as console.mjs does. */
const signIn = async (email) => {
  await page.getByText('Sign in as a demo user').waitFor();
  await page.getByText(email, { exact: true }).click();
  await page.getByTestId('sign-in').click();
  await page.getByTestId('composer').waitFor();
};
/** Opens the settings page from the header; answers the status of the rules' read. */
const openSettings = async () => {
  const read = policyResponse('GET');
  await page.getByTestId('open-settings').click();
  await page.getByTestId('settings').waitFor();
  return (await read).status();
};
/** The rules the form shows: each select's value, and what the row reads as. */
const rules = () =>
  page.getByTestId('rule').evaluateAll((rows) =>
    rows.map((row) => {
      const select = (name) => row.querySelector(`[data-testid="rule-${name}"]`);
      return {
        role: select('role').value,
        tool: select('tool').value,
        mode: select('mode').value,
        shown: ['role', 'tool', 'mode'].map((name) => select(name).selectedOptions[0]?.text).join(' · '),
      };
    }),
  );

try {
  step = 'sign in as the school admin and open Settings';
  await page.goto(`${base}/`);
  await signIn('admin@hill.school');
  seen.adminReadStatus = await openSettings();
  await page.getByTestId('approval-rules').waitFor();
  seen.rulesBefore = await rules();

  step = 'add a rule (teachers: any write runs without approval) and save';
  await page.getByTestId('add-rule').click();
  const added = page.getByTestId('rule').last();
  await added.getByTestId('rule-role').selectOption('teacher');
  await added.getByTestId('rule-tool').selectOption('*');
  await added.getByTestId('rule-mode').selectOption('never');
  const put = policyResponse('PUT');
  await page.getByTestId('save-rules').click();
  seen.saveStatus = (await put).status();
  seen.saved = await page.getByTestId('saved').innerText();

  step = 'reload, open Settings again: the rule is there';
  await page.reload();
  await page.getByTestId('composer').waitFor();
  await openSettings();
  await page.getByTestId('approval-rules').waitFor();
  seen.rulesAfterReload = await rules();

  step = 'back to the chat';
  await page.getByTestId('settings-back').click();
  await page.getByTestId('composer').waitFor({ state: 'visible' });
  seen.settingsAfterBack = await page.getByTestId('settings').count();

  step = 'sign in as a class teacher and open Settings: refused, no form';
  await page.getByRole('button', { name: 'Sign out' }).click();
  await signIn('amina@hill.school');
  seen.teacherStatus = await openSettings();
  seen.teacherSees = await page.getByTestId('settings-error').innerText();
  seen.teacherForms = await page.getByTestId('approval-rules').count();
  process.stdout.write(`${JSON.stringify(seen)}\n`);
} catch (error) {
  console.error(`step "${step}" failed: ${error.stack ?? error}`);
  console.error(`page text:\n${await page.locator('body').innerText().catch(() => '?')}`);
  console.error(`seen: ${JSON.stringify(seen)}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
