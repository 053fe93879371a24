// Drives Rover's `/mcp` with the official MCP TypeScript SDK (Client + StreamableHTTPClientTransport),
// from tests/it/mcp.rs. Usage: node mcp.mjs <gateway url> <bearer token or "-"> '<steps as JSON>'
// Steps: {"op":"list"} | {"op":"call","name":"…","arguments":{…}}. Prints one JSON report:
// {protocolVersion, server, steps: [...]}; a list step gives {tools}, a call step {result,
// schemaValid} (the SDK validates structuredContent against the listed outputSchema itself; the
// step checks it again explicitly) or {thrown} when the SDK threw.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';

const [, , base, token, stepsJson] = process.argv;
const steps = JSON.parse(stepsJson ?? '[]');
const headers = token === '-' ? {} : { Authorization: `Bearer ${token}` };
const transport = new StreamableHTTPClientTransport(new URL('/mcp', base), { requestInit: { headers } });
const client = new Client({ name: 'rover-tests', version: '1.0.0' });
const report = { steps: [] };

try {
  await client.connect(transport);
} catch (error) {
  report.connectError = { name: error?.name, message: String(error?.message ?? error), code: error?.code };
  console.log(JSON.stringify(report));
  process.exit(0);
}
report.protocolVersion = transport.protocolVersion;
report.server = client.getServerVersion();

const validator = new AjvJsonSchemaValidator();
const schemas = new Map();
for (const step of steps) {
  try {
    if (step.op === 'list') {
      const { tools } = await client.listTools();
      for (const tool of tools) schemas.set(tool.name, tool.outputSchema);
      report.steps.push({ tools });
    } else if (step.op === 'call') {
      const result = await client.callTool({ name: step.name, arguments: step.arguments ?? {} });
      const schema = schemas.get(step.name);
      const schemaValid = schema && result.structuredContent !== undefined
        ? validator.getValidator(schema)(result.structuredContent).valid
        : null;
      report.steps.push({ result, schemaValid });
    } else {
      throw new Error(`unknown step ${JSON.stringify(step)}`);
    }
  } catch (error) {
    report.steps.push({ thrown: { message: String(error?.message ?? error), code: error?.code } });
  }
}
await client.close();
console.log(JSON.stringify(report));
