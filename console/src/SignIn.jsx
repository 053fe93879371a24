import { useState } from 'react';

// The demo school's users (`rover-toolserver db setup --demo`). Development only: the gateway
// mints their tokens (`POST /api/dev/token`) only when `auth.development` is on.
const DEMO_USERS = [
  ['admin@hill.school', 'School admin', 'Kampala Hill School'],
  ['kololo.admin@hill.school', 'Campus admin', 'Kampala Hill, Kololo campus'],
  ['dos@hill.school', 'Director of studies', 'Kampala Hill School'],
  ['amina@hill.school', 'Class teacher', 'Kampala Hill School'],
  ['okello@hill.school', 'Subject teacher', 'Kampala Hill School'],
  ['bursar@hill.school', 'Bursar', 'Kampala Hill School'],
  ['admin@lakeside.college', 'School admin', 'Lakeside College'],
];

export function SignIn({ onSignIn }) {
  const [email, setEmail] = useState(DEMO_USERS[0][0]);
  const [error, setError] = useState(null);
  const [busy, setBusy] = useState(false);

  const submit = async (event) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const response = await fetch('/api/dev/token', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ email }),
      });
      const body = await response.json().catch(() => ({}));
      if (response.status === 404 && !body?.error?.message?.includes('user')) {
        throw new Error('Development sign-in is off on this gateway (auth.development = false).');
      }
      if (!response.ok) throw new Error(body?.error?.message ?? `The gateway answered ${response.status}.`);
      onSignIn(body);
    } catch (e) {
      setError(e.message);
    } finally {
      setBusy(false);
    }
  };

  return (
    <main className="signin">
      <form onSubmit={submit} className="card">
        <h1>Sign in as a demo user</h1>
        <p className="muted">Development tokens only: this works when the gateway runs with auth.development on.</p>
        <fieldset className="users">
          {DEMO_USERS.map(([address, role, where]) => (
            <label key={address} className={address === email ? 'user chosen' : 'user'}>
              <input
                type="radio"
                name="email"
                value={address}
                checked={address === email}
                onChange={() => setEmail(address)}
              />
              <span className="address">{address}</span>
              <span className="muted">
                {role} · {where}
              </span>
            </label>
          ))}
        </fieldset>
        <button type="submit" disabled={busy} data-testid="sign-in">
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
        {error && (
          <p className="error" role="alert">
            {error}
          </p>
        )}
      </form>
    </main>
  );
}
