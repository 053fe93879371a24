import { useEffect, useState } from 'react';
import { getApprovalPolicy, putApprovalPolicy } from './api.js';
import { Problem } from './Problem.jsx';

// A rule's role or tool: any role, or any write.
const ANY = '*';
// What a rule's mode reads as.
const MODES = [
  ['always', 'waits for approval'],
  ['never', 'runs without approval'],
];

// React keys for the rows: a rule has no id of its own, and two rows may hold the same values
// while they are being edited.
let lastKey = 0;
const withKeys = (rules) => rules.map((rule) => ({ ...rule, key: ++lastKey }));

/** The choices of a select: `*` first (as `anyLabel`), then `names`, and `current` too should the
 * server have stored a name it no longer offers (so the row shows what is stored). */
function choices(names, current, anyLabel) {
  const all = [[ANY, anyLabel], ...names.map((name) => [name, name])];
  if (!all.some(([value]) => value === current)) all.push([current, current]);
  return all;
}

/** One of a rule's fields: a select of `[value, label]` options. */
function RuleSelect({ label, testid, value, options, onChange }) {
  return (
    <select aria-label={label} data-testid={testid} value={value} onChange={(event) => onChange(event.target.value)}>
      {options.map(([option, text]) => (
        <option key={option} value={option}>
          {text}
        </option>
      ))}
    </select>
  );
}

/**
 * The school's approval rules (`GET/PUT /api/approval-policy`): whose writes wait for their
 * approval, one row per rule. Save sends the whole list (the server replaces the rules whole and
 * answers them as stored, most specific first). A caller who may not read them (a teacher) sees
 * the server's refusal instead of the form; one who may read but not change them (a campus-scoped
 * admin) sees the refusal on Save.
 */
export function Settings({ session, onBack, onSignOut }) {
  // The roles and write tools a rule may name, once read.
  const [policy, setPolicy] = useState(null);
  const [rows, setRows] = useState([]);
  const [loadError, setLoadError] = useState(null);
  const [saving, setSaving] = useState(false);
  // `{ saved: true }` or `{ error }`, until the next edit.
  const [outcome, setOutcome] = useState(null);

  useEffect(() => {
    let live = true;
    getApprovalPolicy(session.token).then(
      (read) => {
        if (!live) return;
        setPolicy(read);
        setRows(withKeys(read.rules));
      },
      (error) => live && setLoadError(error),
    );
    return () => {
      live = false;
    };
  }, [session.token]);

  const edit = (next) => {
    setRows(next);
    setOutcome(null);
  };
  const change = (key, field, value) =>
    edit(rows.map((row) => (row.key === key ? { ...row, [field]: value } : row)));
  const add = () => edit([...rows, ...withKeys([{ role: ANY, tool: ANY, mode: 'always' }])]);
  const remove = (key) => edit(rows.filter((row) => row.key !== key));

  const save = async (event) => {
    event.preventDefault();
    setSaving(true);
    setOutcome(null);
    try {
      const stored = await putApprovalPolicy(
        session.token,
        rows.map(({ role, tool, mode }) => ({ role, tool, mode })),
      );
      setPolicy(stored);
      setRows(withKeys(stored.rules));
      setOutcome({ saved: true });
    } catch (error) {
      setOutcome({ error });
    } finally {
      setSaving(false);
    }
  };

  const problem = (error, testId) => <Problem error={error} testId={testId} onSignOut={onSignOut} />;

  return (
    <main className="settings" data-testid="settings">
      <div className="settings-head">
        <h1>Approval rules</h1>
        <button type="button" className="ghost" data-testid="settings-back" onClick={onBack}>
          Back to chat
        </button>
      </div>
      <p className="muted">
        Whose writes wait for their approval. The most specific rule decides: the staff member's role
        and the tool, then their role and any write, then any role and the tool, then any role and any
        write; with no rule at all, every write waits.
      </p>
      {loadError && problem(loadError, 'settings-error')}
      {!policy && !loadError && <p className="muted">Loading the approval rules…</p>}
      {policy && (
        <form className="rules" data-testid="approval-rules" onSubmit={save}>
          {rows.length === 0 ? (
            <p className="muted" data-testid="no-rules">
              No rules: every write waits for approval.
            </p>
          ) : (
            <table>
              <thead>
                <tr>
                  <th scope="col">Role</th>
                  <th scope="col">Tool</th>
                  <th scope="col">The write</th>
                  <th scope="col">
                    <span className="visually-hidden">Remove</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {rows.map((row) => (
                  <tr key={row.key} data-testid="rule">
                    <td>
                      <RuleSelect
                        label="Role"
                        testid="rule-role"
                        value={row.role}
                        options={choices(policy.roles, row.role, 'any role')}
                        onChange={(value) => change(row.key, 'role', value)}
                      />
                    </td>
                    <td>
                      <RuleSelect
                        label="Tool"
                        testid="rule-tool"
                        value={row.tool}
                        options={choices(policy.tools, row.tool, 'any write')}
                        onChange={(value) => change(row.key, 'tool', value)}
                      />
                    </td>
                    <td>
                      <RuleSelect
                        label="Mode"
                        testid="rule-mode"
                        value={row.mode}
                        options={MODES}
                        onChange={(value) => change(row.key, 'mode', value)}
                      />
                    </td>
                    <td>
                      <button
                        type="button"
                        className="ghost"
                        data-testid="rule-remove"
                        onClick={() => remove(row.key)}
                      >
                        Remove
                      </button>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
          <div className="rules-actions">
            <button type="button" className="ghost" data-testid="add-rule" onClick={add}>
              Add rule
            </button>
            <button type="submit" data-testid="save-rules" disabled={saving}>
              {saving ? 'Saving…' : 'Save'}
            </button>
            {outcome?.saved && (
              <span className="saved" role="status" data-testid="saved">
                Saved.
              </span>
            )}
          </div>
          {outcome?.error && problem(outcome.error, 'save-error')}
        </form>
      )}
    </main>
  );
}
