// Stops a reply with the real `ai` client, then sends the next message: the Hub's Stop button.
//
// Usage: node stop.mjs <gatewayBaseUrl> <token> <chatId> <message> <next message> <server|client>
//   server: only the server is asked (POST /api/chat/{id}/stop) at the first word; the client
//           reads on, and its stream ends with the gateway's `abort`.
//   client: AI SDK 7's pattern for resumable streams: `chat.stop()` (the client stops reading at
//           once), then POST /api/chat/{id}/stop so the turn itself stops.
// Prints {status, error, stopStatus, finishes, streams, messages} on stdout (`streams`: each
// response's chunk types and whether `[DONE]` came, as the client read them); exits 1 if the chat ended in
// the `error` status.

import { DefaultChatTransport } from 'ai';

import { Chat } from './headless-chat.mjs';

const [base, token, chatId, text, next, how] = process.argv.slice(2);
if (!base || !token || !chatId || !text || !next || !['server', 'client'].includes(how)) {
  console.error('usage: node stop.mjs <gatewayBaseUrl> <token> <chatId> <message> <next message> <server|client>');
  process.exit(2);
}
const root = base.replace(/\/$/, '');
const headers = { Authorization: `Bearer ${token}` };

const postStop = async () =>
  (await fetch(`${root}/api/chat/${encodeURIComponent(chatId)}/stop`, { method: 'POST', headers })).status;

// What each response carried, as the client read it: the chunk types, and `[DONE]`.
const streams = [];
const watching = async (url, init) => {
  const response = await fetch(url, init);
  if (!response.body) return response;
  const [mine, theirs] = response.body.tee();
  const seen = { chunks: [], done: false };
  streams.push(seen);
  seen.read = new Response(mine).text().then((body) => {
    for (const line of body.split('\n')) {
      const data = line.startsWith('data: ') ? line.slice(6) : null;
      if (data === '[DONE]') seen.done = true;
      else if (data) seen.chunks.push(JSON.parse(data).type);
    }
  }, () => {});
  return new Response(theirs, response);
};

const finishes = [];
let stopping;
const chat = new Chat({
  id: chatId,
  transport: new DefaultChatTransport({ api: `${root}/api/chat`, headers, fetch: watching }),
  onFinish: ({ isAbort, finishReason }) => finishes.push({ isAbort, finishReason }),
  onChange: (messages) => {
    const last = messages.at(-1);
    const speaking = last?.role === 'assistant' && last.parts.some((p) => p.type === 'text' && p.text.length > 0);
    if (stopping || !speaking) return;
    // Out of the state update the stream is making, as a button's click would be.
    stopping = Promise.resolve().then(() => (how === 'client' ? chat.stop().then(postStop) : postStop()));
  },
});

await chat.sendMessage({ text });
const stopStatus = await stopping;
await chat.sendMessage({ text: next });
await Promise.all(streams.map((seen) => seen.read));

const error = chat.error ? { name: chat.error.name, message: chat.error.message.slice(0, 1500) } : null;
process.stdout.write(`${JSON.stringify({ status: chat.status, error, stopStatus, finishes, streams, messages: chat.messages })}\n`);
if (chat.status !== 'ready') {
  console.error(`the ai client ended in status ${chat.status}: ${error ? `${error.name}: ${error.message}` : 'no error'}`);
  process.exitCode = 1;
}
