// The gateway's chat history API (`/api/chats…`), the chat's stop endpoint and the school's
// approval rules (`/api/approval-policy`), with the caller's bearer token. A non-2xx answer
// becomes an `ApiError` carrying the gateway's `{"error":{"code","message"}}`.

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** The session ended (the token expired or was refused): the page offers to sign in again. */
export const isSignedOut = (error) => error?.status === 401 || error?.code === 'unauthenticated';

async function call(token, method, path, body) {
  const headers = { Authorization: `Bearer ${token}` };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!response.ok) {
    const error = await response.json().catch(() => null);
    throw new ApiError(
      response.status,
      error?.error?.code ?? null,
      error?.error?.message ?? `The gateway answered ${response.status}.`,
    );
  }
  return response;
}

const chatPath = (id) => `/api/chats/${encodeURIComponent(id)}`;

/** One page of the caller's chats, newest activity first: `{ chats, nextCursor }`. */
export async function listChats(token, { q, cursor, limit = 20 } = {}) {
  const params = new URLSearchParams({ limit: String(limit) });
  if (q) params.set('q', q);
  if (cursor) params.set('cursor', cursor);
  return (await call(token, 'GET', `/api/chats?${params}`)).json();
}

/** The chat with its messages (`UIMessage[]`, as `useChat` holds them), or `null` when the server
 * has no such chat of the caller's (a new chat, or one deleted meanwhile). */
export async function getChat(token, id) {
  try {
    return await (await call(token, 'GET', chatPath(id))).json();
  } catch (error) {
    if (error.status === 404) return null;
    throw error;
  }
}

/** Renames the chat; answers its summary. */
export async function renameChat(token, id, title) {
  return (await call(token, 'PATCH', chatPath(id), { title })).json();
}

export async function deleteChat(token, id) {
  await call(token, 'DELETE', chatPath(id));
}

/** A staff member's 👍/👎 on one assistant message, with an optional comment. */
export async function sendFeedback(token, chatId, messageId, rating, comment) {
  const body = comment ? { rating, comment } : { rating };
  await call(token, 'POST', `${chatPath(chatId)}/messages/${encodeURIComponent(messageId)}/feedback`, body);
}

/** Asks the gateway to stop the chat's running reply. Answers the status: 200 once it stopped,
 * 202 while it is still ending, 204 when nothing was running. */
export async function stopChat(token, id) {
  return (await call(token, 'POST', `/api/chat/${encodeURIComponent(id)}/stop`)).status;
}

/** The school's approval rules, with the roles and write tools a rule may name:
 * `{ rules: [{ role, tool, mode }], roles, tools }` (`*` is any role or any write). Needs
 * `read:Role`: a teacher gets a 403. */
export async function getApprovalPolicy(token) {
  return (await call(token, 'GET', '/api/approval-policy')).json();
}

/** Replaces the school's approval rules with `rules`, whole; answers the policy as stored (most
 * specific rule first). Needs `update:Role` and the whole school's scope. */
export async function putApprovalPolicy(token, rules) {
  return (await call(token, 'PUT', '/api/approval-policy', { rules })).json();
}
