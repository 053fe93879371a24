import { useChat } from '@ai-sdk/react';
import {
  DefaultChatTransport,
  getToolName,
  isToolUIPart,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  lastAssistantMessageIsCompleteWithToolCalls,
} from 'ai';
import { useEffect, useMemo, useRef, useState } from 'react';
import { getChat, isSignedOut, stopChat } from './api.js';
import { loadLabels } from './labels.js';
import { Message } from './Message.jsx';

// Utterances the scripted model (`make run`) understands; a real model takes anything.
const SUGGESTIONS = [
  'Create a department called Sciences',
  'List the departments',
  'How many students do we have?',
  'What can you do?',
];

/** How often, and how long, the page asks whether a reply still ending after Stop has ended. */
const STOP_POLL_MS = 500;
const STOP_POLL_LIMIT_MS = 30_000;

const NEW_CHAT = { messages: [], status: 'idle' };

/** The last message answers an `ask_user` question: send it (`sendAutomaticallyWhen`). */
function answeredQuestion({ messages }) {
  const last = messages[messages.length - 1];
  if (!last || last.role !== 'assistant') return false;
  const stepStart = last.parts.findLastIndex((part) => part.type === 'step-start');
  const lastStep = last.parts.slice(stepStart + 1);
  return (
    lastStep.some((part) => isToolUIPart(part) && getToolName(part) === 'ask_user' && part.state === 'output-available') &&
    lastAssistantMessageIsCompleteWithToolCalls({ messages })
  );
}

function sendAutomaticallyWhen(options) {
  return answeredQuestion(options) || lastAssistantMessageIsCompleteWithApprovalResponses(options);
}

/** `message` with the edited input on the tool part waiting for approval `id`. */
function withEdit(message, id, editedInput) {
  if (!message.parts.some((part) => part.approval?.id === id)) return message;
  return {
    ...message,
    parts: message.parts.map((part) => (part.approval?.id === id ? { ...part, approval: { ...part.approval, editedInput } } : part)),
  };
}

/** The gateway's JSON error message, or the client's own. */
function errorText(error) {
  try {
    return JSON.parse(error.message)?.error?.message ?? error.message;
  } catch {
    return error.message;
  }
}

/**
 * The open chat: loaded from `GET /api/chats/{id}` (a chat made here is not asked for), then
 * handed to `useChat`. A reply the server says is still running is resumed.
 */
export function ChatPane({ chatId, fresh, session, onChanged, onSignOut }) {
  const [loaded, setLoaded] = useState(fresh ? NEW_CHAT : null);
  const [error, setError] = useState(null);
  useEffect(() => {
    if (fresh) return undefined;
    let live = true;
    getChat(session.token, chatId).then(
      // Unknown to the server: a chat that has not begun (or was deleted meanwhile).
      (chat) => live && setLoaded(chat ?? NEW_CHAT),
      (e) => live && setError(e),
    );
    return () => {
      live = false;
    };
  }, [chatId, fresh, session.token]);

  if (error) {
    return (
      <main className="chat">
        <div className="error notice" role="alert" data-testid="error">
          {isSignedOut(error) ? 'Your session has ended.' : `This chat could not be opened: ${error.message}`}{' '}
          {isSignedOut(error) && (
            <button type="button" className="ghost" onClick={onSignOut}>
              Sign in again
            </button>
          )}
        </div>
      </main>
    );
  }
  if (!loaded) {
    return (
      <main className="chat">
        <p className="muted notice" data-testid="loading">
          Opening the chat…
        </p>
      </main>
    );
  }
  return (
    <Chat
      chatId={chatId}
      session={session}
      initialMessages={loaded.messages}
      ratings={loaded.feedback ?? {}}
      toolLabels={loaded.toolLabels ?? {}}
      resume={loaded.status === 'running'}
      onChanged={onChanged}
      onSignOut={onSignOut}
    />
  );
}

function Chat({ chatId, session, initialMessages, ratings, toolLabels, resume, onChanged, onSignOut }) {
  const token = session.token;
  const [labels, setLabels] = useState({});
  // Each tool call's label and agent: the reopened chat's (`toolLabels`, what its streams said),
  // then what this page's streams say.
  const [streamedLabels, setStreamedLabels] = useState(toolLabels);
  const [draft, setDraft] = useState('');
  // Replies that ended without finishing (stopped here or elsewhere), by message id; only this
  // page's view, nothing is stored.
  const [stopped, setStopped] = useState(() => new Set());
  // Stop was pressed and the gateway has not yet said the reply ended.
  const [stopping, setStopping] = useState(false);
  const mounted = useRef(true);
  const end = useRef(null);

  const transport = useMemo(
    () =>
      new DefaultChatTransport({
        api: '/api/chat',
        headers: { Authorization: `Bearer ${token}` },
        // The gateway reads only the last message (the history is the server's), so a long
        // thread reopened from the server is not sent back with every message.
        prepareSendMessagesRequest: ({ id, messages, trigger, messageId }) => ({
          body: { id, messages: messages.slice(-1), trigger, messageId },
        }),
      }),
    [token],
  );
  const { messages, setMessages, sendMessage, status, error, stop, addToolOutput, addToolApprovalResponse, clearError } = useChat({
    id: chatId,
    messages: initialMessages,
    transport,
    resume,
    sendAutomaticallyWhen,
    onFinish: ({ message, messages: all, isError, finishReason }) => {
      // A stream that ends without `finish` was stopped (here, or by the gateway's `abort`).
      if (!isError && finishReason == null) {
        const shown = all.some((m) => m.id === message.id) ? message.id : all[all.length - 1]?.id;
        if (shown) setStopped((known) => new Set(known).add(shown));
      }
    },
    onData: (part) => {
      if (part.type === 'data-tool-label') {
        setStreamedLabels((known) => ({ ...known, [part.data.toolCallId]: part.data }));
      }
    },
  });

  useEffect(() => {
    mounted.current = true;
    loadLabels().then(setLabels);
    return () => {
      mounted.current = false;
    };
  }, []);
  useEffect(() => {
    end.current?.scrollIntoView({ block: 'end' });
  }, [messages]);
  const busy = status === 'submitted' || status === 'streaming';
  // The sidebar reloads when a reply begins (a new chat appears) and ends (its title, status).
  const wasBusy = useRef(busy);
  useEffect(() => {
    if (wasBusy.current !== busy) onChanged();
    wasBusy.current = busy;
  }, [busy, onChanged]);

  const send = (text) => {
    const trimmed = text.trim();
    if (!trimmed || busy || stopping) return;
    clearError();
    void sendMessage({ text: trimmed });
    setDraft('');
  };
  const stopTurn = async () => {
    setStopping(true);
    try {
      // The page stops reading at once, then asks the gateway to stop the reply itself.
      await stop();
      const answered = await stopChat(token, chatId).catch(() => null);
      // 202: the reply is still ending; the next message waits until the server says it ended.
      if (answered === 202) await untilEnded();
    } finally {
      if (mounted.current) {
        setStopping(false);
        onChanged();
      }
    }
  };
  const untilEnded = async () => {
    const deadline = Date.now() + STOP_POLL_LIMIT_MS;
    while (mounted.current && Date.now() < deadline) {
      const chat = await getChat(token, chatId).catch(() => null);
      if (chat?.status !== 'running') return;
      await new Promise((resolve) => setTimeout(resolve, STOP_POLL_MS));
    }
  };
  const signedOut = error?.message?.includes('"unauthenticated"');
  const visible = shown(messages);
  const last = visible[visible.length - 1];

  return (
    <main className="chat">
      <section className="thread" data-testid="thread" aria-live="polite">
        {messages.length === 0 && !busy && (
          <div className="empty">
            <p>Ask Rover about the school. Try:</p>
            <div className="chips">
              {SUGGESTIONS.map((text) => (
                <button type="button" className="chip" key={text} onClick={() => send(text)}>
                  {text}
                </button>
              ))}
            </div>
          </div>
        )}
        {visible.map((message) => (
          <Message
            key={message.id}
            message={message}
            chatId={chatId}
            token={token}
            labels={labels}
            streamedLabels={streamedLabels}
            // The reply still streaming gets no feedback buttons yet.
            streaming={busy && message === last && message.role === 'assistant'}
            // Stopped here, or — a reopened chat — as its metadata says.
            stopped={stopped.has(message.id) || message.metadata?.stopped === true}
            rated={ratings[message.id]}
            canAnswer={!busy}
            answer={(toolCallId, output) => addToolOutput({ tool: 'ask_user', toolCallId, output })}
            decide={(id, approved, edited) => {
              // An edit rides on the answered part (`approval.editedInput`), which
              // `addToolApprovalResponse` keeps as it adds the answer.
              if (edited !== undefined) setMessages((all) => all.map((m) => withEdit(m, id, edited)));
              addToolApprovalResponse({ id, approved });
            }}
          />
        ))}
        {status === 'submitted' && <div className="thinking" data-testid="thinking">Rover is thinking…</div>}
        {error && (
          <div className="error" role="alert" data-testid="error">
            {signedOut ? 'Your session has ended.' : errorText(error)}{' '}
            {signedOut && (
              <button type="button" className="ghost" onClick={onSignOut}>
                Sign in again
              </button>
            )}
          </div>
        )}
        <div ref={end} />
      </section>
      <form
        className="composer"
        onSubmit={(event) => {
          event.preventDefault();
          send(draft);
        }}
      >
        <input
          data-testid="composer"
          value={draft}
          onChange={(event) => setDraft(event.target.value)}
          placeholder="Message Rover…"
          aria-label="Message Rover"
        />
        {busy ? (
          <button type="button" className="stop" data-testid="stop" onClick={() => void stopTurn()}>
            Stop
          </button>
        ) : (
          <button type="submit" data-testid="send" disabled={stopping || !draft.trim()}>
            {stopping ? 'Stopping…' : 'Send'}
          </button>
        )}
      </form>
    </main>
  );
}

/**
 * The messages to draw. A reply that answers a question continues the assistant message that
 * asked it, under the new turn's id: the client keeps the earlier copy as a message of its own, so
 * an assistant message whose tool calls all reappear in the next one is not drawn twice.
 */
function shown(messages) {
  return messages.filter((message, index) => {
    const next = messages[index + 1];
    if (message.role !== 'assistant' || next?.role !== 'assistant') return true;
    const later = new Set(next.parts.map((part) => part.toolCallId).filter(Boolean));
    const calls = message.parts.map((part) => part.toolCallId).filter(Boolean);
    return calls.length === 0 || !calls.every((id) => later.has(id));
  });
}
