import { useState } from 'react';
import { Chat } from './Chat.jsx';
import { SignIn } from './SignIn.jsx';
import { chatIdFromUrl, clearStored, loadSession, newChatId, saveSession, setChatIdInUrl } from './session.js';

export function App() {
  const [session, setSession] = useState(loadSession);
  const [chatId, setChatId] = useState(chatIdFromUrl);

  const startChat = () => {
    const id = newChatId();
    setChatIdInUrl(id);
    setChatId(id);
  };
  const signIn = (next) => {
    saveSession(next);
    setSession(next);
    // A thread belongs to its user: another user starts a chat of their own.
    if (session?.email !== next.email) startChat();
  };
  const signOut = () => {
    clearStored();
    setSession(null);
  };

  return (
    <div className="page">
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
            <button type="button" className="ghost" onClick={startChat}>
              New chat
            </button>
            <button type="button" className="ghost" onClick={signOut}>
              Sign out
            </button>
          </div>
        )}
      </header>
      {session ? (
        <Chat key={`${session.email}/${chatId}`} chatId={chatId} session={session} onSignOut={signOut} />
      ) : (
        <SignIn onSignIn={signIn} />
      )}
    </div>
  );
}
