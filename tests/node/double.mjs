// Double-texting with the real `ai` client: two chats on the same chat id (two tabs of the Hub);
// the second sends its message while the first's reply is still streaming.
//
// Usage: node double.mjs <gatewayBaseUrl> <token> <chatId> <first message> <second message>
// Prints {first, second} on stdout, each {status, error, finishes, streams, messages}
// (`streams`: each response's chunk types and whether `[DONE]` came, as the client read them).
// Either chat may end in the `error` status (a refused second message is one): the test decides.

import { DefaultChatTransport } from 'ai';

import { Chat } from './headless-chat.mjs';

const [base, token, chatId, firstText, secondText] = process.argv.slice(2);
if (!base || !token || !chatId || !firstText || !secondText) {
  console.error('usage: node double.mjs <gatewayBaseUrl> <token> <chatId> <first message> <second message>');
  process.exit(2);
}
const root = base.replace(/\/$/, '');
const headers = { Authorization: `Bearer ${token}` };

/** A chat on `chatId` whose responses are watched; `onChange` as the headless chat's. */
const tab = (onChange) => {
  const seen = { finishes: [], streams: [] };
  const watching = async (url, init) => {
    const response = await fetch(url, init);
    if (!response.body) return response;
    const [mine, theirs] = response.body.tee();
    const stream = { status: response.status, chunks: [], done: false };
    seen.streams.push(stream);
    stream.read = new Response(mine).text().then((body) => {
      for (const line of body.split('\n')) {
        const data = line.startsWith('data: ') ? line.slice(6) : null;
        if (data === '[DONE]') stream.done = true;
        else if (data) {
          try {
            stream.chunks.push(JSON.parse(data).type);
          } catch {
            stream.chunks.push('(not json)');
          }
        }
      }
    }, () => {});
    return new Response(theirs, response);
  };
  seen.chat = new Chat({
    id: chatId,
    transport: new DefaultChatTransport({ api: `${root}/api/chat`, headers, fetch: watching }),
    onFinish: ({ isAbort, finishReason }) => seen.finishes.push({ isAbort, finishReason: finishReason ?? null }),
    onError: () => {},
    onChange,
  });
  return seen;
};

let second;
let sending;
const first = tab((messages) => {
  const last = messages.at(-1);
  const speaking = last?.role === 'assistant' && last.parts.some((p) => p.type === 'text' && p.text.length > 0);
  if (sending || !speaking) return;
  sending = Promise.resolve().then(() => second.chat.sendMessage({ text: secondText }));
});
second = tab();

await first.chat.sendMessage({ text: firstText });
await sending;

const report = async (seen) => {
  await Promise.all(seen.streams.map((s) => s.read));
  const { chat } = seen;
  return {
    status: chat.status,
    error: chat.error ? { name: chat.error.name, message: chat.error.message.slice(0, 1500) } : null,
    finishes: seen.finishes,
    streams: seen.streams.map(({ status, chunks, done }) => ({ status, chunks, done })),
    messages: chat.messages,
  };
};
process.stdout.write(`${JSON.stringify({ first: await report(first), second: await report(second) })}\n`);
