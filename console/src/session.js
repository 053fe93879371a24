// What the console keeps in the browser: the signed-in demo user (their development token) and each
// chat's messages, so a reload shows the thread and `useChat({ resume: true })` picks up its stream.

const SESSION_KEY = 'rover.console.session';
const messagesKey = (chatId) => `rover.console.messages.${chatId}`;

export function loadSession() {
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

/** Signing out forgets everything the console stored in this browser: the session, every chat's
 * messages and stream markers. */
export function clearStored() {
  for (const store of [localStorage, sessionStorage]) {
    const keys = [];
    for (let i = 0; i < store.length; i += 1) keys.push(store.key(i));
    for (const key of keys) if (key?.startsWith('rover.console.')) store.removeItem(key);
  }
}

export function loadMessages(chatId) {
  try {
    return JSON.parse(localStorage.getItem(messagesKey(chatId))) ?? [];
  } catch {
    return [];
  }
}

export function saveMessages(chatId, messages) {
  localStorage.setItem(messagesKey(chatId), JSON.stringify(messages));
}

/** A chat id a Rover gateway accepts (letters, digits, '-' and '_'). */
export function newChatId() {
  return `console-${crypto.randomUUID()}`;
}

/** The chat id in the URL (`?chat=…`), made and written there when missing. */
export function chatIdFromUrl() {
  const url = new URL(window.location.href);
  let id = url.searchParams.get('chat');
  if (!id || !/^[A-Za-z0-9_-]{1,200}$/.test(id)) {
    id = newChatId();
    setChatIdInUrl(id);
  }
  return id;
}

export function setChatIdInUrl(id) {
  const url = new URL(window.location.href);
  url.searchParams.set('chat', id);
  window.history.replaceState(null, '', url);
}
