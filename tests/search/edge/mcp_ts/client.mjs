// Drives the platform's MCP server with the TypeScript SDK's client (not the Python SDK the server is built on):
// lists the tools, then runs each call given as JSON on argv, and prints one JSON document with the results.
// Usage: MCP_URL=http://host/mcp MCP_KEY=sk_... node client.mjs '[["find_definition", {"project": "shop", ...}], ...]'
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const calls = JSON.parse(process.argv[2] || "[]");
const transport = new StreamableHTTPClientTransport(new URL(process.env.MCP_URL), {
  requestInit: { headers: { Authorization: `Bearer ${process.env.MCP_KEY}` } },
});
const client = new Client({ name: "ts-sdk-check", version: "1.0.0" });
await client.connect(transport);
const tools = (await client.listTools()).tools.map((t) => ({ name: t.name, required: t.inputSchema.required || [] }));
const results = [];
for (const [name, args] of calls) {
  const res = await client.callTool({ name, arguments: args });
  results.push({ name, isError: res.isError === true, structured: res.structuredContent ?? null,
                 text: (res.content || []).map((c) => c.text || "").join("\n") });
}
await client.close();
process.stdout.write(JSON.stringify({ tools, results }));
