import { useChat } from '@ai-sdk/react';
import {
  DefaultChatTransport,
  getToolName,
  isToolUIPart,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  lastAssistantMessageIsCompleteWithToolCalls,
} from 'ai';
import { useEffect, useMemo, useRef, useState } from 'react';
import { labelFor, loadLabels } from './labels.js';
import { loadMessages, saveMessages } from './session.js';
import { Question } from './Question.jsx';

// Utterances the scripted model (`make run`) understands; a real model takes anything.
const SUGGESTIONS = [
  'Create a department called Sciences',
  'List the departments',
  'How many students do we have?',
  'What can you do?',
];

const openKey = (chatId) => `rover.console.open.${chatId}`;

/** The last message answers an `ask_user` question: send it (ai@6 `sendAutomaticallyWhen`). */
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

export function Chat({ chatId, session, onSignOut }) {
  const authorization = `Bearer ${session.token}`;
  const initialMessages = useMemo(() => loadMessages(chatId), [chatId]);
  // Resume when the page went away mid-turn (no reply finished since the last send), or when this
  // browser has none of the thread yet.
  const [resume] = useState(
    () =>
      initialMessages.length === 0 ||
      initialMessages[initialMessages.length - 1].role === 'user' ||
      localStorage.getItem(openKey(chatId)) === 'true',
  );
  const [labels, setLabels] = useState({});
  const [streamedLabels, setStreamedLabels] = useState({});
  const [draft, setDraft] = useState('');
  const end = useRef(null);

  const transport = useMemo(
    () => new DefaultChatTransport({ api: '/api/chat', headers: { Authorization: authorization } }),
    [authorization],
  );
  const { messages, sendMessage, status, error, stop, addToolOutput, addToolApprovalResponse, clearError } = useChat({
    id: chatId,
    messages: initialMessages,
    transport,
    resume,
    sendAutomaticallyWhen,
    // A reply is open from its request until a stream ends normally; leaving the page (which
    // aborts the stream) keeps it open, so the reload resumes it.
    onFinish: ({ isAbort, isDisconnect, isError }) => {
      if (!isAbort && !isDisconnect && !isError) localStorage.setItem(openKey(chatId), 'false');
    },
    onData: (part) => {
      if (part.type === 'data-tool-label') {
        setStreamedLabels((known) => ({ ...known, [part.data.toolCallId]: part.data }));
      }
    },
  });

  useEffect(() => {
    loadLabels().then(setLabels);
  }, []);
  useEffect(() => {
    saveMessages(chatId, messages);
    end.current?.scrollIntoView({ block: 'end' });
  }, [chatId, messages]);
  const busy = status === 'submitted' || status === 'streaming';
  useEffect(() => {
    if (busy) localStorage.setItem(openKey(chatId), 'true');
  }, [chatId, busy]);

  const send = (text) => {
    const trimmed = text.trim();
    if (!trimmed || busy) return;
    clearError();
    sendMessage({ text: trimmed });
    setDraft('');
  };
  const stopTurn = () => {
    // The stream stops here at once; the gateway is asked to stop the turn itself.
    void stop();
    void fetch(`/api/chat/${encodeURIComponent(chatId)}/stop`, {
      method: 'POST',
      headers: { Authorization: authorization },
    }).catch(() => {});
  };
  const signedOut = error?.message?.includes('"unauthenticated"');

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
        {shown(messages).map((message) => (
          <Message
            key={message.id}
            message={message}
            labels={labels}
            streamedLabels={streamedLabels}
            canAnswer={!busy}
            answer={(toolCallId, output) => addToolOutput({ tool: 'ask_user', toolCallId, output })}
            decide={(id, approved) => addToolApprovalResponse({ id, approved })}
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
          <button type="button" className="stop" data-testid="stop" onClick={stopTurn}>
            Stop
          </button>
        ) : (
          <button type="submit" data-testid="send" disabled={!draft.trim()}>
            Send
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

/** The gateway's JSON error message, or the client's own. */
function errorText(error) {
  try {
    return JSON.parse(error.message)?.error?.message ?? error.message;
  } catch {
    return error.message;
  }
}

function Message({ message, labels, streamedLabels, canAnswer, answer, decide }) {
  if (message.role === 'user') {
    const text = message.parts
      .filter((part) => part.type === 'text')
      .map((part) => part.text)
      .join('\n');
    return (
      <div className="message user" data-testid="user-message">
        {text}
      </div>
    );
  }
  // The turn that carries an answer replays the answered call (so its stream stands alone): a
  // tool call is drawn once, in its latest state.
  const lastIndex = new Map(message.parts.map((part, index) => [part.toolCallId ?? index, index]));
  const parts = message.parts.filter((part, index) => lastIndex.get(part.toolCallId ?? index) === index);
  return (
    <div className="message assistant" data-testid="assistant-message">
      {parts.map((part, index) => (
        <Part
          key={part.toolCallId ?? `${part.type}-${index}`}
          part={part}
          labels={labels}
          streamedLabels={streamedLabels}
          canAnswer={canAnswer}
          answer={answer}
          decide={decide}
        />
      ))}
    </div>
  );
}

function Part({ part, labels, streamedLabels, canAnswer, answer, decide }) {
  if (part.type === 'text') {
    return (
      <p className="reply" data-testid="reply">
        {part.text}
      </p>
    );
  }
  if (part.type === 'data-subagent') {
    return (
      <details className="subagent">
        <summary>{part.data.agent.replaceAll('_', ' ')} worked on it</summary>
        <p>{part.data.text}</p>
      </details>
    );
  }
  if (!isToolUIPart(part)) return null;
  // A failed tool call is not drawn: Rover's reply carries the news (the seed's rule).
  if (part.state === 'output-error') return null;
  const name = getToolName(part);
  const streamed = streamedLabels[part.toolCallId];
  const agent = streamed?.agent && streamed.agent !== 'rover' ? streamed.agent.replaceAll('_', ' ') : null;
  const done = part.state === 'output-available';
  return (
    <>
      <div className={`activity ${done ? 'done' : 'running'}`} data-testid="activity" data-tool={name} data-state={part.state}>
        <span className="marker" aria-hidden="true">
          {done ? '✓' : part.state === 'output-denied' ? '✕' : '•'}
        </span>
        <span className="label">{labelFor(name, labels, streamed)}</span>
        {agent && <span className="agent">{agent}</span>}
      </div>
      {name === 'ask_user' && part.state !== 'input-streaming' && (
        <Question part={part} canAnswer={canAnswer} answer={answer} />
      )}
      {part.state === 'approval-requested' && (
        <div className="approval" data-testid="approval">
          <span>
            Rover needs your approval to run <strong>{labelFor(name, labels, streamed)}</strong> with exactly:
          </span>
          {/* The exact input that will run: text a colleague planted can hide nothing here. */}
          <pre className="approval-input" data-testid="approval-input">
            {JSON.stringify(part.input, null, 2)}
          </pre>
          <button type="button" data-testid="approve" onClick={() => decide(part.approval.id, true)}>
            Approve
          </button>
          <button type="button" className="ghost" data-testid="deny" onClick={() => decide(part.approval.id, false)}>
            Deny
          </button>
        </div>
      )}
      {part.state === 'approval-responded' && (
        <div className="approval muted">{part.approval.approved ? 'Approved.' : 'Denied.'}</div>
      )}
    </>
  );
}
