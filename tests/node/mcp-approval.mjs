// Drives Rover's `/mcp` with the official MCP TypeScript SDK v2 (`@modelcontextprotocol/client`,
// protocol 2026-07-28), from tests/it/mcp.rs: a write the school's policy gates comes back as an
// `input_required` elicitation, which this client answers as told and the SDK retries with.
// Usage: node mcp-approval.mjs <gateway url> <bearer token> <answer> '<call as JSON>'
// <answer>: "approve" | "refuse" (accept with approve=false) | "decline" | "cancel".
// Prints one JSON report: {protocolVersion, asked: [elicitation params], result} or {thrown}.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

const [, , base, token, answer, callJson] = process.argv;
const call = JSON.parse(callJson);
const transport = new StreamableHTTPClientTransport(new URL('/mcp', base), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client(
  { name: 'rover-tests-v2', version: '1.0.0' },
  { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode: 'auto' } },
);
const report = { asked: [] };
client.setRequestHandler('elicitation/create', async (request) => {
  report.asked.push(request.params);
  switch (answer) {
    case 'approve': return { action: 'accept', content: { approve: true } };
    case 'refuse': return { action: 'accept', content: { approve: false } };
    default: return { action: answer };
  }
});
try {
  await client.connect(transport);
  report.protocolVersion = client.getNegotiatedProtocolVersion?.() ?? transport.protocolVersion;
  report.result = await client.callTool({ name: call.name, arguments: call.arguments ?? {} });
} catch (error) {
  report.thrown = { name: error?.name, message: String(error?.message ?? error), code: error?.code };
}
await client.close().catch(() => {});
console.log(JSON.stringify(report));
