import { useState } from 'react';

/** An `ask_user` question, answered inline; the answer is the tool call's output. */
export function Question({ part, canAnswer, answer }) {
  const [text, setText] = useState('');
  const question = part.input?.question ?? 'Rover has a question.';
  const choices = Array.isArray(part.input?.choices) ? part.input.choices : [];

  if (part.state === 'output-available') {
    return (
      <div className="question answered" data-testid="question">
        <p>{question}</p>
        <p className="muted" data-testid="answer">
          You answered: {typeof part.output === 'string' ? part.output : JSON.stringify(part.output)}
        </p>
      </div>
    );
  }
  const submit = (value) => {
    const trimmed = value.trim();
    if (trimmed && canAnswer) answer(part.toolCallId, trimmed);
  };
  return (
    <form
      className="question"
      data-testid="question"
      onSubmit={(event) => {
        event.preventDefault();
        submit(text);
      }}
    >
      <p>{question}</p>
      {choices.length > 0 && (
        <div className="chips">
          {choices.map((choice) => (
            <button type="button" className="chip" key={choice} disabled={!canAnswer} onClick={() => submit(choice)}>
              {choice}
            </button>
          ))}
        </div>
      )}
      <div className="row">
        <input
          data-testid="answer-input"
          value={text}
          onChange={(event) => setText(event.target.value)}
          placeholder="Your answer…"
          aria-label="Your answer"
        />
        <button type="submit" data-testid="answer-send" disabled={!canAnswer || !text.trim()}>
          Answer
        </button>
      </div>
    </form>
  );
}
