import { useState } from 'react';
import { ChatPane } from './Chat.jsx';
import { Settings } from './Settings.jsx';
import { Sidebar } from './Sidebar.jsx';
import { SignIn } from './SignIn.jsx';
import { chatFromUrl, clearStored, loadSession, newChatId, saveSession, setChatIdInUrl } from './session.js';

export function App() {
  const [session, setSession] = useState(loadSession);
  // The open chat; `fresh` when it was just made here (the server has nothing of it yet).
  const [chat, setChat] = useState(chatFromUrl);
  // Bumped when the chat list may have changed (a turn began or ended): the sidebar reloads.
  const [changes, setChanges] = useState(0);
  // What the signed-in page shows: the chat workspace, or the settings page in its place.
  const [view, setView] = useState('chat');

  const openChat = (id, fresh = false) => {
    setChatIdInUrl(id);
    setChat({ id, fresh });
  };
  const startChat = () => openChat(newChatId(), true);
  const signIn = (next) => {
    saveSession(next);
    setSession(next);
    setView('chat');
    // A thread belongs to its user: another user starts a chat of their own.
    if (session?.email !== next.email) startChat();
  };
  const signOut = () => {
    clearStored();
    setSession(null);
    setView('chat');
  };
  const changed = () => setChanges((n) => n + 1);

  return (
    <div className={session ? 'page signed-in' : 'page'}>
      <header className="bar">
        <div className="brand">
          <span className="logo">R</span> Rover <span className="muted">Hub console</span>
        </div>
        {session && (
          <div className="who" data-testid="who">
            <span>
              {session.name} · {session.campus ? `${session.campus}, ` : ''}
              {session.school}
            </span>
            {view === 'chat' && (
              <button type="button" className="ghost" data-testid="open-settings" onClick={() => setView('settings')}>
                Settings
              </button>
            )}
            <button type="button" className="ghost" onClick={signOut}>
              Sign out
            </button>
          </div>
        )}
      </header>
      {session ? (
        // The workspace stays mounted (only hidden) while the settings page shows: a reply still
        // streaming carries on, and the chat is as it was on the way back.
        <>
          <div className="workspace" hidden={view !== 'chat'}>
            <Sidebar
              key={session.email}
              session={session}
              openId={chat.id}
              changes={changes}
              onOpen={(id) => openChat(id)}
              onNew={startChat}
              onDeleted={(id) => id === chat.id && startChat()}
              onSignOut={signOut}
            />
            <ChatPane
              key={`${session.email}/${chat.id}`}
              chatId={chat.id}
              fresh={chat.fresh}
              session={session}
              onChanged={changed}
              onSignOut={signOut}
            />
          </div>
          {view === 'settings' && (
            <Settings key={session.email} session={session} onBack={() => setView('chat')} onSignOut={signOut} />
          )}
        </>
      ) : (
        <SignIn onSignIn={signIn} />
      )}
    </div>
  );
}
