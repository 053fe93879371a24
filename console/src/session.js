// What the console keeps in the browser: the signed-in demo user (their development token), and
// nothing else. Chats, their messages and their state are the server's (`/api/chats`); the open
// chat's id is in the URL (`?chat=…`).

const PREFIX = 'rover.console.';
const SESSION_KEY = `${PREFIX}session`;

/** The stored session, if any. Anything else an earlier console stored (chats' messages, stream
 * markers) is forgotten on the way. */
export function loadSession() {
  forget((key) => key !== SESSION_KEY);
  try {
    return JSON.parse(localStorage.getItem(SESSION_KEY)) ?? null;
  } catch {
    return null;
  }
}

export function saveSession(session) {
  if (session) localStorage.setItem(SESSION_KEY, JSON.stringify(session));
  else localStorage.removeItem(SESSION_KEY);
}

/** Signing out forgets everything the console stored in this browser. */
export function clearStored() {
  forget(() => true);
}

/** Removes the console's keys that `which` picks from local and session storage. */
function forget(which) {
  for (const store of [localStorage, sessionStorage]) {
    const keys = [];
    for (let i = 0; i < store.length; i += 1) keys.push(store.key(i));
    for (const key of keys) if (key?.startsWith(PREFIX) && which(key)) store.removeItem(key);
  }
}

/** A chat id a Rover gateway accepts (letters, digits, '-' and '_'). */
export function newChatId() {
  return `console-${crypto.randomUUID()}`;
}

/** The chat named in the URL (`?chat=…`), or a new one (its id written there). `fresh` says the
 * id was just made, so the server has nothing of it yet. */
export function chatFromUrl() {
  const id = new URL(window.location.href).searchParams.get('chat');
  if (id && /^[A-Za-z0-9_-]{1,200}$/.test(id)) return { id, fresh: false };
  const made = newChatId();
  setChatIdInUrl(made);
  return { id: made, fresh: true };
}

export function setChatIdInUrl(id) {
  const url = new URL(window.location.href);
  url.searchParams.set('chat', id);
  window.history.replaceState(null, '', url);
}
