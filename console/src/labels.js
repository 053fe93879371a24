// The activity timeline's copy: the gateway's label registry (`GET /api/tool-labels`, the same
// registry the `data-tool-label` stream parts come from), with copy derived from the verb for a
// tool that has no label.

let registry = null;

export async function loadLabels() {
  if (registry) return registry;
  try {
    const response = await fetch('/api/tool-labels');
    registry = response.ok ? await response.json() : {};
  } catch {
    registry = {};
  }
  return registry;
}

/** "create_department" → "Create department…" when the registry has no label. */
export function fallbackLabel(toolName) {
  const words = toolName.split('_').filter(Boolean);
  if (words.length === 0) return 'Working…';
  const [verb, ...rest] = words;
  return `${verb[0].toUpperCase()}${verb.slice(1)} ${rest.join(' ')}`.trim() + '…';
}

export function labelFor(toolName, labels, streamed) {
  return streamed?.label ?? labels?.[toolName] ?? fallbackLabel(toolName);
}
