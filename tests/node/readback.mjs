// Reads a chat back from Rover's gateway (`GET /api/chats/{id}`) and checks its messages with the
// real `ai` package's own `validateUIMessages`, as a Hub would before `useChat({ id, messages })`.
//
// Usage: node readback.mjs <gatewayBaseUrl> <token> <chatId>
// Prints {status, chat, valid, error} on stdout; exits 1 if the request failed or the messages do
// not validate.

import { validateUIMessages } from 'ai';

const [base, token, chatId] = process.argv.slice(2);
if (!base || !token || !chatId) {
  console.error('usage: node readback.mjs <gatewayBaseUrl> <token> <chatId>');
  process.exit(2);
}

const response = await fetch(`${base.replace(/\/$/, '')}/api/chats/${encodeURIComponent(chatId)}`, {
  headers: { Authorization: `Bearer ${token}` },
});
const chat = await response.json();
let valid = false;
let error = null;
if (response.ok) {
  try {
    await validateUIMessages({ messages: chat.messages });
    valid = true;
  } catch (e) {
    error = { name: e.name, message: String(e.message).slice(0, 1500) };
  }
}
process.stdout.write(`${JSON.stringify({ status: response.status, chat, valid, error })}\n`);
if (!response.ok || !valid) {
  console.error(`the chat did not read back: ${response.status} ${error ? error.message : JSON.stringify(chat)}`);
  process.exitCode = 1;
}
