// A conversation with the real `ai` client: the chat reopened from Rover's history
// (`GET /api/chats/{id}`, handed to the chat as `messages`, as `useChat({ id, messages })` is),
// then each message sent in turn, each reply awaited.
//
// Usage: node converse.mjs <gatewayBaseUrl> <token> <chatId> <message>...
// Prints {status, error, finishReasons, reopened, messages} on stdout; exits 1 if the chat ended in
// the `error` status.

import { DefaultChatTransport } from 'ai';

import { Chat } from './headless-chat.mjs';

const [base, token, chatId, ...texts] = process.argv.slice(2);
if (!base || !token || !chatId || texts.length === 0) {
  console.error('usage: node converse.mjs <gatewayBaseUrl> <token> <chatId> <message>...');
  process.exit(2);
}
const root = base.replace(/\/$/, '');
const history = await fetch(`${root}/api/chats/${encodeURIComponent(chatId)}`, {
  headers: { Authorization: `Bearer ${token}` },
});
const messages = history.ok ? (await history.json()).messages : [];

const finishReasons = [];
const chat = new Chat({
  id: chatId,
  messages,
  transport: new DefaultChatTransport({
    api: `${root}/api/chat`,
    headers: { Authorization: `Bearer ${token}` },
  }),
  onFinish: (options) => finishReasons.push(options.finishReason),
});
for (const text of texts) {
  await chat.sendMessage({ text });
  if (chat.status !== 'ready') break;
}

const error = chat.error ? { name: chat.error.name, message: chat.error.message.slice(0, 1500) } : null;
process.stdout.write(
  `${JSON.stringify({ status: chat.status, error, finishReasons, reopened: messages.length, messages: chat.messages })}\n`,
);
if (chat.status !== 'ready') {
  console.error(`the ai client ended in status ${chat.status}: ${error ? `${error.name}: ${error.message}` : 'no error'}`);
  process.exitCode = 1;
}
