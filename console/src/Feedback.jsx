import { useState } from 'react';
import { sendFeedback } from './api.js';
import { ThumbUp } from './icons.jsx';

const RATINGS = [
  ['up', 'Good answer'],
  ['down', 'Bad answer'],
];

/**
 * 👍/👎 on one of Rover's messages, with an optional comment: a thumb opens the comment box, Send
 * posts `{rating, comment?}` to `/api/chats/{id}/messages/{messageId}/feedback`. A reply rated
 * before (`rated`, from the reopened chat's `feedback`) shows its rating.
 */
export function Feedback({ chatId, messageId, token, rated }) {
  const [rating, setRating] = useState(rated?.rating ?? null);
  const [comment, setComment] = useState('');
  // 'idle' · 'writing' (a thumb chosen) · 'sending' · 'sent'
  const [phase, setPhase] = useState(rated ? 'sent' : 'idle');
  const [error, setError] = useState(null);

  if (phase === 'sent') {
    return (
      <div className="feedback sent muted" data-testid="feedback-sent">
        <ThumbUp down={rating === 'down'} /> Thanks for the feedback.
      </div>
    );
  }
  const submit = async () => {
    setPhase('sending');
    setError(null);
    try {
      await sendFeedback(token, chatId, messageId, rating, comment.trim() || undefined);
      setPhase('sent');
    } catch (e) {
      setError(e.message);
      setPhase('writing');
    }
  };
  return (
    <div className="feedback" data-testid="feedback">
      <div className="thumbs">
        {RATINGS.map(([value, name]) => (
          <button
            key={value}
            type="button"
            className={rating === value ? 'icon chosen' : 'icon'}
            data-testid={`feedback-${value}`}
            aria-label={name}
            aria-pressed={rating === value}
            title={name}
            disabled={phase === 'sending'}
            onClick={() => {
              setRating(value);
              setPhase('writing');
            }}
          >
            <ThumbUp down={value === 'down'} />
          </button>
        ))}
      </div>
      {phase !== 'idle' && (
        <form
          className="row feedback-form"
          onSubmit={(event) => {
            event.preventDefault();
            void submit();
          }}
        >
          <input
            data-testid="feedback-comment"
            value={comment}
            onChange={(event) => setComment(event.target.value)}
            placeholder="Anything to add? (optional)"
            aria-label="Feedback comment (optional)"
          />
          <button type="submit" data-testid="feedback-send" disabled={phase === 'sending'}>
            Send
          </button>
          <button
            type="button"
            className="ghost"
            disabled={phase === 'sending'}
            onClick={() => {
              setRating(null);
              setPhase('idle');
            }}
          >
            Cancel
          </button>
        </form>
      )}
      {error && (
        <p className="error" role="alert">
          {error}
        </p>
      )}
    </div>
  );
}
