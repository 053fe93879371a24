// The write tools' argument schemas (`GET /api/tool-schemas`), which the approval card builds its
// edit form from: loaded once, on the first edit.

let schemas = null;

/** Tool name → argument JSON Schema; `{}` when the gateway cannot be asked (the card then offers
 * the raw JSON). */
export async function loadSchemas() {
  if (schemas) return schemas;
  try {
    const response = await fetch('/api/tool-schemas');
    if (!response.ok) return {};
    schemas = await response.json();
  } catch {
    return {};
  }
  return schemas;
}
