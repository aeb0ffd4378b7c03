/**
 * `GET /openapi.json`: the OpenAPI 3.1 description of the HTTP surface (SPEC §2), served
 * by the gateway itself so that a platform team can fetch the contract of the version that
 * is actually deployed. The YAML file in `openapi/` is the one source: it is written for
 * humans and reviewed with the code, and test/ops/openapi.test.ts checks that it is a
 * valid document and that its paths match the routes the app registers.
 */
import { readFileSync, statSync } from 'node:fs';
import type { FastifyInstance } from 'fastify';
import { parseYaml } from '../config/yaml.js';

/**
 * Resolved against this module, not the working directory: `../../openapi/openapi.yaml`
 * is the same file from `src/ops/` (tsx) and from `dist/ops/` (built), wherever the
 * process was started.
 */
const DOCUMENT_URL = new URL('../../openapi/openapi.yaml', import.meta.url);

/** Reads and parses the OpenAPI document. Throws when the file is missing or not a YAML mapping. */
export function loadOpenApiDocument(): Record<string, unknown> {
  const value: unknown = parseYaml(readFileSync(DOCUMENT_URL, 'utf8'));
  if (!value || typeof value !== 'object' || Array.isArray(value)) {
    throw new Error(`${DOCUMENT_URL.pathname} is not an OpenAPI document (expected a YAML mapping)`);
  }
  return value as Record<string, unknown>;
}

/**
 * Registers `GET /openapi.json`. The file must exist at startup (a package without it fails
 * there, not on the first request); it is parsed and serialized on the first request and
 * kept. Parsing the YAML cost every start about 0.25 s of CPU (issue 43 measured it in each of
 * the suite's gateways), for a route a platform team fetches now and then; the document's
 * validity is the openapi test's to show, before a release.
 */
export function registerOpenApiRoute(app: FastifyInstance): void {
  if (!statSync(DOCUMENT_URL, { throwIfNoEntry: false })?.isFile()) throw new Error(`${DOCUMENT_URL.pathname} is missing: the gateway serves it as GET /openapi.json`);
  let json: string | undefined;
  app.get('/openapi.json', async (_request, reply) => reply.type('application/json; charset=utf-8').send((json ??= JSON.stringify(loadOpenApiDocument()))));
}
