/**
 * The headers of a MCP 2026-07-28 POST as a client sends them (Transports §Standard Request
 * Headers): the user's bearer token, both media types, the revision, `Mcp-Method`, and
 * `Mcp-Name` for a method that names something (tools/call, prompts/get, resources/read).
 */
export function statelessHeaders(token: string, method: string, name?: string): Record<string, string> {
  return {
    authorization: `Bearer ${token}`,
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': '2026-07-28',
    'mcp-method': method,
    ...(name === undefined ? {} : { 'mcp-name': name }),
  };
}
