/**
 * The checks of a 2026-07-28 POST (src/wire/stateless-request.ts) against basic/index §`_meta`
 * and §Error Codes, Transports §Request Metadata and §Server Validation, and the cases of the
 * conformance suite's server-stateless and http-header-validation scenarios: each check with
 * its code and HTTP status, and the order when a request fails several.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ErrorCode, type JsonRpcMessage } from '../../src/wire/jsonrpc.js';
import { META } from '../../src/wire/revision-2026.js';
import { checkStatelessRequest, missingCapabilities, type RawHeaders, type StatelessProblem, type StatelessRequest } from '../../src/wire/stateless-request.js';

const SUPPORTED = ['2026-07-28'];
const meta = (extra: Record<string, unknown> = {}) => ({ [META.protocolVersion]: '2026-07-28', [META.clientCapabilities]: {}, ...extra });

function request(method: string, params: Record<string, unknown> = {}, id: number | undefined = 7): JsonRpcMessage {
  const message: JsonRpcMessage = { jsonrpc: '2.0', method, params: { _meta: meta(), ...params } };
  if (id !== undefined) message.id = id;
  return message;
}

/** Headers by name; a list is one header given on several lines. */
type RequestHeaders = Readonly<Record<string, string | readonly string[]>>;

function headersFor(method: string, extra: RequestHeaders = {}): RequestHeaders {
  return { 'mcp-protocol-version': '2026-07-28', 'mcp-method': method, ...extra };
}

/** The header lines as Node's rawHeaders gives them: name, value, name, value… */
function linesOf(headers: RequestHeaders): RawHeaders {
  return Object.entries(headers).flatMap(([name, value]) => (typeof value === 'string' ? [[name, value]] : value.map((v) => [name, v])).flat());
}

function passes(headers: RequestHeaders, message: JsonRpcMessage): StatelessRequest {
  const check = checkStatelessRequest(linesOf(headers), message, SUPPORTED);
  assert.ok(check.ok, `expected a pass, got ${JSON.stringify(!check.ok && check.problem)}`);
  return check.request;
}

function refused(headers: RequestHeaders, message: JsonRpcMessage, status: number, code: number, text?: RegExp): StatelessProblem {
  const check = checkStatelessRequest(linesOf(headers), message, SUPPORTED);
  assert.ok(!check.ok, 'expected a refusal');
  assert.equal(check.problem.code, code, check.problem.message);
  assert.equal(check.problem.status, status);
  if (text) assert.match(check.problem.message, text);
  return check.problem;
}

describe('a conformant 2026-07-28 request', () => {
  test('passes, with what the route needs', () => {
    const message = request('tools/call', {
      name: 'execute_sql',
      arguments: { region: 'us-west1' },
      _meta: meta({ [META.clientInfo]: { name: 'c', version: '1' }, [META.logLevel]: 'info', [META.clientCapabilities]: { sampling: {} } }),
    });
    const got = passes(headersFor('tools/call', { 'mcp-name': 'execute_sql', 'mcp-param-region': 'us-west1', authorization: 'Bearer x' }), message);
    assert.deepEqual(got, {
      method: 'tools/call',
      notification: false,
      name: 'execute_sql',
      protocolVersion: '2026-07-28',
      clientCapabilities: { sampling: {} },
      clientInfo: { name: 'c', version: '1' },
      logLevel: 'info',
      paramHeaders: { 'mcp-param-region': 'us-west1' },
    });
  });

  test('clientInfo is optional (spec PR #3002); methods without a name need no Mcp-Name', () => {
    const got = passes(headersFor('server/discover'), request('server/discover'));
    assert.equal(got.clientInfo, undefined);
    assert.equal(got.name, undefined);
  });

  test('header names in any case, values with surrounding whitespace (RFC 9110 §5.5)', () => {
    passes({ 'MCP-PROTOCOL-VERSION': '2026-07-28', 'Mcp-Method': 'tools/list' }, request('tools/list'));
    passes({ 'mcp-protocol-version': '2026-07-28', 'MCP-METHOD': 'tools/list' }, request('tools/list'));
    const got = passes(headersFor('tools/call', { 'Mcp-Name': '  echo  ', 'Mcp-Param-Region': 'eu' }), request('tools/call', { name: 'echo' }));
    assert.equal(got.name, 'echo');
    assert.deepEqual(got.paramHeaders, { 'mcp-param-region': 'eu' });
  });

  test('Mcp-Name is decoded before it is compared: non-ASCII, leading space, a plain value that looks like a sentinel', () => {
    passes(headersFor('prompts/get', { 'mcp-name': '=?base64?SGVsbG8sIOS4lueVjA==?=' }), request('prompts/get', { name: 'Hello, 世界' }));
    passes(headersFor('tools/call', { 'mcp-name': '=?base64?IHBhZGRlZCA=?=' }), request('tools/call', { name: ' padded ' }));
    passes(headersFor('tools/call', { 'mcp-name': '=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=' }), request('tools/call', { name: '=?base64?literal?=' }));
    passes(headersFor('resources/read', { 'mcp-name': 'file:///projects/app/config.json' }), request('resources/read', { uri: 'file:///projects/app/config.json' }));
    passes(headersFor('tasks/get', { 'mcp-name': 't-1' }), request('tasks/get', { taskId: 't-1' }));
  });

  test('Mcp-Param-* values pass through as sent, encoded or not, a repeated one joined', () => {
    const got = passes(headersFor('tools/list', { 'mcp-param-greeting': '=?base64?SGVsbG8?=', 'mcp-param-tag': ['a', 'b'] }), request('tools/list'));
    assert.deepEqual(got.paramHeaders, { 'mcp-param-greeting': '=?base64?SGVsbG8?=', 'mcp-param-tag': 'a, b' });
  });

  test('a notification needs no _meta and no Mcp-Method; its version comes from the header', () => {
    const got = passes({ 'mcp-protocol-version': '2026-07-28' }, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 3 } });
    assert.equal(got.notification, true);
    assert.equal(got.protocolVersion, '2026-07-28');
    assert.deepEqual(got.clientCapabilities, {});
    passes({}, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 3, _meta: meta() } });
  });
});

describe('refusals, with the revision\'s codes and statuses', () => {
  test('missing _meta or its required fields: 400 -32602 (conformance RequestMetaInvalid)', () => {
    const h = headersFor('server/discover');
    refused(h, { jsonrpc: '2.0', id: 1, method: 'server/discover', params: {} }, 400, ErrorCode.InvalidParams, /_meta/);
    refused(h, { jsonrpc: '2.0', id: 1, method: 'server/discover' }, 400, ErrorCode.InvalidParams, /_meta/);
    refused(h, { jsonrpc: '2.0', id: 1, method: 'server/discover', params: { _meta: 'x' } }, 400, ErrorCode.InvalidParams);
    refused(h, { jsonrpc: '2.0', id: 1, method: 'server/discover', params: [] }, 400, ErrorCode.InvalidParams, /params must be an object/);
    refused(h, { jsonrpc: '2.0', id: 1, method: 'server/discover', params: { _meta: { [META.clientCapabilities]: {} } } }, 400, ErrorCode.InvalidParams, /protocolVersion/);
    refused(h, { jsonrpc: '2.0', id: 1, method: 'server/discover', params: { _meta: { [META.protocolVersion]: '2026-07-28' } } }, 400, ErrorCode.InvalidParams, /clientCapabilities/);
  });

  test('ill-typed _meta fields: 400 -32602', () => {
    const h = headersFor('tools/list');
    for (const bad of [{ [META.protocolVersion]: 2026 }, { [META.protocolVersion]: '' }, { [META.clientCapabilities]: [] }, { [META.clientCapabilities]: null }, { [META.clientInfo]: { name: 'c' } }, { [META.logLevel]: 'verbose' }]) {
      const problem = refused(h, request('tools/list', { _meta: meta(bad) }), 400, ErrorCode.InvalidParams);
      assert.deepEqual(problem.data, { field: Object.keys(bad)[0] });
    }
  });

  test('a missing standard header: 400 -32020 (MCP-Protocol-Version, Mcp-Method; Mcp-Name where the body names something)', () => {
    refused({ 'mcp-method': 'tools/list' }, request('tools/list'), 400, ErrorCode.HeaderMismatch, /MCP-Protocol-Version header is required/);
    refused({ 'mcp-protocol-version': '2026-07-28' }, request('tools/list'), 400, ErrorCode.HeaderMismatch, /Mcp-Method header is required/);
    for (const [method, params] of [['tools/call', { name: 'echo' }], ['prompts/get', { name: 'p' }], ['resources/read', { uri: 'file:///x' }]] as const) {
      refused(headersFor(method), request(method, params), 400, ErrorCode.HeaderMismatch, /Mcp-Name header is required/);
    }
  });

  test('a header that disagrees with the body: 400 -32020 (values are case-sensitive)', () => {
    refused(headersFor('prompts/list'), request('tools/list'), 400, ErrorCode.HeaderMismatch, /Mcp-Method/);
    refused(headersFor('TOOLS/LIST'), request('tools/list'), 400, ErrorCode.HeaderMismatch, /Mcp-Method/);
    refused(headersFor('tools/call', { 'mcp-name': 'wrong_tool_name' }), request('tools/call', { name: 'echo' }), 400, ErrorCode.HeaderMismatch, /Mcp-Name header value "wrong_tool_name" does not match body value "echo"/);
    refused(headersFor('tools/call', { 'mcp-name': 'Echo' }), request('tools/call', { name: 'echo' }), 400, ErrorCode.HeaderMismatch);
    refused(headersFor('tools/call', { 'mcp-name': 'echo' }), request('tools/call', {}), 400, ErrorCode.HeaderMismatch, /\(none\)/);
    // A name that looks like a sentinel must travel encoded: sent plain, it decodes to "echo".
    refused(headersFor('tools/call', { 'mcp-name': '=?base64?ZWNobw==?=' }), request('tools/call', { name: '=?base64?ZWNobw==?=' }), 400, ErrorCode.HeaderMismatch, /"echo"/);
  });

  test('the body names a version the header does not: 400 -32020, not -32022 (conformance HttpServerHeaderMismatch400)', () => {
    refused(headersFor('server/discover'), request('server/discover', { _meta: meta({ [META.protocolVersion]: 'v999.0.0' }) }), 400, ErrorCode.HeaderMismatch, /MCP-Protocol-Version/);
    refused(headersFor('tools/list', { 'mcp-protocol-version': '2025-11-25' }), request('tools/list'), 400, ErrorCode.HeaderMismatch, /MCP-Protocol-Version/);
  });

  test('a malformed Mcp-Name sentinel, a raw non-ASCII value, or a header given twice: 400 -32020', () => {
    refused(headersFor('tools/call', { 'mcp-name': '=?base64?SGVsbG8?=' }), request('tools/call', { name: 'Hello' }), 400, ErrorCode.HeaderMismatch, /malformed/);
    refused(headersFor('tools/call', { 'mcp-name': 'caf\u00c3\u00a9' }), request('tools/call', { name: 'café' }), 400, ErrorCode.HeaderMismatch, /characters/);
    // The edges of RFC 9110 §5.5's field content: DEL and a control character are out, HTAB in.
    refused(headersFor('tools/call', { 'mcp-name': 'ec\u007fho' }), request('tools/call', { name: 'ec\u007fho' }), 400, ErrorCode.HeaderMismatch, /characters/);
    refused(headersFor('tools/call', { 'mcp-name': 'ec\u0001ho' }), request('tools/call', { name: 'ec\u0001ho' }), 400, ErrorCode.HeaderMismatch, /characters/);
    passes(headersFor('tools/call', { 'mcp-name': 'ec\tho' }), request('tools/call', { name: 'ec\tho' }));
    refused(headersFor('tools/call', { 'mcp-name': ['echo', 'other'] }), request('tools/call', { name: 'echo' }), 400, ErrorCode.HeaderMismatch, /more than once/);
    refused({ 'mcp-protocol-version': '2026-07-28', 'Mcp-Method': 'tools/list', 'MCP-METHOD': 'tools/list' }, request('tools/list'), 400, ErrorCode.HeaderMismatch, /more than once/);
  });

  test('an unsupported version: 400 -32022 with data { supported, requested } (conformance ServerUnsupportedVersionError)', () => {
    const problem = refused({ 'mcp-protocol-version': 'v999.0.0', 'mcp-method': 'server/discover' }, request('server/discover', { _meta: meta({ [META.protocolVersion]: 'v999.0.0' }) }), 400, ErrorCode.UnsupportedProtocolVersion);
    assert.deepEqual(problem.data, { supported: ['2026-07-28'], requested: 'v999.0.0' });
  });

  test('an unsupported header version comes first, even before a missing _meta or an unknown method', () => {
    const problem = refused({ 'mcp-protocol-version': '2027-01-01' }, { jsonrpc: '2.0', id: 1, method: 'whatever/new' }, 400, ErrorCode.UnsupportedProtocolVersion);
    assert.deepEqual(problem.data, { supported: ['2026-07-28'], requested: '2027-01-01' });
    const copy = problem.data as { supported: string[] };
    copy.supported.push('x');
    assert.deepEqual(SUPPORTED, ['2026-07-28'], 'data holds a copy of the list');
  });

  test('removed and unknown methods: 404 -32601 (conformance HttpServerMethodNotFound404)', () => {
    for (const method of ['initialize', 'ping', 'logging/setLevel', 'resources/subscribe', 'resources/unsubscribe']) {
      refused(headersFor(method), request(method), 404, ErrorCode.MethodNotFound, /removed in MCP 2026-07-28/);
    }
    refused(headersFor('initialize'), request('initialize'), 404, ErrorCode.MethodNotFound, /without the 2026-07-28 MCP-Protocol-Version header/);
    refused(headersFor('unknown/method'), request('unknown/method'), 404, ErrorCode.MethodNotFound, /^Method not found: unknown\/method$/);
    refused({ 'mcp-protocol-version': '2026-07-28' }, { jsonrpc: '2.0', method: 'notifications/initialized' }, 404, ErrorCode.MethodNotFound);
  });

  test('a removed method is named even when its _meta is missing', () => {
    refused(headersFor('ping'), { jsonrpc: '2.0', id: 1, method: 'ping' }, 404, ErrorCode.MethodNotFound, /removed/);
  });

  test('a JSON-RPC response from the client is no 2026 message: 400 -32600', () => {
    refused(headersFor('tools/list'), { jsonrpc: '2.0', id: 1, result: {} }, 400, ErrorCode.InvalidRequest, /never a JSON-RPC response/);
  });

  test('a notification\'s headers, where present, must agree; a notification with neither header nor _meta names no version', () => {
    const cancelled: JsonRpcMessage = { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 3 } };
    refused({ 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'notifications/progress' }, cancelled, 400, ErrorCode.HeaderMismatch);
    refused({ 'mcp-protocol-version': '2026-07-28' }, { ...cancelled, params: { requestId: 3, _meta: { [META.protocolVersion]: 'v2' } } }, 400, ErrorCode.HeaderMismatch);
    refused({}, cancelled, 400, ErrorCode.HeaderMismatch, /MCP-Protocol-Version/);
    refused({}, { ...cancelled, params: { requestId: 3, _meta: { [META.protocolVersion]: 'v2' } } }, 400, ErrorCode.UnsupportedProtocolVersion);
  });
});

describe('missingCapabilities', () => {
  test('undefined when everything required is declared', () => {
    assert.equal(missingCapabilities({ sampling: {}, elicitation: { form: {}, url: {} } }, { sampling: {} }), undefined);
    assert.equal(missingCapabilities({ elicitation: { url: {} } }, { elicitation: { url: {} } }), undefined);
    assert.equal(missingCapabilities({ roots: { listChanged: true } }, { roots: { listChanged: true } }), undefined);
    assert.equal(missingCapabilities({}, {}), undefined);
  });

  test('the undeclared part, as a ClientCapabilities object (conformance: { "sampling": {} }, not a list)', () => {
    assert.deepEqual(missingCapabilities({}, { sampling: {} }), { sampling: {} });
    assert.deepEqual(missingCapabilities(undefined, { sampling: {} }), { sampling: {} });
    assert.deepEqual(missingCapabilities({ elicitation: { form: {} } }, { elicitation: { url: {} } }), { elicitation: { url: {} } });
    assert.deepEqual(missingCapabilities({ roots: {} }, { roots: { listChanged: true } }), { roots: { listChanged: true } });
    assert.deepEqual(missingCapabilities({ sampling: true }, { sampling: {} }), { sampling: {} });
    assert.deepEqual(missingCapabilities({ extensions: { a: {} } }, { extensions: { 'io.modelcontextprotocol/tasks': {} } }), { extensions: { 'io.modelcontextprotocol/tasks': {} } });
  });

  test('an empty elicitation capability means form mode only (client/elicitation §Capabilities)', () => {
    assert.equal(missingCapabilities({ elicitation: {} }, { elicitation: { form: {} } }), undefined);
    assert.deepEqual(missingCapabilities({ elicitation: {} }, { elicitation: { url: {} } }), { elicitation: { url: {} } });
    const declared = { elicitation: {} };
    missingCapabilities(declared, { elicitation: { form: {} } });
    assert.deepEqual(declared, { elicitation: {} }, 'the client\'s object is not changed');
  });
});
