import { useEffect, useRef, useState } from 'react';
import { deleteChat, listChats, renameChat } from './api.js';
import { Pencil, Trash } from './icons.jsx';
import { Problem } from './Problem.jsx';

const PAGE = 20;
const SEARCH_DELAY_MS = 250;

// What a chat's status reads as beside its title (`idle` shows nothing).
const STATUS = {
  running: 'replying',
  awaiting_approval: 'needs approval',
  approval_expired: 'approval expired',
  awaiting_answer: 'has a question',
};

/** "just now", "5 min ago", "3 h ago", or the date. */
function ago(iso) {
  const then = new Date(iso);
  const seconds = (Date.now() - then.getTime()) / 1000;
  if (Number.isNaN(seconds)) return '';
  if (seconds < 60) return 'just now';
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ago`;
  if (seconds < 86400) return `${Math.floor(seconds / 3600)} h ago`;
  return then.toLocaleDateString();
}

/**
 * The caller's chats, from `GET /api/chats` (newest activity first, a page at a time), with a
 * search box (`q`), and rename and delete on each. Reloads its first page whenever `changes` moves
 * (a turn began or ended), so a new chat shows up with the title the server gave it.
 */
export function Sidebar({ session, openId, changes, onOpen, onNew, onDeleted, onSignOut }) {
  const [query, setQuery] = useState('');
  const [search, setSearch] = useState('');
  const [chats, setChats] = useState(null);
  const [nextCursor, setNextCursor] = useState(null);
  const [error, setError] = useState(null);
  // Only the latest load may write the list: an earlier, slower answer is dropped.
  const latest = useRef(0);

  const load = async (cursor) => {
    const ticket = ++latest.current;
    try {
      const page = await listChats(session.token, { q: search || undefined, cursor, limit: PAGE });
      if (ticket !== latest.current) return;
      setChats((known) => (cursor ? [...(known ?? []), ...page.chats] : page.chats));
      setNextCursor(page.nextCursor ?? null);
      setError(null);
    } catch (e) {
      if (ticket === latest.current) setError(e);
    }
  };

  useEffect(() => {
    const timer = setTimeout(() => setSearch(query.trim()), SEARCH_DELAY_MS);
    return () => clearTimeout(timer);
  }, [query]);
  useEffect(() => {
    void load(null);
    // `load` reads `search` and the token: the list reloads when either, or `changes`, moves.
  }, [search, changes, session.token]);

  const renamed = (summary) => setChats((known) => known?.map((chat) => (chat.id === summary.id ? summary : chat)));
  const deleted = (id) => {
    setChats((known) => known?.filter((chat) => chat.id !== id));
    onDeleted(id);
  };

  return (
    <aside className="sidebar" data-testid="sidebar">
      <button type="button" className="new-chat" onClick={onNew}>
        New chat
      </button>
      <input
        type="search"
        className="search"
        data-testid="search"
        value={query}
        onChange={(event) => setQuery(event.target.value)}
        placeholder="Search chats…"
        aria-label="Search chats"
      />
      {error && <Problem error={error} testId="sidebar-error" onSignOut={onSignOut} />}
      {chats === null && !error && <p className="muted">Loading your chats…</p>}
      {chats?.length === 0 && (
        <p className="muted" data-testid="no-chats">
          {search ? 'No chat matches.' : 'No chats yet.'}
        </p>
      )}
      <ul className="chats" data-testid="chats">
        {chats?.map((chat) => (
          <ChatItem
            key={chat.id}
            chat={chat}
            open={chat.id === openId}
            token={session.token}
            onOpen={onOpen}
            onRenamed={renamed}
            onDeleted={deleted}
          />
        ))}
      </ul>
      {nextCursor && (
        <button type="button" className="ghost more" onClick={() => void load(nextCursor)}>
          Show more
        </button>
      )}
    </aside>
  );
}

function ChatItem({ chat, open, token, onOpen, onRenamed, onDeleted }) {
  // What the row is doing: showing, renaming (with the draft title), or asking to delete.
  const [mode, setMode] = useState('show');
  const [title, setTitle] = useState(chat.title);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);

  const act = async (what) => {
    setBusy(true);
    setError(null);
    try {
      await what();
    } catch (e) {
      setError(e.message);
    } finally {
      setBusy(false);
    }
  };
  const rename = () =>
    act(async () => {
      const trimmed = title.trim();
      if (trimmed && trimmed !== chat.title) onRenamed(await renameChat(token, chat.id, trimmed));
      setMode('show');
    });
  const remove = () =>
    act(async () => {
      await deleteChat(token, chat.id);
      onDeleted(chat.id);
    });

  return (
    <li className={open ? 'chat-item open' : 'chat-item'} data-testid="chat-item" data-chat-id={chat.id} data-status={chat.status}>
      {mode === 'rename' ? (
        <form
          className="rename"
          onSubmit={(event) => {
            event.preventDefault();
            void rename();
          }}
        >
          <input
            data-testid="rename-input"
            value={title}
            onChange={(event) => setTitle(event.target.value)}
            onKeyDown={(event) => event.key === 'Escape' && setMode('show')}
            aria-label="Chat title"
            autoFocus
          />
          <button type="submit" data-testid="rename-save" disabled={busy || !title.trim()}>
            Save
          </button>
        </form>
      ) : (
        <button
          type="button"
          className="chat-open"
          data-testid="chat-open"
          aria-current={open ? 'page' : undefined}
          onClick={() => onOpen(chat.id)}
        >
          <span className="chat-title" data-testid="chat-title">
            {chat.title || 'Untitled chat'}
          </span>
          <span className="chat-meta muted">
            {ago(chat.lastActivityAt)}
            {STATUS[chat.status] && <span className={`status ${chat.status}`}> · {STATUS[chat.status]}</span>}
          </span>
        </button>
      )}
      {mode === 'show' && (
        <span className="chat-actions">
          <button
            type="button"
            className="icon"
            data-testid="rename"
            aria-label={`Rename “${chat.title}”`}
            title="Rename"
            onClick={() => {
              setTitle(chat.title);
              setMode('rename');
            }}
          >
            <Pencil />
          </button>
          <button
            type="button"
            className="icon"
            data-testid="delete"
            aria-label={`Delete “${chat.title}”`}
            title="Delete"
            onClick={() => setMode('delete')}
          >
            <Trash />
          </button>
        </span>
      )}
      {mode === 'delete' && (
        <div className="confirm" data-testid="confirm-delete">
          <span>Delete this chat and everything in it?</span>
          <button type="button" className="danger" data-testid="delete-confirm" disabled={busy} onClick={() => void remove()}>
            Delete
          </button>
          <button type="button" className="ghost" disabled={busy} onClick={() => setMode('show')}>
            Cancel
          </button>
        </div>
      )}
      {error && (
        <p className="error" role="alert">
          {error}
        </p>
      )}
    </li>
  );
}
