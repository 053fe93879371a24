import { getToolName, isToolUIPart } from 'ai';
import { Approval } from './Approval.jsx';
import { Feedback } from './Feedback.jsx';
import { labelFor } from './labels.js';
import { Question } from './Question.jsx';

/** One message of the thread: the staff member's text, or Rover's reply with its activity
 * timeline, questions, approval cards, the model that answered and feedback buttons. */
export function Message({ message, chatId, token, labels, streamedLabels, streaming, stopped, rated, canAnswer, answer, decide }) {
  if (message.role === 'user') {
    const text = message.parts
      .filter((part) => part.type === 'text')
      .map((part) => part.text)
      .join('\n');
    return (
      <>
        <div className="message user" data-testid="user-message">
          {text}
        </div>
        {stopped && (
          <div className="stopped" data-testid="stopped">
            Stopped before Rover answered.
          </div>
        )}
      </>
    );
  }
  // The turn that carries an answer replays the answered call (so its stream stands alone): a
  // tool call is drawn once, in its latest state.
  const lastIndex = new Map(message.parts.map((part, index) => [part.toolCallId ?? index, index]));
  const parts = message.parts.filter((part, index) => lastIndex.get(part.toolCallId ?? index) === index);
  return (
    <div className="message assistant" data-testid="assistant-message" data-message-id={message.id}>
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
      {stopped && (
        <div className="stopped" data-testid="stopped">
          Stopped.
        </div>
      )}
      {/* The model that answered, from the turn's `finish` (its messageMetadata.model). */}
      {!streaming && typeof message.metadata?.model === 'string' && (
        <div className="answered-by" data-testid="answered-by">
          answered by {message.metadata.model}
        </div>
      )}
      {!streaming && <Feedback chatId={chatId} messageId={message.id} token={token} rated={rated} />}
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
  // The label: the one streamed with the call (live, or kept by the server for a reopened
  // chat), else the registry's.
  const label = labelFor(name, labels, streamed);
  const agent = streamed?.agent && streamed.agent !== 'rover' ? streamed.agent.replaceAll('_', ' ') : null;
  const done = part.state === 'output-available';
  return (
    <>
      <div className={`activity ${done ? 'done' : 'running'}`} data-testid="activity" data-tool={name} data-state={part.state}>
        <span className="marker" aria-hidden="true">
          {done ? '✓' : part.state === 'output-denied' ? '✕' : '•'}
        </span>
        <span className="label">{label}</span>
        {agent && <span className="agent">{agent}</span>}
      </div>
      {name === 'ask_user' && part.state !== 'input-streaming' && (
        <Question part={part} canAnswer={canAnswer} answer={answer} />
      )}
      {part.state === 'approval-requested' && (
        <Approval
          name={name}
          label={label}
          input={part.input}
          decide={(approved, edited) => decide(part.approval.id, approved, edited)}
        />
      )}
      {part.state === 'approval-responded' && (
        <div className="approval muted">
          {!part.approval.approved ? 'Denied.' : part.approval.editedInput ? 'Approved with your edits.' : 'Approved.'}
        </div>
      )}
      {/* Ran with the staff member's edits: the output says which (`staffEdits`). */}
      {part.state === 'output-available' && part.output?.staffEdits && (
        <div className="approval muted" data-testid="approval-edited">
          Approved with your edits{part.approval?.editedInput ? ':' : '.'}
          {part.approval?.editedInput && <pre className="approval-input">{JSON.stringify(part.approval.editedInput, null, 2)}</pre>}
        </div>
      )}
      {/* Declined, or expired unanswered: the server's reason says which. */}
      {part.state === 'output-denied' && part.approval?.reason && (
        <div className="approval muted" data-testid="approval-outcome">
          {part.approval.reason}
        </div>
      )}
    </>
  );
}
