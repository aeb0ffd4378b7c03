/**
 * The OpenAPI document (openapi/openapi.yaml) is the public contract of the HTTP surface
 * (SPEC §2). These tests keep it honest: it is a valid OpenAPI 3.1 document, its `$ref`s
 * resolve, its schemas compile and its examples satisfy them, its (method, path) pairs are
 * exactly the routes the app registers, the app serves it at `GET /openapi.json`, and the
 * answers the app gives without a backend or a token match the documented schemas.
 *
 * No network: the issuer (127.0.0.1:1) and the backend are never contacted, because no
 * request here carries a token or reaches a backend.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../src/app.js';
import { parseConfig } from '../../src/config/load.js';
import { loadOpenApiDocument, registerOpenApiRoute } from '../../src/ops/openapi-route.js';
import { MemoryStore } from '../../src/state/memory-store.js';

/**
 * Documented routes that src/app.ts does not register yet. Keep this to the minimum and
 * empty once app.ts wires them; a listed route that is registered is reported as a
 * diagnostic so that it can be removed from here.
 */
const DOCUMENTED_BUT_PENDING: ReadonlySet<string> = new Set<string>();

const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;
const PUBLIC_URL = 'https://mcp.example.com';
const HOST = 'mcp.example.com';
const BACKEND = 'demo';

type Json = Record<string, unknown>;

// ajv-formats is CommonJS: under NodeNext the default import is `module.exports`, whose `default` is the plugin.
const addFormats = addFormatsModule.default;

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Every `$ref` in the document with the JSON path where it appears. */
function collectRefs(value: unknown, path = '#', out: Array<{ ref: string; at: string }> = []): Array<{ ref: string; at: string }> {
  if (Array.isArray(value)) value.forEach((v, i) => collectRefs(v, `${path}/${i}`, out));
  else if (isObject(value)) {
    for (const [k, v] of Object.entries(value)) {
      if (k === '$ref' && typeof v === 'string') out.push({ ref: v, at: path });
      else collectRefs(v, `${path}/${k}`, out);
    }
  }
  return out;
}

/** Resolves a local JSON pointer (`#/a/b~1c`) in the document; undefined when it does not. */
function resolvePointer(doc: unknown, ref: string): unknown {
  if (!ref.startsWith('#/')) return undefined;
  let node: unknown = doc;
  for (const raw of ref.slice(2).split('/')) {
    const key = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
    if (!isObject(node) && !Array.isArray(node)) return undefined;
    if (!Object.hasOwn(node, key)) return undefined;
    node = (node as Json)[key];
  }
  return node;
}

/** Follows a `$ref` object (parameter, response, header) to its component. */
function deref(doc: Json, value: unknown): Json {
  let node = value;
  for (let i = 0; isObject(node) && typeof node.$ref === 'string'; i++) {
    assert.ok(i < 10, 'reference cycle');
    node = resolvePointer(doc, node.$ref);
  }
  assert.ok(isObject(node), 'reference resolves to an object');
  return node;
}

/** OpenAPI `{param}` from Fastify `:param` (a regexp suffix such as `:id(^\\d+)` dropped). */
function toOpenApiPath(url: string): string {
  return url.replace(/:([A-Za-z0-9_]+)(\([^)]*\))?/g, '{$1}');
}

function toFastifyPath(path: string): string {
  return path.replace(/\{([^}]+)\}/g, ':$1');
}

/** `METHOD /path` pairs the document describes. */
function documentedRoutes(doc: Json): Set<string> {
  const routes = new Set<string>();
  for (const [path, item] of Object.entries(doc.paths as Json)) {
    // Routes of the metrics listener (`x-listener: metrics`, src/ops/admin-route.ts) are not the app's.
    if (isObject(item) && item['x-listener'] === 'metrics') continue;
    for (const method of HTTP_METHODS) if (isObject(item) && method in item) routes.add(`${method.toUpperCase()} ${path}`);
  }
  return routes;
}

/**
 * The app's routes, read from `printRoutes({ commonPrefix: false })`: a tree whose lines
 * are `<indent><branch><segment> (<METHODS>)`, a child's path being its parent's plus its
 * segment. Each pair found is confirmed with `hasRoute`, so a misparse fails loudly
 * instead of passing silently. HEAD routes that Fastify adds for GET are left out.
 */
function registeredRoutes(app: FastifyInstance): Set<string> {
  const routes = new Set<string>();
  const stack: string[] = [];
  for (const line of app.printRoutes({ commonPrefix: false }).split('\n')) {
    if (!line.trim()) continue;
    const match = /^((?:│ {3}| {4})*)(?:├── |└── )(.*?)(?: \(([A-Z, ]+)\))?$/.exec(line);
    assert.ok(match, `unexpected printRoutes line: ${JSON.stringify(line)}`);
    const depth = match[1]!.length / 4;
    stack.length = depth;
    const url = (stack[depth - 1] ?? '') + match[2]!;
    stack.push(url);
    for (const method of match[3]?.split(',').map((m) => m.trim()) ?? []) {
      if (method === 'HEAD') continue;
      assert.ok(app.hasRoute({ method: method as 'GET', url }), `printRoutes listed ${method} ${url}, but hasRoute does not know it`);
      routes.add(`${method} ${toOpenApiPath(url)}`);
    }
  }
  return routes;
}

async function testApp(): Promise<FastifyInstance> {
  const config = parseConfig({
    publicUrl: PUBLIC_URL,
    auth: { issuer: 'http://127.0.0.1:1', audience: `${PUBLIC_URL}/mcp`, requiredScopes: ['mcp'] },
    log: { level: 'silent' },
    backends: [{ name: BACKEND, url: 'http://127.0.0.1:1/mcp', access: { scopes: ['demo-tools'] } }],
  });
  return buildApp(config, { store: new MemoryStore() });
}

/** The same app in broker mode, which adds the authorization server's routes (src/broker/). */
async function brokerTestApp(): Promise<FastifyInstance> {
  const config = parseConfig({
    publicUrl: PUBLIC_URL,
    auth: { mode: 'broker', issuer: 'http://127.0.0.1:1', audience: `${PUBLIC_URL}/mcp`, login: { clientId: 'switchboard' } },
    log: { level: 'silent' },
    backends: [{ name: BACKEND, url: 'http://127.0.0.1:1/mcp' }],
  });
  return buildApp(config, { store: new MemoryStore() });
}

/** Compiles the document's schemas with JSON Schema 2020-12 (the OAS 3.1 base dialect). */
class SchemaChecker {
  static readonly ID = 'https://switchboard.invalid/openapi.json';
  readonly #ajv = new Ajv2020({ allErrors: true, strict: true, strictTypes: false, strictTuples: false, strictRequired: false });

  constructor(doc: Json) {
    addFormats(this.#ajv);
    // Annotation keywords of the OAS 3.1 base dialect that JSON Schema does not define.
    for (const keyword of ['example', 'discriminator', 'xml', 'externalDocs']) this.#ajv.addKeyword(keyword);
    const schemas = (doc.components as Json).schemas as Json;
    this.#ajv.addSchema({ $id: SchemaChecker.ID, $defs: this.#rewrite(schemas) });
  }

  /** Points `#/components/schemas/X` at the registered bundle's `$defs/X`. */
  #rewrite<T>(value: T): T {
    return JSON.parse(JSON.stringify(value), (key, v: unknown) =>
      key === '$ref' && typeof v === 'string' && v.startsWith('#/components/schemas/') ? `${SchemaChecker.ID}#/$defs/${v.slice('#/components/schemas/'.length)}` : v,
    ) as T;
  }

  compile(schema: unknown): ValidateFunction {
    return this.#ajv.compile(this.#rewrite(schema as Json));
  }

  assertValid(schema: unknown, value: unknown, what: string): void {
    const validate = this.compile(schema);
    assert.ok(validate(value), `${what} does not match its schema: ${this.#ajv.errorsText(validate.errors)}\n${JSON.stringify(value)}`);
  }
}

/** The documented response of an operation, dereferenced. */
function documentedResponse(doc: Json, path: string, method: string, status: number): Json {
  const operation = ((doc.paths as Json)[path] as Json | undefined)?.[method] as Json | undefined;
  assert.ok(operation, `the document has no ${method.toUpperCase()} ${path}`);
  const responses = operation.responses as Json;
  const response = responses[String(status)] ?? responses[`${String(status)[0]}XX`];
  assert.ok(response, `${method.toUpperCase()} ${path} documents no ${status} response`);
  return deref(doc, response);
}

let doc: Json;

before(() => {
  doc = loadOpenApiDocument();
});

describe('openapi/openapi.yaml: the document', () => {
  test('is a valid OpenAPI 3.1 document', async () => {
    assert.equal(doc.openapi, '3.1.0');
    const validator = new Validator();
    const result = await validator.validate(doc);
    assert.ok(result.valid, `not valid OpenAPI: ${JSON.stringify(result.errors, null, 2)}`);
    assert.equal(validator.version, '3.1');
    assert.deepEqual(doc.servers, [{ url: PUBLIC_URL, description: (doc.servers as Json[])[0]!.description }]);
  });

  test('every $ref resolves within the document, and every component is used', () => {
    const refs = collectRefs(doc);
    assert.ok(refs.length > 0);
    const unresolved = refs.filter(({ ref }) => resolvePointer(doc, ref) === undefined);
    assert.deepEqual(unresolved, [], 'unresolved $refs');
    const used = new Set(refs.map(({ ref }) => ref));
    const unused: string[] = [];
    for (const [kind, entries] of Object.entries(doc.components as Json)) {
      if (kind === 'securitySchemes') continue; // referenced by name from `security`, not by $ref
      for (const name of Object.keys(entries as Json)) if (!used.has(`#/components/${kind}/${name}`)) unused.push(`${kind}/${name}`);
    }
    assert.deepEqual(unused, [], 'components nothing refers to');
  });

  test('operations have unique operationIds, tags, declared path parameters and a known security scheme', () => {
    const ids = new Set<string>();
    const tags = new Set(((doc.tags as Json[]) ?? []).map((t) => t.name));
    const schemes = new Set(Object.keys(((doc.components as Json).securitySchemes as Json) ?? {}));
    for (const [path, item] of Object.entries(doc.paths as Json)) {
      const pathItem = item as Json;
      for (const method of HTTP_METHODS) {
        const operation = pathItem[method] as Json | undefined;
        if (!operation) continue;
        const where = `${method.toUpperCase()} ${path}`;
        assert.equal(typeof operation.operationId, 'string', `${where}: operationId`);
        assert.ok(!ids.has(operation.operationId as string), `${where}: duplicate operationId ${String(operation.operationId)}`);
        ids.add(operation.operationId as string);
        const opTags = operation.tags as string[] | undefined;
        assert.ok(opTags?.length && opTags.every((t) => tags.has(t)), `${where}: tags must be declared at the top level`);
        assert.ok(Array.isArray(operation.security), `${where}: security must be explicit (bearerAuth or [])`);
        for (const requirement of operation.security as Json[]) for (const name of Object.keys(requirement)) assert.ok(schemes.has(name), `${where}: unknown security scheme ${name}`);
        const params = [...((pathItem.parameters as unknown[]) ?? []), ...((operation.parameters as unknown[]) ?? [])].map((p) => deref(doc, p));
        const declared = new Set(params.filter((p) => p.in === 'path').map((p) => p.name));
        const inPath = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
        assert.deepEqual([...declared].sort(), [...inPath].sort(), `${where}: path parameters`);
      }
    }
  });

  test('the MCP endpoint documents the gateway error codes and the statuses the code produces', () => {
    const codes = ((((doc.components as Json).schemas as Json).GatewayErrorCode as Json).oneOf as Json[]).map((c) => c.const);
    assert.deepEqual(codes.sort(), [-32700, -32600, -32603, -32010, -32011, -32012, -32013, -32015, -32029].sort());
    const statuses = (method: string) => Object.keys(((((doc.paths as Json)['/mcp/{backend}'] as Json)[method] as Json).responses as Json)).sort();
    assert.deepEqual(statuses('post'), ['200', '202', '400', '401', '403', '404', '406', '408', '413', '415', '421', '429', '4XX', '500', '502', '503', '504']);
    assert.deepEqual(statuses('get'), ['200', '400', '401', '403', '404', '406', '409', '421', '429', '500', '502', '503', '504']);
    assert.deepEqual(statuses('delete'), ['204', '400', '401', '403', '404', '421', '429', '500', '503']);
    assert.match(String((doc.info as Json).description), /-32042/);
  });

  test('schemas compile as JSON Schema 2020-12, and every example matches its schema', () => {
    const checker = new SchemaChecker(doc);
    for (const name of Object.keys(((doc.components as Json).schemas as Json))) checker.compile({ $ref: `#/components/schemas/${name}` });
    let checked = 0;
    const visit = (node: unknown, at: string): void => {
      if (Array.isArray(node)) return node.forEach((v, i) => visit(v, `${at}/${i}`));
      if (!isObject(node)) return;
      // Media types, parameters and headers: a `schema` next to `example` / `examples`.
      if (isObject(node.schema) && !(at.endsWith('/properties') || at.includes('/schemas/'))) {
        if ('example' in node) {
          checker.assertValid(node.schema, node.example, `${at}/example`);
          checked++;
        }
        for (const [name, example] of Object.entries((node.examples as Json | undefined) ?? {})) {
          const value = deref(doc, example).value;
          checker.assertValid(node.schema, value, `${at}/examples/${name}`);
          checked++;
        }
      }
      for (const [k, v] of Object.entries(node)) if (k !== 'schema') visit(v, `${at}/${k}`);
    };
    visit(doc.paths, '#/paths');
    visit(doc.components, '#/components');
    assert.ok(checked >= 30, `only ${checked} examples checked`);
  });
});

describe('openapi/openapi.yaml against the app', () => {
  let app: FastifyInstance;
  let brokerApp: FastifyInstance;
  let routesAsBuilt: Set<string>;
  let checker: SchemaChecker;

  before(async () => {
    app = await testApp();
    brokerApp = await brokerTestApp();
    routesAsBuilt = new Set([...registeredRoutes(app), ...registeredRoutes(brokerApp)]);
    // Until src/app.ts serves the document itself, serve it here so that it can be tested.
    if (!app.hasRoute({ method: 'GET', url: '/openapi.json' })) registerOpenApiRoute(app);
    await app.ready();
    checker = new SchemaChecker(doc);
  });
  after(() => Promise.all([app?.close(), brokerApp?.close()]));

  test('documents exactly the routes the app registers (in either auth.mode)', (t) => {
    assert.ok(routesAsBuilt.size >= 6, `printRoutes parsed to ${[...routesAsBuilt].join(', ')}`);
    const documented = documentedRoutes(doc);
    for (const route of documented) {
      const [method, path] = route.split(' ') as [string, string];
      const registered = [app, brokerApp].some((a) => a.hasRoute({ method: method as 'GET', url: toFastifyPath(path) }));
      assert.ok(registered, `${route} is documented but the test app has no such route`);
    }
    const undocumented = [...routesAsBuilt].filter((r) => !documented.has(r)).sort();
    assert.deepEqual(undocumented, [], 'routes the app registers that openapi/openapi.yaml does not document');
    const missing = [...documented].filter((r) => !routesAsBuilt.has(r) && !DOCUMENTED_BUT_PENDING.has(r)).sort();
    assert.deepEqual(missing, [], 'documented routes that buildApp does not register');
    for (const route of DOCUMENTED_BUT_PENDING) {
      assert.ok(documented.has(route), `DOCUMENTED_BUT_PENDING lists ${route}, which the document does not have`);
      if (routesAsBuilt.has(route)) t.diagnostic(`${route} is registered by buildApp now: remove it from DOCUMENTED_BUT_PENDING`);
    }
  });

  test('GET /openapi.json serves this document as JSON', async () => {
    const res = await app.inject({ method: 'GET', url: '/openapi.json' });
    assert.equal(res.statusCode, 200);
    assert.match(String(res.headers['content-type']), /^application\/json\b/);
    assert.deepEqual(res.json(), doc);
    // Served from one cached string: a second request gives the same bytes.
    assert.equal((await app.inject({ method: 'GET', url: '/openapi.json' })).body, res.body);
  });

  /** Injects a request and checks its answer against the documented response for its status. */
  async function conforms(method: 'GET' | 'POST' | 'DELETE', url: string, path: string, status: number, headers: Record<string, string> = {}, payload?: string) {
    const res = await app.inject({ method, url, headers: { host: HOST, ...headers }, ...(payload === undefined ? {} : { payload }) });
    assert.equal(res.statusCode, status, `${method} ${url}: ${res.body}`);
    const response = documentedResponse(doc, path, method.toLowerCase(), status);
    const content = response.content as Json | undefined;
    if (content) {
      const [mediaType, media] = Object.entries(content).find(([type]) => String(res.headers['content-type']).startsWith(type.split(';')[0]!)) ?? [];
      assert.ok(mediaType && isObject(media), `${method} ${url}: content-type ${String(res.headers['content-type'])} is not documented for ${status}`);
      const body = mediaType.startsWith('application/json') ? res.json() : res.body;
      checker.assertValid(media.schema, body, `${method} ${url} → ${status}`);
    }
    for (const [name, header] of Object.entries((response.headers as Json | undefined) ?? {})) {
      const h = deref(doc, header);
      const value = res.headers[name.toLowerCase()];
      if (h.required) assert.ok(value !== undefined, `${method} ${url} → ${status}: header ${name} is documented as required`);
    }
    return res;
  }

  test('probes and metadata answer as documented', async () => {
    await conforms('GET', '/healthz', '/healthz', 200);
    const ready = await conforms('GET', '/readyz', '/readyz', 200);
    assert.deepEqual(ready.json(), { status: 'ready', store: 'memory' });
    for (const path of ['/.well-known/oauth-protected-resource', '/.well-known/oauth-protected-resource/mcp']) {
      await conforms('GET', path, path, 200);
    }
    const perBackend = await conforms('GET', `/.well-known/oauth-protected-resource/mcp/${BACKEND}`, '/.well-known/oauth-protected-resource/mcp/{backend}', 200);
    assert.deepEqual(perBackend.json().scopes_supported, ['mcp', 'demo-tools']);
    await conforms('GET', '/.well-known/oauth-protected-resource/mcp/nope', '/.well-known/oauth-protected-resource/mcp/{backend}', 404);
    if (app.hasRoute({ method: 'GET', url: '/metrics' })) {
      const metrics = await conforms('GET', '/metrics', '/metrics', 200);
      assert.match(String(metrics.headers['content-type']), /^text\/plain; version=0\.0\.4/);
    }
  });

  test('refusals before authentication answer as documented', async () => {
    const accept = { accept: 'application/json, text/event-stream', 'content-type': 'application/json' };
    const ping = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' });
    for (const method of ['POST', 'GET', 'DELETE'] as const) {
      const payload = method === 'POST' ? ping : undefined;
      const headers = method === 'POST' ? accept : {};
      const unauthorized = await conforms(method, `/mcp/${BACKEND}`, '/mcp/{backend}', 401, headers, payload);
      assert.equal(unauthorized.headers['www-authenticate'], `Bearer resource_metadata="${PUBLIC_URL}/.well-known/oauth-protected-resource/mcp/${BACKEND}", scope="mcp demo-tools"`);
      await conforms(method, `/mcp/${BACKEND}`, '/mcp/{backend}', 421, { ...headers, host: 'evil.example' }, payload);
      await conforms(method, `/mcp/${BACKEND}`, '/mcp/{backend}', 403, { ...headers, origin: 'https://evil.example' }, payload);
    }
  });
});
