import { useEffect, useState } from 'react';
import { loadSchemas } from './schemas.js';

/** A write waiting for the staff member: what it does (the registry's label), the tool and the
 * exact input that will run, and Approve / Edit / Deny. Edit opens a form built from the tool's
 * argument schema (`GET /api/tool-schemas`), or the input as raw JSON; the approval then carries
 * the edited input (`approval.editedInput`), which the gateway checks against the same schema. */
export function Approval({ name, label, input, decide }) {
  const [editing, setEditing] = useState(false);
  return (
    <div className="approval card-approval" data-testid="approval">
      <div className="approval-head">
        Rover asks your approval: <strong data-testid="approval-label">{label}</strong>
      </div>
      <div className="muted">
        It will run <code>{name}</code> with exactly:
      </div>
      {/* The exact input that will run: text a colleague planted can hide nothing here. */}
      <pre className="approval-input" data-testid="approval-input">
        {JSON.stringify(input, null, 2)}
      </pre>
      {editing ? (
        <EditForm name={name} input={input} cancel={() => setEditing(false)} approve={(edited) => decide(true, edited)} />
      ) : (
        <div className="approval-actions">
          <button type="button" data-testid="approve" onClick={() => decide(true)}>
            Approve
          </button>
          <button type="button" className="ghost" data-testid="edit" onClick={() => setEditing(true)}>
            Edit
          </button>
          <button type="button" className="ghost" data-testid="deny" onClick={() => decide(false)}>
            Deny
          </button>
        </div>
      )}
    </div>
  );
}

/** How a property is edited: a kind of field, from its schema. */
function fieldKind(property) {
  const types = [property.type].flat().filter((type) => type !== 'null');
  if (Array.isArray(property.enum)) return 'choice';
  if (types.length !== 1) return 'json';
  const [type] = types;
  if (type === 'string') return property.format === 'date' ? 'date' : 'text';
  if (type === 'integer' || type === 'number') return 'number';
  if (type === 'boolean') return 'boolean';
  if (type === 'array' && [property.items?.type].flat().includes('string')) return 'lines';
  return 'json';
}

/** A value as its field shows it. */
function toField(kind, value) {
  if (value === undefined || value === null) return kind === 'boolean' ? false : '';
  if (kind === 'lines') return value.join('\n');
  if (kind === 'json') return JSON.stringify(value, null, 2);
  if (kind === 'boolean') return value === true;
  return String(value);
}

/** A field's text as the value it stands for; `undefined` leaves an optional argument out.
 * Throws a sentence when it cannot be read. */
function fromField(kind, text, key) {
  if (kind === 'boolean') return text;
  if (kind === 'lines') return text.split('\n').map((line) => line.trim()).filter(Boolean);
  if (text.trim() === '') return undefined;
  if (kind === 'number') {
    const number = Number(text);
    if (!Number.isFinite(number)) throw new Error(`${key} must be a number.`);
    return number;
  }
  if (kind === 'json') {
    try {
      return JSON.parse(text);
    } catch {
      throw new Error(`${key} is not valid JSON.`);
    }
  }
  return text;
}

/** The edit form: one field per argument of the tool's schema, or the whole input as JSON. */
function EditForm({ name, input, cancel, approve }) {
  const [schema, setSchema] = useState(undefined);
  const [raw, setRaw] = useState(false);
  const [values, setValues] = useState({});
  const [json, setJson] = useState(JSON.stringify(input, null, 2));
  const [problem, setProblem] = useState(null);
  useEffect(() => {
    let live = true;
    loadSchemas().then((schemas) => {
      if (!live) return;
      const found = schemas[name];
      setSchema(found ?? null);
      // No schema to build a form from: the raw JSON it is.
      if (!found?.properties) setRaw(true);
      const properties = found?.properties ?? {};
      setValues(Object.fromEntries(Object.entries(properties).map(([key, property]) => [key, toField(fieldKind(property), input?.[key])])));
    });
    return () => {
      live = false;
    };
    // The form starts from the input as proposed, once: a re-render must not reset what was typed.
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [name]);
  if (schema === undefined) return <div className="muted">Loading the form…</div>;
  const properties = Object.entries(schema?.properties ?? {});
  const required = new Set(schema?.required ?? []);
  const edited = () => {
    if (raw) {
      try {
        return JSON.parse(json);
      } catch {
        throw new Error('The input is not valid JSON.');
      }
    }
    const result = {};
    for (const [key, property] of properties) {
      const value = fromField(fieldKind(property), values[key], key);
      if (value !== undefined) result[key] = value;
      else if (required.has(key)) throw new Error(`${key} is needed.`);
    }
    return result;
  };
  const submit = (event) => {
    event.preventDefault();
    try {
      approve(edited());
    } catch (error) {
      setProblem(error.message);
    }
  };
  const set = (key, value) => setValues((known) => ({ ...known, [key]: value }));
  return (
    <form className="approval-edit" data-testid="approval-edit" onSubmit={submit}>
      {raw ? (
        <textarea data-testid="edit-json" rows={8} value={json} onChange={(event) => setJson(event.target.value)} />
      ) : (
        properties.map(([key, property]) => (
          <Field key={key} name={key} property={property} required={required.has(key)} value={values[key]} set={(value) => set(key, value)} />
        ))
      )}
      {schema?.properties && (
        <label className="muted">
          <input type="checkbox" data-testid="edit-raw" checked={raw} onChange={(event) => setRaw(event.target.checked)} /> Edit as JSON
        </label>
      )}
      {problem && (
        <div className="error" role="alert" data-testid="edit-problem">
          {problem}
        </div>
      )}
      <div className="approval-actions">
        <button type="submit" data-testid="approve-edited">
          Approve with these values
        </button>
        <button type="button" className="ghost" onClick={cancel}>
          Cancel
        </button>
      </div>
    </form>
  );
}

/** One argument's field, labelled with its name and described by its schema. */
function Field({ name, property, required, value, set }) {
  const kind = fieldKind(property);
  const common = { 'data-testid': `edit-${name}`, title: property.description ?? '' };
  let control;
  if (kind === 'choice') {
    control = (
      <select {...common} value={value} onChange={(event) => set(event.target.value)}>
        {!required && <option value="">—</option>}
        {property.enum.filter((option) => option !== null).map((option) => (
          <option key={String(option)} value={String(option)}>
            {String(option)}
          </option>
        ))}
      </select>
    );
  } else if (kind === 'boolean') {
    control = <input {...common} type="checkbox" checked={value} onChange={(event) => set(event.target.checked)} />;
  } else if (kind === 'lines' || kind === 'json') {
    control = <textarea {...common} rows={kind === 'json' ? 6 : 3} value={value} onChange={(event) => set(event.target.value)} />;
  } else {
    const type = kind === 'date' ? 'date' : kind === 'number' ? 'number' : 'text';
    control = <input {...common} type={type} value={value} onChange={(event) => set(event.target.value)} />;
  }
  return (
    <label className="edit-field">
      <span>
        {name}
        {required ? ' *' : ''}
        {kind === 'lines' && <span className="muted"> (one per line)</span>}
      </span>
      {control}
    </label>
  );
}
