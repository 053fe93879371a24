// An `ask_user` round trip with the real `ai` client: `sendMessage`, then `addToolOutput` on the
// question (the answer is the call's output), sent by the client's own `sendAutomaticallyWhen`,
// as the console does.
//
// Usage: node ask.mjs <gatewayBaseUrl> <token> <chatId> <message> <answer>
// Prints {status, error, finishReasons, asked, messages} on stdout; exits 1 if the chat ended in
// the `error` status or nothing was asked.

import { DefaultChatTransport, getToolName, isToolUIPart } from 'ai';

import { Chat } from './headless-chat.mjs';

const [base, token, chatId, text, answer] = process.argv.slice(2);
if (!base || !token || !chatId || !text || !answer) {
  console.error('usage: node ask.mjs <gatewayBaseUrl> <token> <chatId> <message> <answer>');
  process.exit(2);
}

const isQuestion = (part) => isToolUIPart(part) && getToolName(part) === 'ask_user';
const finishReasons = [];
let finished;
let nextFinish = new Promise((resolve) => (finished = resolve));
const chat = new Chat({
  id: chatId,
  transport: new DefaultChatTransport({
    api: `${base.replace(/\/$/, '')}/api/chat`,
    headers: { Authorization: `Bearer ${token}` },
  }),
  // The console's rule: the last message's last step has an answered question.
  sendAutomaticallyWhen: ({ messages }) => {
    const last = messages.at(-1);
    if (last?.role !== 'assistant') return false;
    const start = last.parts.findLastIndex((p) => p.type === 'step-start');
    return last.parts.slice(start + 1).some((p) => isQuestion(p) && p.state === 'output-available');
  },
  onFinish: (options) => {
    finishReasons.push(options.finishReason);
    finished();
  },
  onError: () => finished(),
});

await chat.sendMessage({ text });
await nextFinish;
const asked = (chat.messages.at(-1)?.parts ?? []).filter((p) => isQuestion(p) && p.state === 'input-available');
if (asked.length > 0) {
  nextFinish = new Promise((resolve) => (finished = resolve));
  await chat.addToolOutput({ tool: 'ask_user', toolCallId: asked[0].toolCallId, output: answer });
  await nextFinish;
  while (chat.status === 'streaming' || chat.status === 'submitted') {
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

const error = chat.error ? { name: chat.error.name, message: chat.error.message.slice(0, 1500) } : null;
process.stdout.write(
  `${JSON.stringify({ status: chat.status, error, finishReasons, asked: asked.length, messages: chat.messages })}\n`,
);
if (chat.status !== 'ready' || asked.length === 0) {
  console.error(`the ai client ended in status ${chat.status} with ${asked.length} question(s)`);
  process.exitCode = 1;
}
