import { isSignedOut } from './api.js';

/** A gateway error as the page shows it: the server's message, or that the session ended with a
 * way to sign in again. */
export function Problem({ error, testId, onSignOut }) {
  return (
    <p className="error" role="alert" data-testid={testId}>
      {isSignedOut(error) ? 'Your session has ended.' : error.message}{' '}
      {isSignedOut(error) && (
        <button type="button" className="ghost" onClick={onSignOut}>
          Sign in again
        </button>
      )}
    </p>
  );
}
