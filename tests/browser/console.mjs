// Drives the Hub console (served by the gateway at /) in Debian's headless Chromium through
// playwright-core — no browser is downloaded. Run by tests/it/console.rs against a whole stack
// whose scripted model streams slowly enough to reload mid-reply and to stop a reply.
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
const context = await browser.newContext({ viewport: { width: 1100, height: 900 } });
const page = await context.newPage();
page.setDefaultTimeout(STEP_TIMEOUT);

const seen = { requests: [], posts: [], pageErrors: [], steps: [] };
page.on('pageerror', (error) => seen.pageErrors.push(String(error)));
page.on('request', (request) => {
  const url = new URL(request.url());
  if (url.pathname === '/api/chat' && request.method() === 'POST') {
    // One POST is one turn: which chat, and whether it carries a message or an answer.
    const body = request.postDataJSON();
    const last = body?.messages?.[body.messages.length - 1];
    seen.posts.push({ chat: body?.id, role: last?.role, sent: body?.messages?.length });
  }
});
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
const sidebar = () => page.getByTestId('sidebar');
const chatItem = (id) => sidebar().locator(`[data-testid="chat-item"][data-chat-id="${id}"]`);
const chatIdInUrl = () => new URL(page.url()).searchParams.get('chat');
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
/** What the thread shows: the staff member's messages, Rover's replies and timeline rows, and the
 * ids of the assistant messages drawn. */
const thread = async () => ({
  users: await page.getByTestId('user-message').allInnerTexts(),
  replies: await page.getByTestId('reply').allInnerTexts(),
  rows: await page.getByTestId('activity').allInnerTexts(),
  answers: await page.getByTestId('answer').allInnerTexts(),
  answeredBy: await page.getByTestId('answered-by').allInnerTexts(),
  messageIds: await assistant().evaluateAll((messages) => messages.map((m) => m.dataset.messageId)),
});
/** The chats the sidebar lists, in order. */
const listed = () =>
  sidebar()
    .getByTestId('chat-item')
    .evaluateAll((items) =>
      items.map((item) => ({
        id: item.dataset.chatId,
        status: item.dataset.status,
        title: item.querySelector('[data-testid="chat-title"]')?.innerText ?? '',
      })),
    );
/** Everything the page keeps in this browser's storage, by key. */
const stored = () =>
  page.evaluate(() => ({
    local: Object.fromEntries(Object.keys(localStorage).map((key) => [key, localStorage.getItem(key)])),
    session: Object.fromEntries(Object.keys(sessionStorage).map((key) => [key, sessionStorage.getItem(key)])),
  }));

try {
  begin('open the console and sign in as a demo user');
  await page.goto(`${base}/`);
  await page.getByText('Sign in as a demo user').waitFor();
  await page.getByText('admin@hill.school', { exact: true }).click();
  await page.getByTestId('sign-in').click();
  await page.getByTestId('composer').waitFor();
  seen.who = await page.getByTestId('who').innerText();
  seen.chatId = chatIdInUrl();
  await sidebar().getByTestId('no-chats').waitFor();

  begin('a write waits on a card showing its label and exact input, then runs once approved');
  await say('Create a department called Sciences');
  const card = lastAssistant().getByTestId('approval');
  await card.waitFor();
  seen.approvalCard = await card.innerText();
  seen.approvalLabel = await card.getByTestId('approval-label').innerText();
  seen.approvalInput = await card.getByTestId('approval-input').innerText();
  await card.getByTestId('approve').click();

  begin('a tool call is a timeline row with its label, then the reply');
  await replyContains('I created the Sciences department');
  seen.createRows = await lastAssistant().getByTestId('activity').allInnerTexts();
  seen.createReply = await lastAssistant().getByTestId('reply').innerText();
  // Under the reply, small: the model that answered (the finish chunk's messageMetadata.model).
  await lastAssistant().getByTestId('answered-by').waitFor();
  seen.createAnsweredBy = await lastAssistant().getByTestId('answered-by').innerText();

  begin('a new chat shows up in the sidebar with the title the server gave it');
  await chatItem(seen.chatId).waitFor();
  seen.firstListed = await listed();

  begin('feedback on a reply: a thumb, an optional comment, sent');
  const rated = lastAssistant();
  seen.ratedMessageId = await rated.getAttribute('data-message-id');
  const feedbackSent = page.waitForResponse(
    (response) => response.url().includes('/feedback') && response.request().method() === 'POST',
  );
  await rated.getByTestId('feedback-up').click();
  await rated.getByTestId('feedback-comment').fill('Quick and right');
  await rated.getByTestId('feedback-send').click();
  const feedbackResponse = await feedbackSent;
  seen.feedbackStatus = feedbackResponse.status();
  seen.feedbackPath = new URL(feedbackResponse.url()).pathname;
  seen.feedbackBody = feedbackResponse.request().postDataJSON();
  await rated.getByTestId('feedback-sent').waitFor();

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

  begin('a reload mid-reply reopens the chat from the server and resumes the stream');
  const full = 'students';
  const earlier = await assistant().count();
  await say('How many students do we have?');
  // The reply has begun streaming (the model sends a chunk at a time) but is not finished.
  const streaming = assistant().nth(earlier).getByTestId('reply');
  await streaming.waitFor();
  seen.beforeReload = await streaming.innerText();
  seen.stoppable = await page.getByTestId('stop').isVisible();
  const reopened = page.waitForResponse(
    (response) => new URL(response.url()).pathname === `/api/chats/${seen.chatId}` && response.request().method() === 'GET',
  );
  const resumed = page.waitForResponse(
    (response) => response.url().endsWith(`/api/chat/${seen.chatId}/stream`) && response.request().method() === 'GET',
  );
  await page.reload();
  const reopenedChat = await (await reopened).json();
  seen.statusOnReload = reopenedChat.status;
  seen.messagesOnReload = reopenedChat.messages?.length;
  seen.resumeStatus = (await resumed).status();
  await replyContains(full);
  seen.afterReload = await lastAssistant().getByTestId('reply').innerText();
  seen.historyAfterReload = await page.getByTestId('user-message').allInnerTexts();
  seen.rowsAfterReload = await page.getByTestId('activity').allInnerTexts();
  seen.questionsShown = await page.getByTestId('question').count();
  seen.firstChat = await thread();

  begin('stop ends the reply on the page, in a new chat; the next message is answered');
  await page.getByRole('button', { name: 'New chat' }).click();
  await page.getByText('Ask Rover about the school').waitFor();
  seen.secondChatId = chatIdInUrl();
  await say('Describe how you work');
  // Stopped while its text streams.
  await lastAssistant().getByTestId('reply').waitFor();
  const stopAnswered = page.waitForResponse(
    (response) => response.url().endsWith(`/api/chat/${seen.secondChatId}/stop`) && response.request().method() === 'POST',
  );
  await page.getByTestId('stop').click();
  await lastAssistant().getByTestId('stopped').waitFor();
  seen.stoppedMark = await lastAssistant().getByTestId('stopped').innerText();
  seen.stoppedReply = await lastAssistant().getByTestId('reply').innerText();
  // Only reported: whether the gateway had ended the reply within its wait is a timing race.
  seen.stopStatus = (await stopAnswered).status();
  await page.getByTestId('composer').fill('How many students do we have?');
  await page.getByRole('button', { name: 'Send', exact: true }).click();
  await replyContains('students');
  seen.afterStop = await lastAssistant().getByTestId('reply').innerText();

  begin('the sidebar lists both chats, newest first; search finds by message text');
  await sidebar().getByTestId('chat-item').nth(1).waitFor();
  await page.waitForFunction(
    (second) => document.querySelector('[data-testid="chat-item"]')?.dataset.chatId === second,
    seen.secondChatId,
  );
  seen.listed = await listed();
  await sidebar().getByTestId('search').fill('Sciences');
  await page.waitForFunction(() => document.querySelectorAll('[data-testid="chat-item"]').length === 1);
  seen.searched = await listed();
  await sidebar().getByTestId('search').fill('');
  await sidebar().getByTestId('chat-item').nth(1).waitFor();

  begin('rename a chat from the sidebar');
  await chatItem(seen.chatId).getByTestId('rename').click();
  await chatItem(seen.chatId).getByTestId('rename-input').fill('Sciences and more');
  await chatItem(seen.chatId).getByTestId('rename-save').click();
  await chatItem(seen.chatId).getByTestId('chat-title').filter({ hasText: 'Sciences and more' }).waitFor();
  seen.renamed = await listed();

  begin('open the first chat from the sidebar: its messages come back from the server');
  const opened = page.waitForResponse(
    (response) => new URL(response.url()).pathname === `/api/chats/${seen.chatId}` && response.request().method() === 'GET',
  );
  await chatItem(seen.chatId).getByTestId('chat-open').click();
  seen.openStatus = (await opened).status();
  await page.getByTestId('user-message').filter({ hasText: 'Check the date and ask me which day I mean' }).waitFor();
  await page.getByTestId('send').waitFor();
  seen.urlChatAfterOpen = chatIdInUrl();
  seen.reopened = await thread();
  // The reply rated earlier shows its rating (the chat's `feedback` from the server).
  seen.ratedOnReopen = await page
    .locator(`[data-message-id="${seen.ratedMessageId}"]`)
    .getByTestId('feedback-sent')
    .count();

  begin('continue it: a write waits on the approval card, approved, answered');
  await say('Create a department called Arts');
  const second = lastAssistant().getByTestId('approval');
  await second.waitFor();
  seen.continuedCard = await second.innerText();
  seen.continuedLabel = await second.getByTestId('approval-label').innerText();
  seen.continuedInput = await second.getByTestId('approval-input').innerText();

  begin('screenshot');
  await page.screenshot({ path: screenshot, fullPage: true });
  seen.url = page.url();

  await second.getByTestId('approve').click();
  await replyContains('I created the Arts department');
  seen.continuedReply = await lastAssistant().getByTestId('reply').innerText();
  seen.continuedRows = await lastAssistant().getByTestId('activity').allInnerTexts();

  begin('delete it from the sidebar: it leaves the list, and the server has it no more');
  await chatItem(seen.chatId).getByTestId('delete').click();
  await chatItem(seen.chatId).getByTestId('delete-confirm').click();
  await chatItem(seen.chatId).waitFor({ state: 'detached' });
  await page.getByText('Ask Rover about the school').waitFor();
  seen.afterDeleteUrlChat = chatIdInUrl();
  seen.afterDelete = await listed();
  // The list as the server gives it now, and the deleted chat asked for by id.
  seen.serverAfterDelete = await page.evaluate(async (id) => {
    const { token } = JSON.parse(localStorage.getItem('rover.console.session'));
    const headers = { Authorization: `Bearer ${token}` };
    const list = await (await fetch('/api/chats', { headers })).json();
    const one = await fetch(`/api/chats/${id}`, { headers });
    return { listed: list.chats.map((chat) => chat.id), status: one.status };
  }, seen.chatId);

  begin('the stopped chat reopened from the server: what was said before the stop stays');
  await chatItem(seen.secondChatId).getByTestId('chat-open').click();
  await page.getByTestId('user-message').filter({ hasText: 'Describe how you work' }).waitFor();
  await page.getByTestId('send').waitFor();
  seen.stoppedChat = await thread();
  // The reply stopped shows it was (its metadata's `stopped`).
  seen.stoppedOnReopen = await page.getByTestId('stopped').count();

  begin('only the session is kept in the browser; signing out forgets it');
  seen.storedBeforeSignOut = await stored();
  await page.getByRole('button', { name: 'Sign out' }).click();
  await page.getByText('Sign in as a demo user').waitFor();
  seen.storedAfterSignOut = await stored();
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
