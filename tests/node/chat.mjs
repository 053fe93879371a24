// Drives Rover's gateway with the real `ai` client, as a Hub's `useChat` would: `AbstractChat` with
// the default transport, one `sendMessage`, then the chat's final state as one line of JSON.
//
// Usage: node chat.mjs <gatewayBaseUrl> <token> <chatId> <message>
// Prints {status, error, finishReason, messages, dataParts} on stdout; exits 1 if the chat ended in
// the `error` status (the client's error is also printed on stderr).

import { DefaultChatTransport } from 'ai';

import { Chat } from './headless-chat.mjs';

const [base, token, chatId, text] = process.argv.slice(2);
if (!base || !token || !chatId || !text) {
  console.error('usage: node chat.mjs <gatewayBaseUrl> <token> <chatId> <message>');
  process.exit(2);
}

const dataParts = [];
let finishReason;
const chat = new Chat({
  id: chatId,
  transport: new DefaultChatTransport({
    api: `${base.replace(/\/$/, '')}/api/chat`,
    headers: { Authorization: `Bearer ${token}` },
  }),
  onData: (part) => dataParts.push(part),
  onFinish: (options) => {
    finishReason = options.finishReason;
  },
});

await chat.sendMessage({ text });

// The client's error, short enough to read in a test failure: a schema rejection's message lists
// every chunk type the value failed to match, so it is cut, and the rejected chunk is given whole.
const error = chat.error
  ? {
      name: chat.error.name,
      message: chat.error.message.slice(0, 1500),
      chunk: chat.error.value ?? (chat.error.chunkType ? { type: chat.error.chunkType, id: chat.error.chunkId } : null),
    }
  : null;
process.stdout.write(
  `${JSON.stringify({ status: chat.status, error, finishReason, messages: chat.messages, dataParts })}\n`,
);
if (chat.status !== 'ready') {
  console.error(`the ai client ended in status ${chat.status}: ${error ? `${error.name}: ${error.message}` : 'no error'}`);
  if (error?.chunk) console.error(`rejected chunk: ${JSON.stringify(error.chunk)}`);
  process.exitCode = 1;
}
