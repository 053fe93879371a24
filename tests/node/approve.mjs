// Drives an approval round trip with the real `ai` client, as a Hub would: `sendMessage`, then
// `addToolApprovalResponse` on the tool part waiting for approval, and the client's own
// `sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses` sends the answer.
//
// With `edit <json>`, the staff member approves with their own input instead, as a Hub that lets
// them edit a proposed write does: the part's `approval.editedInput` is set on the client's
// message (a field `addToolApprovalResponse` keeps), then the approval is added as above.
//
// Usage: node approve.mjs <gatewayBaseUrl> <token> <chatId> <message> <approve|deny|edit> [<json>]
// Prints {status, error, finishReasons, requested, messages} on stdout; exits 1 if the chat ended
// in the `error` status or nothing asked for approval.

import { DefaultChatTransport, lastAssistantMessageIsCompleteWithApprovalResponses } from 'ai';

import { Chat } from './headless-chat.mjs';

const [base, token, chatId, text, decision, edit] = process.argv.slice(2);
if (
  !base ||
  !token ||
  !chatId ||
  !text ||
  !['approve', 'deny', 'edit'].includes(decision) ||
  (decision === 'edit') !== (edit !== undefined)
) {
  console.error('usage: node approve.mjs <gatewayBaseUrl> <token> <chatId> <message> <approve|deny|edit> [<json>]');
  process.exit(2);
}
const editedInput = edit === undefined ? undefined : JSON.parse(edit);

const finishReasons = [];
let finished;
let nextFinish = new Promise((resolve) => (finished = resolve));
const chat = new Chat({
  id: chatId,
  transport: new DefaultChatTransport({
    api: `${base.replace(/\/$/, '')}/api/chat`,
    headers: { Authorization: `Bearer ${token}` },
  }),
  sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
  onFinish: (options) => {
    finishReasons.push(options.finishReason);
    finished();
  },
  onError: () => finished(),
});

await chat.sendMessage({ text });
await nextFinish;
const last = chat.messages.at(-1);
const waiting = (last?.parts ?? []).filter((p) => p.state === 'approval-requested');
const requested = structuredClone(waiting);
if (waiting.length > 0) {
  nextFinish = new Promise((resolve) => (finished = resolve));
  for (const part of waiting) {
    if (editedInput !== undefined) {
      const withEdit = (p) =>
        p.approval?.id === part.approval.id ? { ...p, approval: { ...p.approval, editedInput } } : p;
      chat.messages = chat.messages.map((m) => ({ ...m, parts: m.parts.map(withEdit) }));
    }
    await chat.addToolApprovalResponse({
      id: part.approval.id,
      approved: decision !== 'deny',
      ...(decision === 'deny' ? { reason: 'Not today' } : {}),
    });
  }
  await nextFinish;
  // The automatic request's stream has ended; let the client settle its status.
  while (chat.status === 'streaming' || chat.status === 'submitted') {
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

const error = chat.error
  ? {
      name: chat.error.name,
      message: chat.error.message.slice(0, 1500),
      chunk: chat.error.value ?? null,
    }
  : null;
process.stdout.write(
  `${JSON.stringify({ status: chat.status, error, finishReasons, requested, messages: chat.messages })}\n`,
);
if (chat.status !== 'ready' || requested.length === 0) {
  console.error(`the ai client ended in status ${chat.status} with ${requested.length} approval request(s): ${error ? `${error.name}: ${error.message}` : 'no error'}`);
  process.exitCode = 1;
}
